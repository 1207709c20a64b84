"""Check the verdict rule itself (issue 15, item 8): simulated claims with and without a true effect.

Each draw is one data set's family of ``K`` primary rows, each with ``n`` seeds. A row's per-seed
effects are e_s = θ + q + ε_s with ε_s ~ N(0, σ_d²) (seed-to-seed noise of a single-seed paired
difference) and q ~ N(0, σ_q²) (test-set sampling, common to all seeds of a row; the ledger knows
its variance from the query bootstrap). The rule of :mod:`reproduce.ledger` is then applied exactly
as to real rows: se² = s²/n + σ_q² with Welch–Satterthwaite df, noise floor = NOISE_K × the
pooled seed sd of the family's rows, T = max(noise floor, FRACTION × |paper effect|), Holm across
the K rows, verdicts by :func:`decide_arrays` (checked against :func:`reproduce.ledger.decide` in
the tests).

* null: θ = 0 for every row → the share of rows called ``reproduced`` or ``not reproduced``
  (wrong decisions) and of families with at least one;
* planted: one row with θ = the paper's effect (or a multiple) among K − 1 null rows → the share
  of draws in which it is called ``reproduced`` (detection rate).

The study's noise: σ_d read from the committed ledger's RSUM rows (:func:`study_noise`: the RSUM
noise floor of each data set / NOISE_K), σ_q = 2 RSUM points (stated assumption: about the
bootstrap sd of an RSUM difference over 1000 test images / 5000 captions), n = 3 seeds,
K = 36 primary rows. ``python -m reproduce.verdict_simulation`` writes
``results/benchmarks/verdict_simulation.md``.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
from scipy import stats

from .ledger import ALPHA, FRACTION, NOISE_K

ROOT = Path(__file__).resolve().parent.parent
CLAIMS_CSV = ROOT / "results" / "claims.csv"
SIGMA_Q = 2.0
PAPER_RSUM_EFFECTS = {"B1": 9.7, "B2": 15.5, "B3": 26.9, "N1": 5.0, "U1": 4.3}


def study_noise(claims_csv: str | Path = CLAIMS_CSV) -> dict[str, float]:
    """σ_d of a single-seed paired RSUM difference per data set, from the ledger: its RSUM noise floor
    (the same for every RSUM row of a data set) divided by NOISE_K."""
    import pandas as pd

    path = Path(claims_csv)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no claims ledger to read the noise from (run `make reproduce` first)")
    df = pd.read_csv(path)
    missing = {"dataset", "metric", "noise_floor"} - set(df.columns)
    if missing:
        raise ValueError(f"{path}: columns {sorted(missing)} missing (expected the ledger of reproduce.ledger_io)")
    rs = df[(df.metric == "rsum") & np.isfinite(df.noise_floor)]
    if rs.empty:
        raise ValueError(f"{path}: no RSUM row with a noise floor")
    return {d: float(g.noise_floor.median()) / NOISE_K for d, g in rs.groupby("dataset", sort=True)}


def holm_rows(p: np.ndarray) -> np.ndarray:
    """Holm-adjusted p-values along the last axis, vectorised over the leading axes (equal to
    ``statsmodels`` ``multipletests(method="holm")`` row by row — tested)."""
    p = np.asarray(p, dtype=float)
    m = p.shape[-1]
    order = np.argsort(p, axis=-1, kind="stable")
    ps = np.take_along_axis(p, order, axis=-1)
    adj = np.minimum(1.0, np.maximum.accumulate(ps * (m - np.arange(m)), axis=-1))
    out = np.empty_like(adj)
    np.put_along_axis(out, order, adj, axis=-1)
    return out


def decide_arrays(
    effects: np.ndarray, query_var: float, paper_effect: np.ndarray | float = 0.0, noise: float | None = None
) -> tuple[np.ndarray, dict]:
    """Verdicts of a family (last-but-one axis = rows, last axis = seeds; leading axes = draws)
    under the ledger's rule for direction claims. Returns (verdict codes, details); codes:
    0 inconclusive, 1 reproduced, 2 not reproduced, 3 no effect."""
    e = np.asarray(effects, dtype=float)
    n = e.shape[-1]
    mean = e.mean(axis=-1)
    s2 = e.var(axis=-1, ddof=1)
    seed_var = s2 / n
    se = np.sqrt(seed_var + query_var)
    df = (n - 1) * ((seed_var + query_var) / seed_var) ** 2
    p = 2 * stats.t.sf(np.abs(mean) / se, df)
    if noise is None:
        noise = NOISE_K * np.sqrt(s2.mean(axis=-1, keepdims=True))  # pooled over the family's rows
    thr = np.broadcast_to(np.maximum(noise, FRACTION * np.abs(paper_effect)), mean.shape)
    p_adj = holm_rows(p)
    ratio = np.where(p_adj > 0, np.minimum(1.0, p / np.where(p_adj > 0, p_adj, 1.0)), 1.0 / p.shape[-1])
    level = 1 - ALPHA * ratio
    half = stats.t.ppf(0.5 + level / 2, df) * se
    lo, hi = mean - half, mean + half
    sig = p_adj < ALPHA
    code = np.zeros(mean.shape, dtype=int)
    code[(-thr < lo) & (hi < thr)] = 3
    code[sig & (mean > 0) & (mean >= thr)] = 1
    code[sig & (mean < 0) & (-mean >= thr)] = 2
    return code, {"mean": mean, "lo": lo, "hi": hi, "p": p, "p_adj": p_adj, "thr": thr, "df": df, "se": se}


def simulate(
    sigma_d: float,
    sigma_q: float = SIGMA_Q,
    n_seeds: int = 3,
    k_rows: int = 36,
    draws: int = 1000,
    planted: float = 0.0,
    paper_effect: float = 0.0,
    seed: int = 0,
) -> dict:
    """One scenario: ``draws`` families of ``k_rows`` rows; row 0 carries ``planted`` (others 0).
    Every row's practical threshold uses ``paper_effect``."""
    rng = np.random.default_rng(seed)
    theta = np.zeros(k_rows)
    theta[0] = planted
    eff = (
        theta[None, :, None]
        + rng.normal(0, sigma_q, (draws, k_rows, 1))
        + rng.normal(0, sigma_d, (draws, k_rows, n_seeds))
    )
    code, _ = decide_arrays(eff, sigma_q**2, paper_effect)
    null = code[:, 1:] if planted else code
    wrong = np.isin(null, (1, 2))
    return {
        "wrong_row_rate": float(wrong.mean()),
        "wrong_family_rate": float(wrong.any(axis=1).mean()),
        "no_effect_rate": float((null == 3).mean()),
        "detect_rate": float((code[:, 0] == 1).mean()) if planted else math.nan,
        "draws": draws,
        "k_rows": k_rows,
        "n_seeds": n_seeds,
        "sigma_d": sigma_d,
        "sigma_q": sigma_q,
    }


def report(draws: int = 1000, noise: dict[str, float] | None = None) -> str:
    t0 = time.perf_counter()
    noise = study_noise() if noise is None else noise
    lines = [
        "# The verdict rule under simulation (issue 15, item 8)",
        "",
        f"Generated by `python -m reproduce.verdict_simulation` (module docstring: the model). Rule: "
        f"T = max({NOISE_K:g} × pooled seed sd, {FRACTION:g} × |paper effect|), Holm over K = 36 primary rows, "
        f"α = {ALPHA}. {draws} simulated families per scenario, 3 seeds, σ_q = {SIGMA_Q:g} RSUM points; σ_d "
        f"per data set = its RSUM noise floor in `results/claims.csv` / {NOISE_K:g}.",
        "",
        "## No true effect anywhere",
        "",
        "| data set noise (σ_d, RSUM) | paper effect used for T | wrong reproduced / not reproduced, per row | "
        "families with ≥ 1 wrong | rows called no effect |",
        "|---|---|---|---|---|",
    ]
    for data, sd in noise.items():
        for pe in (0.0, 9.7):
            r = simulate(sd, draws=draws, paper_effect=pe, seed=1)
            lines.append(
                f"| {data} ({sd:.2f}) | {pe:g} | {100 * r['wrong_row_rate']:.2f}% | "
                f"{100 * r['wrong_family_rate']:.1f}% | {100 * r['no_effect_rate']:.1f}% |"
            )
    lines += [
        "",
        "## A true effect of the paper's size (one planted row among 35 null rows)",
        "",
        "| claim | paper effect (RSUM) | data set noise | detected as reproduced at 1× | at 2× | at 5× |",
        "|---|---|---|---|---|---|",
    ]
    for cid, pe in PAPER_RSUM_EFFECTS.items():
        for data, sd in noise.items():
            rates = [
                simulate(sd, draws=draws, planted=m * pe, paper_effect=pe, seed=2)["detect_rate"] for m in (1, 2, 5)
            ]
            lines.append(
                f"| {cid} | {pe:g} | {data} ({sd:.2f}) | " + " | ".join(f"{100 * x:.1f}%" for x in rates) + " |"
            )
    lines += [
        "",
        "## The same at more seeds (B1's effect, 9.7 RSUM, planted at 1× and 2×)",
        "",
        "| seeds | data set noise | wrong per row (null) | detected at 1× | at 2× |",
        "|---|---|---|---|---|",
    ]
    for n in (3, 5, 10):
        for data, sd in noise.items():
            null = simulate(sd, n_seeds=n, draws=draws, paper_effect=9.7, seed=3)
            det = [
                simulate(sd, n_seeds=n, draws=draws, planted=m * 9.7, paper_effect=9.7, seed=4)["detect_rate"]
                for m in (1, 2)
            ]
            lines.append(
                f"| {n} | {data} ({sd:.2f}) | {100 * null['wrong_row_rate']:.2f}% | "
                + " | ".join(f"{100 * x:.1f}%" for x in det)
                + " |"
            )
    lines += ["", f"_Computed in {time.perf_counter() - t0:.1f} s on a shared 2-core machine._", ""]
    return "\n".join(lines)


def main() -> None:
    from coherent_itr.io import atomic_write_text

    text = report()
    atomic_write_text(ROOT / "results" / "benchmarks" / "verdict_simulation.md", text)
    print(text)


if __name__ == "__main__":
    main()
