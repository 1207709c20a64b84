"""Relevance statistics that set or explain loss hyper-parameters: θ quantiles and SAM margins.

**Ladder θ calibrated to the relevance model in use** (CVSE++, Ladder paper Secs. IV-A, V-B). θ₁ = 0.40
was set for the paper's Sentence-BERT; another relevance model gives other cosines. The paper ties the
number of ladders to the *scope of interest* N: "with a small scope-of-interest, e.g. top-100, only a
few ladders are required, e.g. L = 2 … the low-level ladder is responsible for the ranking order of
the very top candidates, e.g. top-1 ~ top-100; the high-level ladder … top-100 ~ top-200" (Sec. V-B),
and measures it with CS@100 / CS@200 on the COCO 1K test: 1,000 images × 5 captions = 5,000
candidates per image query, 5 of them ground truth. Level 1 (rel ≥ θ₁) is then the ≈ 100 − 5 = 95
most relevant of the 4,995 non-GT candidates, level 2 (θ₂ ≤ rel < θ₁, L = 3) the next 100:

    share(rel ≥ θ₁) = 95 / 4995 ≈ 1.9 %,    share(rel ≥ θ₂) = 195 / 4995 ≈ 3.9 %

so θ₁ (θ₂) is the 1 − 1.9 % (1 − 3.9 %) quantile of the off-diagonal relevance the loss sees in its
training batches (:func:`calibrated_thetas`). This is a derivation from the paper's text, not a fit to
any result; it assumes the paper's θ put its level 1 where its scope of interest is (the paper never
states the share directly). :func:`theta_table` shows the relevance distribution against θ (share of
pairs above, rows with an empty level 1).

**SAM margins** (SAM Eq. 7): α = (φ(G_p, c⁺) − φ(G_p, c⁻)) / τ. With φ = CIDEr-D and the candidate
among the references, φ(positive) ≥ 2, so many margins exceed the authors' clamp at 1;
:func:`margin_distribution` measures it on real batches.

Example (a toy relevance with a known distribution)::

    >>> import numpy as np
    >>> from coherent_itr.data import relevance_stats as rs
    >>> mats = [np.arange(16.0).reshape(4, 4)]
    >>> rs.off_diagonal(mats).size
    12
    >>> rs.calibrated_theta(np.arange(1, 101), share=0.05)      # 5 % of the values are ≥ θ
    96.0
    >>> rs.margin_distribution(mats, tau=2.0)["median"]
    0.0
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import pandas as pd

# scope of interest (CVSE++ Sec. V-B) on the COCO 1K test: 5,000 candidates, 5 GT → level shares
COCO1K_CANDIDATES, COCO1K_GT = 5000, 5
SCOPE_SHARES = (
    (100 - COCO1K_GT) / (COCO1K_CANDIDATES - COCO1K_GT),
    (200 - COCO1K_GT) / (COCO1K_CANDIDATES - COCO1K_GT),
)
PAPER_THETAS = (0.40, 0.35)  # Ladder paper Sec. IV-A (θ₁, Sentence-BERT) and Sec. V-B (θ₂)


def training_batches(
    n_images: int, captions_per_image: int, batch_size: int = 128, n_batches: int = 50, seed: int = 0
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Random training batches drawn as the training loop draws them with ``sampling="captions"``
    (a random permutation of every caption, cut into batches).

    Args:
        n_images: images in the split.
        captions_per_image: captions per image (caption k belongs to image k // captions_per_image).
        batch_size: captions per batch (≥ 2).
        n_batches: batches to draw (fewer if the split has fewer full batches).
        seed: seed of the permutation.

    Returns:
        An iterator of ``(image_idx, caption_idx)`` integer arrays, one pair per batch.
    """
    if n_images < 1 or captions_per_image < 1 or batch_size < 2 or n_batches < 1:
        raise ValueError(
            f"training_batches: need n_images, captions_per_image, n_batches ≥ 1 and batch_size ≥ 2, "
            f"got {n_images}, {captions_per_image}, {n_batches}, {batch_size}"
        )
    rng = np.random.default_rng(seed)
    order = rng.permutation(n_images * captions_per_image)
    n = min(n_batches, len(order) // batch_size)
    for b in range(n):
        cap = order[b * batch_size : (b + 1) * batch_size]
        yield cap // captions_per_image, cap


def off_diagonal(matrices: Iterable[np.ndarray]) -> np.ndarray:
    """Every off-diagonal entry of square batch matrices, concatenated.

    Args:
        matrices: square (B, B) matrices, e.g. the relevance of a batch's images to its captions.

    Returns:
        A float64 vector of the B² − B off-diagonal entries of every matrix, in order.
    """
    out = []
    for m in matrices:
        m = np.asarray(m, dtype=np.float64)
        if m.ndim != 2 or m.shape[0] != m.shape[1]:
            raise ValueError(f"off_diagonal: expected square matrices, got shape {m.shape}")
        out.append(m[~np.eye(m.shape[0], dtype=bool)])
    if not out:
        raise ValueError("off_diagonal: no matrices given")
    return np.concatenate(out)


def calibrated_theta(values: np.ndarray, share: float) -> float:
    """θ such that a fraction ``share`` of ``values`` is ≥ θ.

    Args:
        values: finite relevance values (any shape).
        share: the fraction in (0, 1) that should reach θ.

    Returns:
        The (1 − share) quantile with numpy's "higher" method, so θ is an observed value and
        ``mean(values ≥ θ) ≥ share``.
    """
    values = np.asarray(values, dtype=np.float64).ravel()
    if values.size == 0 or not np.isfinite(values).all():
        raise ValueError(f"calibrated_theta: values must be non-empty and finite (got {values.size} values)")
    if not 0 < share < 1:
        raise ValueError(f"calibrated_theta: share must be in (0, 1), got {share!r}")
    return float(np.quantile(values, 1.0 - share, method="higher"))


def calibrated_thetas(matrices: Iterable[np.ndarray], shares=SCOPE_SHARES) -> tuple[float, ...]:
    """Ladder thresholds at the scope-of-interest shares (see the module docstring).

    Args:
        matrices: square batch relevance matrices (:func:`relevance_batches`).
        shares: the share of off-diagonal pairs each level should hold (default :data:`SCOPE_SHARES`).

    Returns:
        (θ₁, θ₂, …), one :func:`calibrated_theta` per share.
    """
    values = off_diagonal(matrices)
    return tuple(calibrated_theta(values, s) for s in shares)


def theta_table(matrices: list[np.ndarray], thetas) -> pd.DataFrame:
    """The relevance distribution against candidate thresholds.

    Args:
        matrices: square batch relevance matrices.
        thetas: thresholds to tabulate.

    Returns:
        One row per θ: ``theta``, ``share_pairs_at_or_above`` (off-diagonal pairs with rel ≥ θ) and
        ``share_rows_empty_level1`` (batch rows whose level 1 is empty: no non-positive candidate
        reaches θ, so the ladder degenerates to the triplet).
    """
    mats = [np.asarray(m, dtype=np.float64) for m in matrices]
    values = off_diagonal(mats)
    rows = []
    for t in thetas:
        empty = np.concatenate([~((m >= t) & ~np.eye(m.shape[0], dtype=bool)).any(axis=1) for m in mats])
        rows.append(
            {
                "theta": float(t),
                "share_pairs_at_or_above": float((values >= t).mean()),
                "share_rows_empty_level1": float(empty.mean()),
            }
        )
    return pd.DataFrame(rows)


def relevance_batches(provider, n_images: int, captions_per_image: int, **kw) -> list[np.ndarray]:
    """The relevance matrices a loss sees on random training batches.

    Args:
        provider: a :class:`~coherent_itr.data.base.RelevanceProvider` (its ``batch(image_idx, caption_idx)``).
        n_images, captions_per_image: the split's size.
        **kw: ``batch_size``, ``n_batches``, ``seed`` of :func:`training_batches`.

    Returns:
        One (B, B) float array per batch.
    """
    return [np.asarray(provider.batch(i, c)) for i, c in training_batches(n_images, captions_per_image, **kw)]


def margin_distribution(phi_matrices: Iterable[np.ndarray], tau: float) -> dict:
    """SAM margins α = (φ_pp − φ_pj) / τ over every off-diagonal pair j of each batch: the distribution a
    uniformly random negative draws from (SAM Eq. 7, i2t direction).

    Args:
        phi_matrices: square batch matrices with ``phi[p, j] = φ(G_p, c_j)``.
        tau: SAM's temperature τ > 0.

    Returns:
        ``{"tau", "n", "median", "mean", "q25", "q75", "share_above_1", "share_below_0"}``: the count,
        median, mean and quartiles of α, the share above 1 (where the authors' clamp bites) and below 0.
    """
    if not tau > 0:
        raise ValueError(f"margin_distribution: tau must be > 0, got {tau!r}")
    alphas = []
    for m in phi_matrices:
        m = np.asarray(m, dtype=np.float64)
        if m.ndim != 2 or m.shape[0] != m.shape[1]:
            raise ValueError(f"margin_distribution: expected square φ matrices, got shape {m.shape}")
        a = (np.diag(m)[:, None] - m) / tau
        alphas.append(a[~np.eye(m.shape[0], dtype=bool)])
    if not alphas:
        raise ValueError("margin_distribution: no matrices given")
    a = np.concatenate(alphas)
    return {
        "tau": float(tau),
        "n": int(a.size),
        "median": float(np.median(a)),
        "mean": float(a.mean()),
        "q25": float(np.quantile(a, 0.25)),
        "q75": float(np.quantile(a, 0.75)),
        "share_above_1": float((a > 1).mean()),
        "share_below_0": float((a < 0).mean()),
    }
