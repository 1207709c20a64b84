"""Check the verdict rule itself: simulated claims with and without a true effect, at the study's measured noise.

Each primary direction row of the ledger is simulated with its own measured noise: per-seed effects
e_s = θ + q + ε_s with ε_s ~ N(0, s_seed²) (the row's per-seed sd) and q ~ N(0, v_query) (test-set sampling,
common to all seeds; the row's test images' variance, 0 for a row without per-query data). The rule of
:mod:`reproduce.protocol.ledger` then decides it exactly as the ledger does — the estimate, the family's Bonferroni
level 1 − ALPHA/m, δ = FRACTION × |paper effect| — through :func:`reproduce.protocol.ledger.decide_codes` (the
vectorised :func:`reproduce.protocol.ledger.decide`), so the simulation and the ledger cannot drift apart.

Two designs are simulated:

* **fixed**: the row's seeds are a fixed count — the ledger's (``n_seeds``), or the count the power analysis of the
  final ledger plans (``seeds_for_power``);
* **as run** (the internal pilot of ``docs/protocol.md``, "Seeds beyond the pilot"): each row draws its pilot — the
  seeds its arms share before any seed is added (:meth:`reproduce.spec.experiments.Arm.pilot_seeds`, 5 for every
  primary arm) — and the pilot's sd, with the row's v_query, gives the seeds it asks,
  :func:`reproduce.protocol.ledger.seeds_for_power` at 1× the paper effect and the family's level (none where
  unreachable: the test set's variance or the cap). As :func:`reproduce.protocol.power_plan.seed_plan` does, an arm
  trains the most seeds any row of its data set asks of it, never fewer than its pilot's; a row is decided on the
  seeds its arms have in common (the fewest of its arms'), all of them, pilot and added. A row whose primary names no
  arms (:func:`reproduce.protocol.power_plan.primary_arms` empty: the notebook measures it) adds no seeds: its design
  is the fixed one at the ledger's count.

The as-run design assumes: rows are independent — also rows that share an arm, whose pilots are drawn separately
(in the study they share that arm's seeds); the true per-seed sd and v_query are the final ledger's, and v_query is
known (the pilot's own measured test-set variance is not redrawn); the plan is derived once from the pilot (the
study's ``--keep``, which also kept an earlier ledger's plan where larger, is not modelled). At fixed seeds a
family's error is at most ALPHA by construction; as run it is not: the pilot's seeds, whose sd chose the count, are
also decided on (a pilot whose sd came out small keeps its too narrow interval), and the report measures the excess.

* θ = 0 for every row of a family → the share of simulated families with at least one row wrongly called
  ``reproduced`` or ``reversed`` (the family-wise error), at the ledger's seeds and as run; per row how often it is
  ``ruled out`` at the ledger's seeds (what the rule can exclude when there is nothing) and, as run, how often it is
  wrongly decided over its level ALPHA/m;
* θ = ½ × the paper's effect (= δ) → how often the row is wrongly ``ruled out``, at the ledger's seeds and as run;
* θ = 1 × the paper's effect → how often it is ``reproduced`` (power): at the ledger's seeds beside the analytic
  :func:`reproduce.protocol.ledger.power_at`, at the seeds the power analysis of the final ledger plans, and as run
  (with the mean and 90th percentile of the seeds the row ends with).

The seeds a row asks depend on its pilot's sd only, never on θ, so each row's noise is drawn once and every θ is
decided on it (common random numbers).

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
    se_df,
    seeds_for_power,
    smallest_effect,
)
from reproduce.protocol.power_plan import primary_arms
from reproduce.spec import claim_data
from reproduce.spec.paths import ROOT
from reproduce.spec.profiles import profile_for

CLAIMS_CSV = ROOT / "results" / "claims.csv"
DRAWS = 4000
_COLUMNS = {"id", "role", "dataset", "kind", "family", "family_size", "seed_sd", "query_var", "n_seeds"}
_COLUMNS |= {"paper_effect", "seeds_for_power"}
REPRODUCED, REVERSED, RULED_OUT = (VERDICTS.index(v) for v in ("reproduced", "reversed", "ruled out"))
THETAS = (0.0, FRACTION, 1.0)  # true effects simulated, in units of the paper's effect


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


def with_design(rows: pd.DataFrame, profile: str = "default", claims: dict | None = None) -> pd.DataFrame:
    """``rows`` with the as-run design of each (module doc): ``arms`` (the ``"paper/arm"`` names its primary
    compares; empty: the notebook measures it), ``arm_pilots`` (each arm's pilot seeds) and ``pilot_seeds`` (the
    seeds its arms share in the pilot; the ledger's ``n_seeds`` for a row without arms or not in the registry)."""
    claims = claim_data.load().claims if claims is None else claims
    arms, arm_pilots, pilots = [], [], []
    for r in rows.itertuples(index=False):
        found = primary_arms(claims[r.id], profile_for(profile, r.dataset)) if r.id in claims else []
        prof = profile_for(profile, r.dataset) if found else None
        seeds = [set(a.pilot_seeds(prof)) for a in found]
        arms.append(tuple(f"{a.paper}/{a.name}" for a in found))
        arm_pilots.append(tuple(len(s) for s in seeds))
        pilots.append(len(set.intersection(*seeds)) if seeds else int(r.n_seeds))
    return rows.assign(arms=arms, arm_pilots=arm_pilots, pilot_seeds=pilots)


# --- one row at fixed seeds ----------------------------------------------------------------------
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
    q, eps = pilot_noise(seed_sd, query_var, n_seeds, draws, rng)
    return decide_seeds(theta, q, eps, np.full(draws, n_seeds), query_var, alpha, delta)


def family_null_rate(rows: pd.DataFrame, draws: int = DRAWS, seed: int = 1) -> float:
    """Share of simulated families (``rows``: one family's rows) with no true effect anywhere in which at least
    one row is called ``reproduced`` or ``reversed``, each row at its fixed ``n_seeds``."""
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
    }


# --- the design as run: pilot, seeds asked, seeds added -------------------------------------------
def seeds_asked(effect: float, pilot_sd, query_var: float, alpha: float, cap: int = SEED_CAP) -> np.ndarray:
    """:func:`reproduce.protocol.ledger.seeds_for_power` of each pilot sd in ``pilot_sd`` (0 where no count within
    ``cap`` reaches POWER, or without a paper effect), exactly: it is called on the sorted sds and bisects between
    two that ask the same count, so it holds the count is non-decreasing in the sd (a larger sd never asks fewer
    seeds; checked against a call per sd in the tests) and costs a few calls per distinct count."""
    s = np.asarray(pilot_sd, dtype=float)
    out = np.zeros(s.shape, dtype=int)
    if not (np.isfinite(effect) and effect != 0) or s.size == 0:
        return out
    order = np.argsort(s, kind="stable")
    sd = s[order]
    asked: dict[int, int] = {}

    def at(i: int) -> int:  # cap + 1 stands for "none" (the largest sds)
        if i not in asked:
            n, _ = seeds_for_power(effect, float(sd[i]), query_var, alpha, cap=cap)
            asked[i] = cap + 1 if n is None else n
        return asked[i]

    sorted_n = np.empty(sd.size, dtype=int)
    spans = [(0, sd.size - 1)]
    while spans:
        lo, hi = spans.pop()
        if at(lo) == at(hi) or hi - lo <= 1:
            sorted_n[lo : hi + 1] = at(lo)
            sorted_n[hi] = at(hi)
            continue
        mid = (lo + hi) // 2
        spans += [(lo, mid), (mid, hi)]
    out[order] = np.where(sorted_n > cap, 0, sorted_n)
    return out


def pilot_noise(seed_sd: float, query_var: float, n_pilot: int, draws: int, rng: np.random.Generator):
    """``(q, ε)``: the test-set shift (draws, 1) and the pilot's seed noise (draws, n_pilot), in that order (a row
    at fixed seeds, :func:`simulate_row`, is a pilot of all its seeds)."""
    q = rng.normal(0, math.sqrt(max(0.0, float(query_var))), (draws, 1))
    return q, rng.normal(0, seed_sd, (draws, n_pilot))


def pilot_sd(eps: np.ndarray, query_var: float) -> np.ndarray:
    """The per-seed sd the ledger reads from a pilot's seeds (:attr:`reproduce.protocol.ledger.Estimate.seed_sd`:
    √((s²/n + v_query − v_query)·n)); the shift q and θ are common to a draw's seeds and leave it alone."""
    n = eps.shape[1]
    qv = max(0.0, float(query_var))
    return np.sqrt(np.maximum(0.0, eps.var(axis=1, ddof=1) / n + qv - qv) * n)


def add_seeds(eps: np.ndarray, seed_sd: float, n_final, rng: np.random.Generator) -> np.ndarray:
    """The pilot's seed noise ``eps`` followed by the seeds a draw adds (up to the largest ``n_final``; a draw's
    columns beyond its own count are not read). Nothing is drawn when no draw adds a seed."""
    extra = int(np.max(n_final)) - eps.shape[1]
    return eps if extra <= 0 else np.hstack([eps, rng.normal(0, seed_sd, (eps.shape[0], extra))])


def decide_seeds(theta: float, q, eps, n_final, query_var: float, alpha: float, delta: float) -> np.ndarray:
    """Verdict codes of draws whose effects are θ + q + ε over each draw's first ``n_final`` seeds, grouped by count
    (:func:`simulate_row` is one group)."""
    n_final = np.asarray(n_final)
    qv = max(0.0, float(query_var))
    codes = np.empty(n_final.shape, dtype=int)
    for n in np.unique(n_final):
        idx = n_final == n
        e = theta + q[idx] + eps[idx, :n]
        se, df = se_df(e.var(axis=1, ddof=1) / n, qv, n)
        codes[idx] = decide_codes("direction", e.mean(axis=1), se, df, alpha, delta)
    return codes


def simulate_adaptive_row(
    theta: float,
    seed_sd: float,
    query_var: float,
    n_pilot: int,
    alpha: float,
    delta: float,
    paper_effect: float,
    draws: int = DRAWS,
    rng: np.random.Generator | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, seeds)`` of ``draws`` simulated rows run as designed (module doc), one row alone (no arm shared):
    a pilot of ``n_pilot`` seeds, the seeds its sd asks at 1× ``paper_effect`` (never fewer than the pilot's), the
    seeds added, decided on all of them. A row that asks nothing is :func:`simulate_row` at ``n_pilot``."""
    rng = np.random.default_rng(0) if rng is None else rng
    q, eps = pilot_noise(seed_sd, query_var, n_pilot, draws, rng)
    n_final = np.maximum(n_pilot, seeds_asked(abs(paper_effect), pilot_sd(eps, query_var), query_var, alpha))
    eps = add_seeds(eps, seed_sd, n_final, rng)
    return decide_seeds(theta, q, eps, n_final, query_var, alpha, delta), n_final


def simulate_as_run(rows: pd.DataFrame, draws: int = DRAWS, seed: int = 3) -> list[dict]:
    """Per row of ``rows`` (one data set's rows, with :func:`with_design`'s columns) the design as run: ``seeds``
    (each draw's final count) and ``codes`` ({θ in units of the paper effect: verdict codes}; θ = 0 only for a row
    without a paper effect). Each row draws its own noise; an arm's seeds are the most any row asks of it."""
    rngs = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(len(rows))]
    noise, asks = [], []
    for r, rng in zip(rows.itertuples(index=False), rngs):
        q, eps = pilot_noise(r.seed_sd, r.query_var, int(r.pilot_seeds), draws, rng)
        noise.append((q, eps))
        ask = np.zeros(draws, dtype=int)
        if r.arms:
            ask = seeds_asked(abs(r.paper_effect), pilot_sd(eps, r.query_var), r.query_var, ALPHA / r.family_size)
        asks.append(ask)
    arm_seeds: dict[str, np.ndarray] = {}
    for r, ask in zip(rows.itertuples(index=False), asks):
        for arm, pilot in zip(r.arms, r.arm_pilots):
            arm_seeds[arm] = np.maximum(arm_seeds.get(arm, pilot), ask)
    out = []
    for r, rng, (q, eps) in zip(rows.itertuples(index=False), rngs, noise):
        if r.arms:
            n_final = np.maximum(np.min([arm_seeds[a] for a in r.arms], axis=0), int(r.pilot_seeds))
        else:
            n_final = np.full(draws, int(r.pilot_seeds))
        eps = add_seeds(eps, r.seed_sd, n_final, rng)
        pe = abs(float(r.paper_effect))
        thetas = THETAS if np.isfinite(pe) and pe > 0 else (0.0,)
        alpha, delta = ALPHA / r.family_size, smallest_effect(pe)
        codes = {t: decide_seeds(t * pe if t else 0.0, q, eps, n_final, r.query_var, alpha, delta) for t in thetas}
        out.append({"seeds": n_final, "codes": codes})
    return out


# --- the report ----------------------------------------------------------------------------------
def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def report(claims_csv: str | Path = CLAIMS_CSV, draws: int = DRAWS, profile: str = "default") -> str:
    """The markdown report: the family-wise error with no true effect, then per claim with a paper effect the
    rates of :func:`row_scenarios` at fixed seeds and of :func:`simulate_as_run`."""
    t0 = time.perf_counter()
    rows = with_design(study_rows(claims_csv), profile)
    as_run: dict[int, dict] = {}
    for _, sub in rows.groupby("dataset", sort=False):
        as_run.update(zip(sub.index, simulate_as_run(sub, draws)))
    lines = [
        "# The verdict rule under simulation",
        "",
        f"Generated by `python -m reproduce.protocol.verdict_simulation --draws {draws}` from `results/claims.csv` "
        "(model: "
        f"the module docstring). Each row is simulated with its own measured per-seed sd and test-set variance "
        f"and decided by the ledger's rule (Bonferroni at 1 − {ALPHA:g}/m within a paper's family, δ = "
        f"{FRACTION:g} × |paper effect|); {draws} simulated ledgers per scenario.",
        "",
        "Two designs. *At the ledger's seeds*: each row's seeds fixed at the count it ended with. *As run*: the "
        "internal pilot the study ran — a pilot of 5 seeds per arm, the seeds `reproduce.protocol.ledger."
        f"seeds_for_power` asks from the pilot's sd ({POWER:.0%} power at 1× the paper's effect at the family's "
        f"level, at most {SEED_CAP}; none where the test set's variance or the cap puts it out of reach), each arm "
        "at the most any row of its data set asks of it (never fewer than its pilot's), the row decided on all its "
        "seeds. A row whose primary names no arms (the notebook measures it) adds no seeds. Assumed: rows are "
        "independent, also those that share an arm (their pilots are drawn separately, where the study's share "
        "that arm's seeds); the true sd and the test-set variance are the final ledger's, the test-set variance "
        "known; the plan is derived once from the pilot (the study's `--keep` of an earlier plan is not "
        "modelled).",
        "",
        "## No true effect anywhere",
        "",
        "Families with ≥ 1 row wrongly reproduced or reversed. At fixed seeds this is at most "
        f"{ALPHA:.0%} by construction; as run it need not be: the final interval reuses the pilot's seeds, whose sd "
        "chose the count. A pilot whose sd came out small stops at its 5 seeds with an interval too narrow, and a "
        "row that adds seeds is decided on a variance that still holds the pilot's — the internal pilot's known "
        "excess over its level (Wittes et al. 1999, “Internal pilot studies I: type I error rate of the naive "
        "t-test”), largest for rows that ask many seeds and have no test-set variance (the last column of the "
        "last table, per row).",
        "",
        "| data set | family | rows simulated | m | at the ledger's seeds | as run |",
        "|---|---|---|---|---|---|",
    ]
    for (data, fam), sub in rows.groupby(["dataset", "family"], sort=False):
        wrong = np.zeros(draws, dtype=bool)
        for i in sub.index:
            wrong |= np.isin(as_run[i]["codes"][0.0], (REPRODUCED, REVERSED))
        lines.append(
            f"| {data} | {fam} | {len(sub)} | {int(sub.family_size.iloc[0])} | "
            f"{_pct(family_null_rate(sub, draws))} | {_pct(wrong.mean())} |"
        )
    with_pe = rows[np.isfinite(rows.paper_effect) & (rows.paper_effect != 0)]
    fixed = {i: row_scenarios(r, draws) for i, r in zip(with_pe.index, with_pe.itertuples(index=False))}
    lines += [
        "",
        "## Per claim with a paper effect, at fixed seeds",
        "",
        "Seeds: the row's own in the ledger (pilot and added seeds for trained arms; folds or batches for measurement "
        "rows). *Ruled out at 0*: what the rule can exclude when there is no effect (higher is better); *ruled out "
        f"at ½×*: a true effect of half the paper's wrongly excluded (at most about {ALPHA:g}/(2m)); *reproduced at "
        "1×*: power, simulated and from `reproduce.protocol.ledger.power_at`.",
        "",
        "| claim | data | paper effect | sd per seed | test-set sd | seeds | ruled out at 0 | ruled out at ½× | "
        "reproduced at 1× (formula) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for i, r in zip(with_pe.index, with_pe.itertuples(index=False)):
        s = fixed[i]
        lines.append(
            f"| {r.id} | {r.dataset} | {r.paper_effect:.3g} | {r.seed_sd:.3g} | {math.sqrt(max(0.0, r.query_var)):.3g} "
            f"| {int(r.n_seeds)} | {_pct(s['null_ruled_out'])} | {_pct(s['half_ruled_out'])} | "
            f"{_pct(s['power_sim'])} ({_pct(s['power_formula'])}) |"
        )
    m_max = int(rows.family_size.max())
    lines += [
        "",
        "## Per claim with a paper effect, as run",
        "",
        "*Pilot*: the seeds the row's arms share before any is added (*fixed*: its primary names no arms, so it "
        "keeps the ledger's seeds and its as-run rates differ from the fixed ones by simulation noise alone). "
        "*Seeds as run*: the mean and 90th percentile of the seeds it ends with. *Reproduced at 1×* as run, at "
        "the ledger's seeds (the table above) and at the seeds the power analysis of the final ledger plans "
        f"(`power.md`; the cap of {SEED_CAP} where no count reaches {POWER:.0%}, marked *); a pilot whose sd is so "
        "large that no count within the cap reaches it adds no seeds at all, so a row whose plan is near the cap "
        "has less power as run than at its planned seeds. *Wrong at 0 ÷ level*: with no effect, the share of "
        "draws wrongly reproduced or reversed as run, over the row's level ALPHA/m (at most 1.0× at fixed seeds; "
        f"its simulation sd is about 1/√(draws × level): ±{1 / math.sqrt(draws * ALPHA / m_max):.1f} at {draws} "
        f"draws and m = {m_max}).",
        "",
        "| claim | data | pilot | seeds as run: mean (90th pct) | ledger's seeds | reproduced at 1×: as run | "
        "at the ledger's seeds | at the planned seeds | ruled out at ½×: as run | wrong at 0 ÷ level: as run |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for i, r in zip(with_pe.index, with_pe.itertuples(index=False)):
        s, a = fixed[i], as_run[i]
        seeds = a["seeds"]
        pilot = str(int(r.pilot_seeds)) if r.arms else "fixed"
        star = "" if s["planned_reachable"] else "*"
        wrong = np.mean(np.isin(a["codes"][0.0], (REPRODUCED, REVERSED))) * r.family_size / ALPHA
        lines.append(
            f"| {r.id} | {r.dataset} | {pilot} | {seeds.mean():.1f} ({np.percentile(seeds, 90):.0f}) | "
            f"{int(r.n_seeds)} | {_pct(np.mean(a['codes'][1.0] == REPRODUCED))} | {_pct(s['power_sim'])} | "
            f"{_pct(s['power_planned'])} ({s['planned']}{star}) | {_pct(np.mean(a['codes'][FRACTION] == RULED_OUT))} "
            f"| {wrong:.1f}× |"
        )
    lines += ["", f"_Computed in {time.perf_counter() - t0:.1f} s on a shared 2-core machine._", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="the verdict rule on simulated ledgers at the study's measured noise")
    ap.add_argument("--draws", type=int, default=DRAWS, help="simulated ledgers per scenario (default %(default)s)")
    ap.add_argument("--claims", default=str(CLAIMS_CSV), help="the ledger to read the noise from")
    ap.add_argument("--profile", default="default", help="the profile whose arms and pilot seeds the rows have")
    ap.add_argument("--out", default=str(ROOT / "results" / "benchmarks" / "verdict_simulation.md"))
    args = ap.parse_args(argv)
    if args.draws < 100:
        ap.error(f"--draws {args.draws}: at least 100 simulated ledgers per scenario")
    text = report(args.claims, draws=args.draws, profile=args.profile)
    atomic_write_text(Path(args.out), text)
    print(text)


if __name__ == "__main__":
    main()
