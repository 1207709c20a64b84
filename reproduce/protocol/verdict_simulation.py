"""Check the verdict rule itself: simulated claims with and without a true effect, at the study's measured noise.

Each primary direction row of the ledger is simulated with its own measured noise: per-seed effects
e_s = θ + q + ε_s with ε_s ~ N(0, s_seed²) (the row's per-seed sd) and q ~ N(0, v_query) (test-set sampling,
common to all seeds; the row's test images' variance, 0 for a row without per-query data). The rule of
:mod:`reproduce.protocol.ledger` then decides it exactly as the ledger does — the estimate, the family's Bonferroni
level 1 − ALPHA/m, δ = FRACTION × |paper effect| — through :func:`reproduce.protocol.ledger.decide_codes` (the
vectorised
:func:`reproduce.protocol.ledger.decide`), so the simulation and the ledger cannot drift apart.

* θ = 0 for every row of a family → the share of simulated families with at least one row wrongly called
  ``reproduced`` or ``reversed`` (the family-wise error, at most ALPHA by construction), and per row how
  often it is ``ruled out`` (what the rule can exclude when there is nothing);
* θ = ½ × the paper's effect (= δ) → how often the row is wrongly ``ruled out``;
* θ = 1 × the paper's effect → how often it is ``reproduced`` (power), beside the analytic
  :func:`reproduce.protocol.ledger.power_at`, with the row's seeds and with the seeds the power analysis plans.

``python -m reproduce.protocol.verdict_simulation [--draws 4000]`` reads ``results/claims.csv`` and writes
``results/benchmarks/verdict_simulation.md``.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd

from coherent_itr.io import atomic_write_text

from reproduce.protocol.ledger import (
    ALPHA,
    FRACTION,
    POWER,
    SEED_CAP,
    VERDICTS,
    decide_codes,
    power_at,
    smallest_effect,
    se_df,
)
from reproduce.spec.paths import ROOT

CLAIMS_CSV = ROOT / "results" / "claims.csv"
DRAWS = 4000
_COLUMNS = {"id", "role", "dataset", "kind", "family", "family_size", "seed_sd", "query_var", "n_seeds"}
_COLUMNS |= {"paper_effect", "seeds_for_power"}
REPRODUCED, REVERSED, RULED_OUT = (VERDICTS.index(v) for v in ("reproduced", "reversed", "ruled out"))


def study_rows(claims_csv: str | Path = CLAIMS_CSV) -> pd.DataFrame:
    """The ledger's primary direction rows decided by an interval, with their measured noise (one row per claim
    and data set): ``id, dataset, family, family_size, seed_sd, query_var, n_seeds, paper_effect, seeds_for_power``."""
    path = Path(claims_csv)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no claims ledger to read the noise from (run `make reproduce` first)")
    df = pd.read_csv(path)
    missing = _COLUMNS - set(df.columns)
    if missing:
        raise ValueError(
            f"{path}: columns {sorted(missing)} missing (expected the ledger of reproduce.driver.ledger_files)"
        )
    rows = df[(df.role == "primary") & (df.kind == "direction") & np.isfinite(df.seed_sd) & (df.n_seeds >= 2)]
    return rows[sorted(_COLUMNS - {"role", "kind"})].reset_index(drop=True)


def simulate_row(
    theta: float,
    seed_sd: float,
    query_var: float,
    n_seeds: int,
    alpha: float,
    delta: float,
    draws: int = DRAWS,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Verdict codes (indices into :data:`reproduce.protocol.ledger.VERDICTS`) of ``draws`` simulated rows with true
    effect ``theta`` (module doc), decided at ``alpha`` and ``delta`` by
    :func:`reproduce.protocol.ledger.decide_codes`."""
    rng = np.random.default_rng(0) if rng is None else rng
    qv = max(0.0, float(query_var))
    e = theta + rng.normal(0, math.sqrt(qv), (draws, 1)) + rng.normal(0, seed_sd, (draws, n_seeds))
    se, df = se_df(e.var(axis=1, ddof=1) / n_seeds, qv, n_seeds)
    return decide_codes("direction", e.mean(axis=1), se, df, alpha, delta)


def family_null_rate(rows: pd.DataFrame, draws: int = DRAWS, seed: int = 1) -> float:
    """Share of simulated families (``rows``: one family's rows) with no true effect anywhere in which at least
    one row is called ``reproduced`` or ``reversed``."""
    rng = np.random.default_rng(seed)
    wrong = np.zeros(draws, dtype=bool)
    for r in rows.itertuples(index=False):
        codes = simulate_row(0.0, r.seed_sd, r.query_var, int(r.n_seeds), ALPHA / r.family_size, math.nan, draws, rng)
        wrong |= np.isin(codes, (REPRODUCED, REVERSED))
    return float(wrong.mean())


def row_scenarios(r, draws: int = DRAWS, seed: int = 2) -> dict:
    """One row's simulated rates (module doc) at its own seeds and at the planned seeds."""
    rng = np.random.default_rng(seed)
    alpha = ALPHA / r.family_size
    pe = abs(float(r.paper_effect))
    delta = smallest_effect(pe)
    n = int(r.n_seeds)
    planned = int(r.seeds_for_power) if np.isfinite(r.seeds_for_power) else SEED_CAP

    def rate(theta, code, n_seeds):
        return float((simulate_row(theta, r.seed_sd, r.query_var, n_seeds, alpha, delta, draws, rng) == code).mean())

    return {
        "null_ruled_out": rate(0.0, RULED_OUT, n),
        "half_ruled_out": rate(FRACTION * pe, RULED_OUT, n),
        "power_sim": rate(pe, REPRODUCED, n),
        "power_formula": float(power_at(pe, r.seed_sd, r.query_var, n, alpha)),
        "planned": planned,
        "planned_reachable": bool(np.isfinite(r.seeds_for_power)),
        "power_planned": rate(pe, REPRODUCED, planned),
        "half_ruled_out_planned": rate(FRACTION * pe, RULED_OUT, planned),
        "null_ruled_out_planned": rate(0.0, RULED_OUT, planned),
    }


def report(claims_csv: str | Path = CLAIMS_CSV, draws: int = DRAWS) -> str:
    """The markdown report: the family-wise error with no true effect, then per claim with a paper effect the
    rates of :func:`row_scenarios`."""
    t0 = time.perf_counter()
    rows = study_rows(claims_csv)
    lines = [
        "# The verdict rule under simulation",
        "",
        f"Generated by `python -m reproduce.protocol.verdict_simulation --draws {draws}` from `results/claims.csv` "
        "(model: "
        f"the module docstring). Each row is simulated with its own measured per-seed sd and test-set variance "
        f"and decided by the ledger's rule (Bonferroni at 1 − {ALPHA:g}/m within a paper's family, δ = "
        f"{FRACTION:g} × |paper effect|); {draws} simulated ledgers per scenario.",
        "",
        "## No true effect anywhere",
        "",
        "| data set | family | rows simulated | m | families with ≥ 1 row wrongly reproduced or reversed |",
        "|---|---|---|---|---|",
    ]
    for (data, fam), sub in rows.groupby(["dataset", "family"], sort=False):
        lines.append(
            f"| {data} | {fam} | {len(sub)} | {int(sub.family_size.iloc[0])} | "
            f"{100 * family_null_rate(sub, draws):.1f}% |"
        )
    with_pe = rows[np.isfinite(rows.paper_effect) & (rows.paper_effect != 0)]
    lines += [
        "",
        "## Per claim with a paper effect",
        "",
        "Seeds: the row's own (5 for trained arms; folds or batches for measurement rows). *Ruled out at 0*: what "
        "the rule can exclude when there is no effect (higher is better); *ruled out at ½×*: a true effect of half "
        f"the paper's wrongly excluded (at most about {ALPHA:g}/(2m)); *reproduced at 1×*: power, simulated and from "
        "`reproduce.protocol.ledger.power_at`. The last columns repeat it with the seeds the power analysis plans "
        "(`power.md`; "
        f"the cap of {SEED_CAP} where no count reaches {POWER:.0%}, marked *).",
        "",
        "| claim | data | paper effect | sd per seed | test-set sd | seeds | ruled out at 0 | ruled out at ½× | "
        "reproduced at 1× (formula) | planned seeds | reproduced at 1× | ruled out at 0 | ruled out at ½× |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in with_pe.itertuples(index=False):
        s = row_scenarios(r, draws)
        star = "" if s["planned_reachable"] else "*"
        lines.append(
            f"| {r.id} | {r.dataset} | {r.paper_effect:.3g} | {r.seed_sd:.3g} | {math.sqrt(max(0.0, r.query_var)):.3g} "
            "| "
            f"{int(r.n_seeds)} | {100 * s['null_ruled_out']:.1f}% | {100 * s['half_ruled_out']:.1f}% | "
            f"{100 * s['power_sim']:.1f}% ({100 * s['power_formula']:.1f}%) | {s['planned']}{star} | "
            f"{100 * s['power_planned']:.1f}% | {100 * s['null_ruled_out_planned']:.1f}% | "
            f"{100 * s['half_ruled_out_planned']:.1f}% |"
        )
    lines += ["", f"_Computed in {time.perf_counter() - t0:.1f} s on a shared 2-core machine._", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="the verdict rule on simulated ledgers at the study's measured noise")
    ap.add_argument("--draws", type=int, default=DRAWS, help="simulated ledgers per scenario (default %(default)s)")
    ap.add_argument("--claims", default=str(CLAIMS_CSV), help="the ledger to read the noise from")
    ap.add_argument("--out", default=str(ROOT / "results" / "benchmarks" / "verdict_simulation.md"))
    args = ap.parse_args(argv)
    if args.draws < 100:
        ap.error(f"--draws {args.draws}: at least 100 simulated ledgers per scenario")
    text = report(args.claims, draws=args.draws)
    atomic_write_text(Path(args.out), text)
    print(text)


if __name__ == "__main__":
    main()
