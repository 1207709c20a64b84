"""The rows of claims U1–U6 that 05_unified writes (:func:`claim_rows`, :func:`identity_claim_rows`), from the frames
of :mod:`reproduce.present.analyses.unified`; per-seed effects oriented so the paper's claim predicts > 0.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from reproduce.protocol import claim_rows as curves
from reproduce.spec import claims as registry
from reproduce.protocol.study import paired_effect
from reproduce.present.analyses.unified import ID_B, ID_GAMMAS, INF, M_BEST


# --------------------------------------------------------------------------------------------------
# Claims U1–U6
# --------------------------------------------------------------------------------------------------
def at_epoch(hist: pd.DataFrame, arm: str, col: str, epoch: int) -> pd.Series:
    """``col`` of ``arm`` at ``epoch``, indexed by seed."""
    return hist[(hist.arm == arm) & (hist.epoch == epoch)].set_index("seed")[col]


def paired(a: pd.Series, b: pd.Series) -> list[float]:
    """Per-seed ``a − b`` over the seeds both series have (seed order)."""
    common = sorted(set(a.index) & set(b.index))
    return [float(a[s] - b[s]) for s in common]


def growth(hist: pd.DataFrame, arm: str, col: str = "grad_hardneg") -> pd.Series:
    """Per seed ``col`` at the histories' last epoch minus at epoch 1 (U2, Eq. 12: a vanishing gradient
    early shows as growth); NaN for a seed that stopped before the last epoch."""
    last = int(hist.epoch.max())
    return at_epoch(hist, arm, col, last) - at_epoch(hist, arm, col, 1)


def log_growth(hist: pd.DataFrame, arm: str, col: str = "grad_hardneg") -> pd.Series:
    """Per seed log(``col`` at the last epoch / at epoch 1): scale-free, so VLC (γ × Unified(m = 0),
    Eqs. 7, 23) compares with Triplet-HN."""
    last = int(hist.epoch.max())
    return np.log(at_epoch(hist, arm, col, last) / at_epoch(hist, arm, col, 1))


def peak(hist: pd.DataFrame, arm: str, col: str) -> pd.Series:
    """Per seed the highest ``col`` over the epochs (U2: Fig. 4's similarities approaching 1)."""
    return hist[hist.arm == arm].groupby("seed")[col].max()


def _primary_statement(cid: str) -> str:
    return registry.claim(cid).primary.statement


def claim_rows(
    hist: pd.DataFrame, t1: pd.DataFrame, mg: pd.DataFrame, gm: pd.DataFrame, ident: pd.DataFrame, gamma: float
) -> list[dict]:
    """Every notebook row of claims U1–U6 as keyword arguments of :meth:`reproduce.present.page.Page.claim`, per-seed
    effects oriented so the paper's claim predicts > 0. Rows that are a registry primary of two arms
    (U1 Unified vs Triplet-HN, U4 m = 0.2 vs each other m, U5 γ = 60 vs γ = 20 and γ = 100) are left to
    :meth:`Page.finish`; the rows that ARE a notebook-measured primary carry ``role="primary"`` and the
    registry's statement: U2 (both validation cosines near 1 early after the warm-up:
    min(positive, hardest-negative cosine) over the first half of the post-warm-up epochs), U3 (area under
    the validation RSUM curve after the warm-up, :func:`reproduce.protocol.claim_rows.curve_mean`), U6
    (γ·Unified(m = 0) = VLC).

    U1: Tables 1–2 (test RSUM); U2: Fig. 4 / Sec. 3.3 (epoch-1 hardest-negative cosines, their peak,
    growth of the hardest-negative tangent gradient, Eq. 12); U3: Fig. 3 (validation RSUM after the
    warm-up; over the first half of the epochs); U4 / U5: Fig. 5a / 5b (test RSUM); U6: Eqs. 6–7, 21–23,
    BCLS Eqs. 10–11, 16, ladder Sec. III-B (:func:`identity_frame`)."""
    return [
        *_u1_rows(t1, gamma),
        *_u2_rows(hist),
        *_u3_rows(hist),
        *_u4_rows(t1, mg, gamma),
        *_u5_rows(gm, gamma),
        *identity_claim_rows(ident),
    ]


_RSUM_TEST = "rsum (test, %)"  # the metric text of the test-RSUM rows of U1, U4, U5


def _row(cid, source, statement, metric, arms, effects, **kw) -> dict:
    """One notebook row: keyword arguments of :meth:`reproduce.present.page.Page.claim`."""
    return dict(cid=cid, source=source, statement=statement, metric=metric, arms=arms, effects=effects, **kw)


def _u1_rows(t1: pd.DataFrame, gamma: float) -> list[dict]:
    """U1 (Tables 1, 2): Unified over Triplet-HN and over VLC on test RSUM (the registry's primary left out)."""
    return [
        _row(
            "U1",
            "Tables 1, 2",
            f"Unified (m=0.2, γ={gamma:g}) beats {other} on RSUM",
            _RSUM_TEST,
            f"Unified vs {other}",
            paired_effect(t1, "rsum", "Unified", other),
        )
        for other in ("Triplet-HN", "VLC")
        if not registry.claim("U1").primary.matches(arm_a="Unified", arm_b=other)
    ]


def _curve_primary(cid: str, source: str, arms: str, curve: pd.DataFrame, a: str, b: str, win, note: str) -> dict:
    """The notebook-measured primary row of ``cid``: per seed ``a − b`` of a curve's mean over the epochs ``win``
    after the warm-up (:func:`reproduce.protocol.claim_rows.curve_mean`), with the registry's statement and metric;
    no effects (not testable) when no epoch follows the warm-up."""
    values = curve.set_index(["arm", "seed"])["value"]
    testable = win[0] <= win[1]
    return _row(
        cid,
        source,
        _primary_statement(cid),
        registry.claim(cid).primary.legacy["metric"],
        arms,
        paired(values[a], values[b]) if testable else [],
        note=note + ("" if testable else "; not testable: no epoch after the warm-up"),
        role="primary",
    )


def _u2_rows(hist: pd.DataFrame) -> list[dict]:
    """U2 (Fig. 4, Sec. 3.3): Triplet-HN's hardest negatives closer than Unified's at epoch 1 (training batches,
    validation), both validation cosines near 1 early after the warm-up (the primary), the peak hardest-negative
    cosine, and the growth of the hardest-negative tangent gradient (Eq. 12) against Unified and VLC."""
    th, un = "Triplet-HN", "Unified"
    last = int(hist.epoch.max())
    both, win = curves.curve_mean(hist[hist.arm.isin([th, un])], curves.both_cosines, early=True)
    both_note = (
        f"effect = mean over {curves.window_text(win)} (the first half of the epochs after the longest "
        "warm-up of either arm) of min(val_pos_sim, val_hardneg_sim), Triplet-HN − Unified, paired by seed"
    )
    return [
        _row(
            "U2",
            "Fig. 4, Sec. 3.3",
            "Triplet-HN's hardest negatives are closer to the anchor than Unified's early in training "
            "(training batches, epoch 1)",
            "hardneg_sim (epoch 1, train batches)",
            "Triplet-HN vs Unified",
            paired(at_epoch(hist, th, "hardneg_sim", 1), at_epoch(hist, un, "hardneg_sim", 1)),
            note="effect = mean max_{j≠i} s_ij over epoch-1 training batches, Triplet-HN − Unified",
        ),
        _row(
            "U2",
            "Fig. 4",
            "Triplet-HN's hardest negatives are closer to the anchor than Unified's on the validation set after "
            "epoch 1 (the paper's Fig. 4 quantity)",
            "val_hardneg_sim (epoch 1)",
            "Triplet-HN vs Unified",
            paired(at_epoch(hist, th, "val_hardneg_sim", 1), at_epoch(hist, un, "val_hardneg_sim", 1)),
            note="effect = validation mean hardest-negative cosine after epoch 1, Triplet-HN − Unified",
        ),
        _curve_primary("U2", "Fig. 4", "Triplet-HN vs Unified", both, th, un, win, both_note),
        _row(
            "U2",
            "Fig. 4",
            "The highest validation hardest-negative cosine over the epochs is larger for Triplet-HN than for Unified",
            "max over epochs of val_hardneg_sim",
            "Triplet-HN vs Unified",
            paired(peak(hist, th, "val_hardneg_sim"), peak(hist, un, "val_hardneg_sim")),
            note="effect = max_epoch val_hardneg_sim(Triplet-HN) − max_epoch val_hardneg_sim(Unified), paired by seed",
        ),
        _row(
            "U2",
            "Sec. 3.3, Eq. 12",
            "Triplet-HN's tangent gradient on the hardest negative is small early: it grows from the first to the "
            "last epoch",
            "grad_hardneg (last − first epoch)",
            "Triplet-HN",
            list(growth(hist, th).values),
            note=f"effect = grad_hardneg(epoch {last}) − grad_hardneg(epoch 1) for Triplet-HN (sum reduction)",
        ),
        _row(
            "U2",
            "Sec. 3.3, Fig. 4",
            "Unified does not suffer it: its hardest-negative gradient grows less than Triplet-HN's",
            "Δgrad_hardneg (last − first), Triplet-HN − Unified",
            "Triplet-HN vs Unified",
            paired(growth(hist, th), growth(hist, un)),
            note="effect = [gH(last) − gH(1)]_Triplet-HN − [gH(last) − gH(1)]_Unified; both sum-reduced, "
            "same loss units",
        ),
        _row(
            "U2",
            "Sec. 3.3, Fig. 4",
            "VLC does not suffer it either: its hardest-negative gradient grows less (relative change) than "
            "Triplet-HN's",
            "log(gH(last)/gH(1)), Triplet-HN − VLC",
            "Triplet-HN vs VLC",
            paired(log_growth(hist, th), log_growth(hist, "VLC")),
            note="scale-free (log-ratio) because VLC's gradients are γ× Unified(m=0)'s",
        ),
    ]


def _u3_rows(hist: pd.DataFrame) -> list[dict]:
    """U3 (Fig. 3): Unified's validation RSUM curve above Triplet-HN's after the warm-up (the primary: its mean over
    the same epochs for both arms) and over the first half of training."""
    th, un = "Triplet-HN", "Unified"
    last = int(hist.epoch.max())
    half = max(1, last // 2)
    area, win = curves.curve_mean(hist[hist.arm.isin([un, th])], "val_rsum")
    area_note = (
        f"mean validation RSUM over {curves.window_text(win)} of {last} (after the longest warm-up of "
        "either arm, the same epochs for both), Unified − Triplet-HN"
    )
    early = hist[hist.epoch <= half].groupby(["arm", "seed"]).val_rsum.mean()
    return [
        _curve_primary("U3", "Fig. 3", "Unified vs Triplet-HN", area, un, th, win, area_note),
        _row(
            "U3",
            "Fig. 3",
            "Unified has a higher mean validation RSUM over the first half of training than Triplet-HN",
            f"mean val_rsum, epochs 1–{half} (%)",
            "Unified vs Triplet-HN",
            paired(early[un], early[th]),
            note=f"first half of training = epochs 1–{half} of {last}, warm-up epochs included",
        ),
    ]


def _u4_rows(t1: pd.DataFrame, mg: pd.DataFrame, gamma: float) -> list[dict]:
    """U4 (Fig. 5a, test RSUM): m = 0.2 over every other margin (the registry's primary left out), and every
    Unified with m > 0 over VLC."""
    rows = [
        _row(
            "U4",
            "Fig. 5a",
            f"{M_BEST} beats {arm} (γ={gamma:g})",
            _RSUM_TEST,
            f"{M_BEST} vs {arm}",
            paired_effect(mg, "rsum", M_BEST, arm),
        )
        for arm in mg.arm.unique()
        if arm != M_BEST and not registry.claim("U4").primary.matches(arm_a=M_BEST, arm_b=arm)
    ]
    vlc = t1[t1.arm == "VLC"].set_index("seed").rsum
    rows += [
        _row(
            "U4",
            "Fig. 5a",
            f"Unified {arm} (γ={gamma:g}) beats VLC",
            _RSUM_TEST,
            f"{arm} vs VLC",
            paired(mg[mg.arm == arm].set_index("seed").rsum, vlc),
        )
        for arm in mg.arm.unique()
        if float(arm.split("=")[1]) > 0
    ]
    return rows


def _u5_rows(gm: pd.DataFrame, gamma: float) -> list[dict]:
    """U5 (Fig. 5b, test RSUM): the study's γ over the lowest γ of the sweep and over γ = ∞ (Triplet-HN), where the
    sweep has them (the registry's primary left out)."""
    g_best = f"γ={gamma:g}"
    lowest = f"γ={gm.g[np.isfinite(gm.g)].min():g}" if len(gm) else ""
    return [
        _row(
            "U5",
            "Fig. 5b",
            f"RSUM rises then falls with γ: {g_best} beats {other}",
            _RSUM_TEST,
            f"{g_best} vs {other}",
            paired_effect(gm, "rsum", g_best, other),
        )
        for other in (lowest, INF)
        if other in set(gm.arm) and not registry.claim("U5").primary.matches(arm_a=g_best, arm_b=other)
    ]


def identity_claim_rows(ident: pd.DataFrame) -> list[dict]:
    """U6 rows from :func:`identity_frame` (identity kind: every per-check deviation must stay within the
    tolerance): the two γ → ∞ limits at the largest γ (Unified Eqs. 6, 21–22; BCLS Eq. 16), the bound and
    monotonicity of Unified's gap, γ·Unified(m = 0) = VLC (Eqs. 7, 23; the registry's primary), the Kendall
    slice and binary labels (BCLS Eqs. 10–11) and the ladder with β₂ = 0 (Sec. III-B)."""

    def dev(identity, col="value_dev", gamma=None):
        d = ident[ident.identity == identity]
        return list(d[col] if gamma is None else d[d.gamma == gamma][col])

    n_seeds = ident.seed.nunique()
    common = dict(metric="relative deviation", arms=f"random float64 matrices, B={ID_B}, {n_seeds} seeds")
    g_max = max(ID_GAMMAS)
    uid = "Unified(m=0.2, γ) → Triplet-HN"
    sn = ident[ident.identity == "Triplet-SN(γ) → Triplet-HN"]
    sn_ok = bool(((sn.gap >= -1e-12) & (sn.gap <= sn.bound + 1e-12)).all())
    vid = "γ·Unified(m=0) = VLC"
    vlc_gammas = ", ".join(f"{g:g}" for g in ident[ident.identity == vid].gamma.unique())
    kend = [i for i in ident.identity.unique() if i.startswith("Kendall")]
    lad = [i for i in ident.identity.unique() if i.startswith("Ladder")]
    ident_kw = dict(kind="identity", tolerance=1e-10)
    return [
        dict(
            cid="U6",
            source="Eqs. 6, 21–22",
            statement="Unified → Triplet-HN as γ → ∞ (value at γ=1e5)",
            effects=dev(uid, gamma=g_max),
            kind="identity",
            tolerance=1e-3,
            note="relative value deviation at γ = 1e5",
            **common,
        ),
        dict(
            cid="U6",
            source="Eqs. 6, 21–22",
            statement="0 ≤ Unified − Triplet-HN ≤ 2B·log(B)/γ and the gap shrinks monotonically for γ = 1e2…1e5",
            effects=_gap_violations(ident[ident.identity == uid]),
            note="effects = bound violations (loss units) and increases of the gap between successive γ",
            **ident_kw,
            **dict(common, metric="bound / monotonicity violation"),
        ),
        dict(
            cid="U6",
            source="Eqs. 7, 23",
            statement=_primary_statement("U6"),
            effects=dev(vid) + dev(vid, "grad_dev"),
            role="primary",
            note=f"values and gradients, γ = {vlc_gammas}",
            **ident_kw,
            **common,
        ),
        dict(
            cid="U6",
            source="BCLS Eq. 16",
            statement="Triplet-SN → Triplet-HN as γ → ∞ (value at γ=1e5)",
            effects=dev("Triplet-SN(γ) → Triplet-HN", gamma=g_max),
            kind="identity",
            tolerance=1e-3,
            note=f"relative value deviation at γ = 1e5; 0 ≤ gap ≤ 2B·log(B−1)/γ at every γ: {sn_ok}",
            **common,
        ),
        dict(
            cid="U6",
            source="BCLS Eqs. 10–11",
            statement="Kendall loss restricted to j = i = triplet loss "
            "with m = 0 (continuous labels; and whole Kendall with binary labels)",
            effects=sum((dev(i) + dev(i, "grad_dev") for i in kend), []),
            **ident_kw,
            **common,
        ),
        dict(
            cid="U6",
            source="Ladder Sec. III-B",
            statement="Ladder loss with β₂ = 0 = triplet loss (hard-contrastive and all pairs)",
            effects=sum((dev(i) + dev(i, "grad_dev") for i in lad), []),
            note=f"control: with β₂ = 0.25 the deviation is ≥ {ident.control_dev.min():.2g} (not vacuous)",
            **ident_kw,
            **common,
        ),
    ]


def _gap_violations(u: pd.DataFrame) -> list[float]:
    """What breaks ``0 ≤ gap ≤ bound, shrinking in γ`` in the checks ``u`` of Unified → Triplet-HN (Eqs. 6,
    21–22), 0 where nothing does: per check how far the gap leaves [0, bound], then per seed its largest
    increase between successive γ."""
    viol = np.maximum(np.maximum(-u.gap, u.gap - u.bound), 0.0)
    mono = (
        u.sort_values(["seed", "gamma"])
        .groupby("seed")
        .gap.apply(lambda s: float(np.maximum(np.diff(s.values), 0).max()))
    )
    return list(viol) + list(mono)
