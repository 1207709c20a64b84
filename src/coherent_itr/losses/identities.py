"""The identities between the losses, as numerical checks on random similarity matrices (claim U6).

* Unified paper Eqs. 6, 21–22: Unified(m, γ) → Triplet-HN(m) as γ → ∞, with
  ``0 ≤ L_Unified − L_Triplet-HN ≤ 2·B·log(B)/γ`` (sum reduction);
* Unified paper Eqs. 7, 23: ``γ · L_Unified(m = 0, γ) = L_VLC(γ)``, exactly;
* BCLS Eq. 16: Triplet-SN(γ) → Triplet-HN as γ → ∞, with ``0 ≤ gap ≤ 2·B·log(B − 1)/γ``;
* BCLS Eqs. 10–11: the j = i slice of the Kendall loss (Eq. 4, α = 0, r_ii = 1 > r_ik) is the
  all-negatives triplet loss with m = 0; with binary labels (R = I) the whole Kendall loss is (any α < 1);
* Ladder paper Sec. III-B: the ladder loss with β₂ = 0 is the triplet loss (hard-contrastive:
  Triplet-HN; all pairs: the all-negatives triplet loss).

Each check builds both sides with :func:`coherent_itr.losses.build` (sum reduction) and returns one row:
``identity`` (name), ``gap = a − b`` (loss units), ``value_dev = |a − b| / |b|``, ``grad_dev =
max|∇a − ∇b| / max|∇b|`` (gradients with respect to the similarity matrix), and where it applies
``gamma``, ``bound`` (the analytic upper bound of the gap) and ``control_dev`` (the same deviation for a
setting where the identity must NOT hold, so the check is not vacuous). :func:`all_checks` is the
table of notebook 05 (``reproduce.present.analyses.unified``); ``tests/lib/losses/test_losses_identities.py`` checks the
same functions against loops written from the equations.
"""

from __future__ import annotations

import math
from typing import Callable, Iterable

import torch

from .registry import build


def random_sim(seed: int, n: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """An n×n similarity matrix, entries uniform in [−1, 1] (drawn in float64, then cast to ``dtype``)."""
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(n, n, generator=g, dtype=torch.float64) * 2 - 1).to(dtype)


def random_rel(seed: int, n: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """An n×n relevance matrix with r_ii = 1 > r_ik (BCLS Sec. III-A): off-diagonal uniform in [−0.2, 0.9],
    drawn with generator seed ``100 + seed`` (so it differs from :func:`random_sim` of the same seed)."""
    g = torch.Generator().manual_seed(100 + seed)
    r = torch.rand(n, n, generator=g, dtype=torch.float64) * 1.1 - 0.2
    r.fill_diagonal_(1.0)
    return r.to(dtype)


def value_and_grad(fn: Callable[[torch.Tensor], torch.Tensor], S: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``fn(S)`` (detached scalar tensor) and its gradient with respect to ``S`` (autograd)."""
    s = S.clone().requires_grad_(True)
    v = fn(s)
    (g,) = torch.autograd.grad(v, s)
    return v.detach(), g


def rel_dev(a: float, b: float) -> float:
    """Relative deviation ``|a − b| / |b|`` (``|b|`` floored at 1e-300)."""
    return abs(float(a) - float(b)) / max(abs(float(b)), 1e-300)


def grad_dev(ga: torch.Tensor, gb: torch.Tensor) -> float:
    """Relative gradient deviation ``max|ga − gb| / max|gb|`` (denominator floored at 1e-300)."""
    return float((ga - gb).abs().max() / gb.abs().max().clamp(min=1e-300))


def compare(identity: str, fn_a, fn_b, S: torch.Tensor, **extra) -> dict:
    """One row: a = ``fn_a(S)``, b = ``fn_b(S)``; gap, value_dev, grad_dev, plus ``extra`` columns."""
    a, ga = value_and_grad(fn_a, S)
    b, gb = value_and_grad(fn_b, S)
    return {
        "identity": identity,
        **extra,
        "gap": float(a) - float(b),
        "value_dev": rel_dev(a, b),
        "grad_dev": grad_dev(ga, gb),
    }


def kendall_j_eq_i(S: torch.Tensor, R: torch.Tensor) -> torch.Tensor:
    """The j = i slice of the Kendall loss (BCLS Eq. 4, α = 0), from public losses only: Kendall(S, R)
    minus [Kendall(S, R with the diagonal lowered below every value) − Triplet(−S, m = 0, all negatives)].
    Lowering the diagonal makes the positive the least relevant candidate, so no (j = i, k) pair is
    constrained and the (j, k = i) pairs Σ_i Σ_{j≠i} [s_ii − s_ij]_+ (+ text→image) are added; every other
    (j, k) pair keeps its order."""
    R_low = R.clone()
    R_low.fill_diagonal_(-2.0)
    full = build("kendall", alpha=0.0)(S, R)
    off = build("kendall", alpha=0.0)(S, R_low)
    added = build("triplet", margin=0.0, max_violation=False)(-S)
    return full - (off - added)


def unified_vs_triplet_hn(S: torch.Tensor, gamma: float, margin: float = 0.2) -> dict:
    """Unified Eqs. 6, 21–22: Unified(m, γ) − Triplet-HN(m), with the bound 2·B·log(B)/γ."""
    b = S.shape[0]
    return compare(
        f"Unified(m={margin:g}, γ) → Triplet-HN",
        lambda s: build("unified", margin=margin, gamma=gamma)(s),
        lambda s: build("triplet", margin=margin)(s),
        S,
        gamma=gamma,
        bound=2 * b * math.log(b) / gamma,
    )


def triplet_sn_vs_triplet_hn(S: torch.Tensor, gamma: float, margin: float = 0.2) -> dict:
    """BCLS Eq. 16: Triplet-SN(m, γ) − Triplet-HN(m), with the bound 2·B·log(B − 1)/γ."""
    b = S.shape[0]
    return compare(
        "Triplet-SN(γ) → Triplet-HN",
        lambda s: build("triplet_sn", margin=margin, gamma=gamma)(s),
        lambda s: build("triplet", margin=margin)(s),
        S,
        gamma=gamma,
        bound=2 * b * math.log(b - 1) / gamma,
    )


def gamma_unified_m0_vs_vlc(S: torch.Tensor, gamma: float) -> dict:
    """Unified Eqs. 7, 23: γ · Unified(m = 0, γ) − VLC(γ) (exactly 0 in exact arithmetic)."""
    return compare(
        "γ·Unified(m=0) = VLC",
        lambda s: gamma * build("unified", margin=0.0, gamma=gamma)(s),
        lambda s: build("vlc", gamma=gamma)(s),
        S,
        gamma=gamma,
    )


def kendall_slice_vs_triplet_m0(S: torch.Tensor, R: torch.Tensor) -> dict:
    """BCLS Eqs. 10–11 on continuous labels: :func:`kendall_j_eq_i` − Triplet(all negatives, m = 0)."""
    return compare(
        "Kendall j=i slice (continuous r) = Triplet(all neg., m=0)",
        lambda s: kendall_j_eq_i(s, R),
        lambda s: build("triplet", margin=0.0, max_violation=False)(s),
        S,
    )


def kendall_binary_vs_triplet_m0(S: torch.Tensor, alpha: float) -> dict:
    """BCLS Eqs. 10–11 with binary labels R = I: Kendall(α) − Triplet(all negatives, m = 0), any α < 1."""
    eye = torch.eye(S.shape[0], dtype=S.dtype)
    return compare(
        f"Kendall(binary r, α={alpha:g}) = Triplet(all neg., m=0)",
        lambda s: build("kendall", alpha=alpha)(s, eye),
        lambda s: build("triplet", margin=0.0, max_violation=False)(s),
        S,
    )


def ladder_beta2_0_vs_triplet(S: torch.Tensor, R: torch.Tensor, hard: bool) -> dict:
    """Ladder Sec. III-B: ladder(β = (1, 0)) − triplet (m = 0.2; hard-contrastive ↔ Triplet-HN, all pairs ↔
    all negatives); ``control_dev``: the ladder with its default β₂ = 0.25 against the same triplet."""
    tri = build("triplet", margin=0.2, max_violation=hard)
    row = compare(
        f"Ladder(β₂=0{', HC' if hard else ', all pairs'}) = {'Triplet-HN' if hard else 'Triplet(all neg.)'}",
        lambda s: build("ladder", beta=(1.0, 0.0), hard_contrastive=hard)(s, R),
        lambda s: tri(s),
        S,
    )
    control = build("ladder", hard_contrastive=hard)(S, R)
    row["control_dev"] = rel_dev(control, tri(S))
    return row


def all_checks(
    n: int = 32,
    seeds: Iterable[int] = range(5),
    gammas: Iterable[float] = (1e2, 1e3, 1e4, 1e5),
    vlc_gammas: Iterable[float] = (10.0, 60.0, 100.0),
) -> list[dict]:
    """Every check on ``random_sim(seed, n)`` / ``random_rel(seed, n)`` for each seed, in a fixed order:
    per γ in ``gammas`` Unified → Triplet-HN and Triplet-SN → Triplet-HN; per γ in ``vlc_gammas``
    γ·Unified(m = 0) = VLC; the Kendall slice; Kendall with binary labels (α = 0, 0.2); the ladder with
    β₂ = 0 (hard-contrastive, all pairs). Each row also has ``seed``."""
    gammas, vlc_gammas = list(gammas), list(vlc_gammas)
    rows = []
    for seed in seeds:
        S, R = random_sim(seed, n), random_rel(seed, n)
        checks = []
        for gamma in gammas:
            checks += [unified_vs_triplet_hn(S, gamma), triplet_sn_vs_triplet_hn(S, gamma)]
        checks += [gamma_unified_m0_vs_vlc(S, gamma) for gamma in vlc_gammas]
        checks.append(kendall_slice_vs_triplet_m0(S, R))
        checks += [kendall_binary_vs_triplet_m0(S, alpha) for alpha in (0.0, 0.2)]
        checks += [ladder_beta2_0_vs_triplet(S, R, hard) for hard in (True, False)]
        rows += [{**c, "seed": seed} for c in checks]
    return rows
