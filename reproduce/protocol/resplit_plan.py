"""More test images where they bind: a plan, priced, of Flickr8k re-splits for the primary rows whose power the one
fixed test split limits. A plan, not a run: nothing here trains anything.

Why
    The ledger's power model (:mod:`reproduce.protocol.ledger`) gives a row's estimate the variance σ²/n + v: σ the
    per-seed sd, n the seeds and v the test-set variance of the one fixed 1,000-image Flickr8k test split
    (``query_var``), which seeds do not shrink. Where v binds, more seeds buy little and more test images are the
    remedy: K splits of Flickr8k's 8,000 images, each split's final runs of the row's arms trained at the tuned
    settings with n seeds, pooled in the same crossed model.

The splits
    The standard dev set (1,000 images) stays every split's dev set: the tuning chose its settings on it, so it is
    never a test set. The other 7,000 images form 7 folds of 1,000, one of them the standard test set; split k tests
    on fold k and trains on the other 6,000 (split 1 is the standard split). The K test sets are disjoint, so the
    pooled test-set variance is exactly v/K (under the model, each image a draw from the same population); hence
    K ≤ :data:`K_CAP` = 7. Random re-splits, whose test sets overlap, would give v·((1 − f)/K + f) instead (f = 1/7,
    a test set's share of the images it is drawn from).

Which rows (:func:`binding_rows`; the rule, stated before any such run)
    A primary Flickr8k row with a finite, non-zero paper effect, a measured per-seed sd and v > 0 binds when either
    * no seed count within the cap reaches 80 % power (``seeds_for_power`` empty), or
    * the test term is at least :data:`BINDS_SHARE` (one half) of the variance at its planned seeds n* —
      v ≥ ½ (σ²/n* + v), n* = ``seeds_for_power``.
    A row already at 80 % with its seeds may bind by the second clause: its plan is then the re-split alternative.

The plan (:func:`cheapest_plan`, :func:`plan_power`)
    Power at 1× the paper's effect at the row's family Bonferroni level (ALPHA / ``family_size``), by
    :func:`~reproduce.protocol.ledger.power_at` for K·n seeds of sd σ and a test-set variance v/K, with the df of
    the pooled analysis, K(n − 1): each split's seed variance about its own mean (its test set shifts all its seeds
    alike), pooled. power_at ties the df to its seed count, so it is called with the equivalent n' = K(n − 1) + 1
    seeds of sd σ·√(n'/(K·n)) — the same σ²/(K·n), the χ² of K(n − 1) df. (power_at with K·n seeds, df K·n − 1,
    has K − 1 df more: for N1 on Flickr8k at 4 × 7, 81 % against 80 %, the same cheapest plan.) The cheapest plan is
    the fewest runs (K·n per arm, K ≥ 2, n ≥ 2, K ≤ K_CAP, n ≤ SEED_CAP), ties to fewer splits, that reaches 80 %; or
    none within those caps.
    Assumptions: σ and v measured on the standard split hold on every split; a split changes the training images
    too, and any effect that varies between training sets beyond the test images' own sampling (a split × method
    variance τ²) is taken as 0 — the one split cannot measure it. An analysis that estimated the split-level
    variance from the K split means instead would have K − 1 df and less power; the K per-split estimates test τ²
    once they exist.

Price (:func:`price`)
    Runs = K × n × the row's arms (:func:`reproduce.protocol.power_plan.primary_arms`; arms sharing a config count
    once). CPU worker-seconds: each run at :func:`reproduce.protocol.cost.run_estimate_s` (the profile's default
    setting stands in for the tuned one, as in :func:`reproduce.protocol.plan.estimate_cost`: the Flickr8k settings
    the tuning chose have lr ≥ 2e-3, so the same expected epochs), plus per split its data preparation
    (:data:`SPLIT_PREPARE_S`): the EfficientNet-Lite0 features are cached per image and the Sentence-BERT embeddings
    per caption set, both already for all 8,000 images and their 40,000 captions, so a split adds only its split
    lists and precomp folder (the measured preparation less those two parts); the vocabulary is built by each run
    from its training captions (inside ``COSTS["flickr8k"]["fixed_s"]``). GPU: each run at
    :func:`reproduce.protocol.cost.gpu_run_estimate_s` (``GPU_COSTS``: one H200 shared by :data:`GPU_WORKERS` worker
    processes under CUDA MPS, optimistic by its own note), divided by those workers — wall time on that GPU.
    The standard split is split 1: the ledger's seeds on it count (``trained``).

Missing before such a run: the data loader has no split parameter for Flickr8k. ``Config.data_seed`` is the seed of
the generated world and ``coherent_itr.data.flickr8k.load_flickr8k`` reads the release's three split lists; a run
with another ``data_seed`` would train on the standard split under another key. The folds need a split argument in
the loader (and in the run key), a bundle per split for a GPU machine (``coherent_itr.data.bundle``), and the
notebooks' per-query evaluation per split. The human judgements (expert, crowd) cover the standard test images
only: a split's test fold has none, which the RSUM rows planned here do not use.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from reproduce.protocol.cost import FEATURE_S_PER_IMAGE, gpu_run_estimate_s, run_estimate_s
from reproduce.protocol.ledger import POWER, family_alpha, power_at
from reproduce.protocol.power_plan import primary_arms
from reproduce.spec import claim_data
from reproduce.spec.power_seeds import SEED_CAP
from reproduce.spec.profiles import COSTS, profile_for

DATA = "flickr8k"
IMAGES = 8000  # Flickr8k's three split lists: 6,000 train + 1,000 dev + 1,000 test
DEV_IMAGES = 1000  # every split's dev set: the standard one
TEST_IMAGES = 1000  # a split's test fold
K_CAP = (IMAGES - DEV_IMAGES) // TEST_IMAGES  # 7 disjoint test folds
MIN_SPLITS = 2
MIN_SEEDS = 2
BINDS_SHARE = 0.5  # the test term's share of the variance at the planned seeds from which a row binds
GPU_WORKERS = 16  # the worker processes GPU_COSTS was measured with (its ``device``)
SBERT_S = 185.0  # Sentence-BERT of the 40,000 captions: the caption part of COSTS["flickr8k"]["prepare_s"]
# a split's own preparation: the measured one less its cached parts (every photo's features, every caption's embedding)
SPLIT_PREPARE_S = max(0.0, COSTS[DATA]["prepare_s"] - FEATURE_S_PER_IMAGE * (IMAGES - 1) - SBERT_S)

COLUMNS = (
    "id",
    "role",
    "dataset",
    "paper_effect",
    "seed_sd",
    "query_var",
    "n_seeds",
    "family_size",
    "seeds_for_power",
)


@dataclass(frozen=True)
class Plan:
    """One binding row's plan: K splits × n seeds of its arms (k = n = 0 when none within the caps)."""

    id: str
    dataset: str
    test_sd: float  # √v of the standard split
    seeds_now: int
    power_now: float  # the ledger's power with the seeds the row has (NaN: not in the ledger given)
    share: float  # v / (σ²/n* + v) at the planned seeds n*
    alpha: float
    k: int
    n: int
    arms: int  # distinct configs of the row's arms
    runs: int  # K × n × arms
    trained: int  # of them on the standard split (split 1) already: min(n, seeds now) × arms
    cpu_s: float  # worker-seconds of every run of the plan and the splits' preparation
    gpu_s: float  # wall seconds of every run of the plan on one GPU with GPU_WORKERS workers
    power: float  # the plan's power (plan_power)
    why: str  # why there is no plan, or no price

    @property
    def reachable(self) -> bool:
        return self.k > 0


def check_columns(ledger: pd.DataFrame) -> None:
    """ValueError naming the :data:`COLUMNS` that ``ledger`` lacks."""
    missing = [c for c in COLUMNS if c not in ledger.columns]
    if missing:
        raise ValueError(f"the ledger has no column(s) {missing}: expected the study's claims.csv")


def _num(x) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return math.nan
    return v if math.isfinite(v) else math.nan


def planned_seeds(row) -> int:
    """n* of the rule: the row's ``seeds_for_power``, or :data:`SEED_CAP` when none within the cap reaches 80 %."""
    n = _num(row["seeds_for_power"])
    return int(n) if math.isfinite(n) else SEED_CAP


def query_share(seed_sd: float, query_var: float, n: int) -> float:
    """v / (σ²/n + v): the test set's share of the estimate's variance with ``n`` seeds."""
    total = seed_sd**2 / n + query_var
    return query_var / total if total > 0 else math.nan


def binds(row) -> bool:
    """Whether a ledger row (a mapping of :data:`COLUMNS`) is one the module's rule plans for."""
    effect, sd, v = _num(row["paper_effect"]), _num(row["seed_sd"]), _num(row["query_var"])
    if row["role"] != "primary" or row["dataset"] != DATA:
        return False
    if not (math.isfinite(effect) and effect != 0 and math.isfinite(sd) and math.isfinite(v) and v > 0):
        return False
    if not _num(row["family_size"]) >= 1:  # no family: the row is not decided by an interval
        return False
    if not math.isfinite(_num(row["seeds_for_power"])):
        return True
    return query_share(sd, v, planned_seeds(row)) >= BINDS_SHARE


def binding_rows(ledger: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``ledger`` that :func:`binds` selects (ValueError naming missing columns)."""
    check_columns(ledger)
    if not len(ledger):
        return ledger
    return ledger[[binds(r) for r in ledger.to_dict("records")]]


def plan_power(effect: float, seed_sd: float, query_var: float, k, n, alpha: float):
    """Power at the true ``effect`` of K = ``k`` splits × ``n`` seeds (module doc): :func:`power_at` with test-set
    variance v/K and the pooled within-split df K(n − 1), i.e. n' = K(n − 1) + 1 seeds of sd σ·√(n'/(K·n));
    vectorised over ``n``. K = 1 is the ledger's own power."""
    n = np.asarray(n, dtype=float)
    n_eq = k * (n - 1) + 1
    sd_eq = seed_sd * np.sqrt(n_eq / (k * n))
    if np.ndim(n) == 0:
        return power_at(abs(effect), float(sd_eq), query_var / k, float(n_eq), alpha)
    # power_at takes one sd: one call per n
    return np.array([power_at(abs(effect), float(s), query_var / k, float(m), alpha) for s, m in zip(sd_eq, n_eq)])


def cheapest_plan(
    effect: float, seed_sd: float, query_var: float, alpha: float, k_cap: int = K_CAP, n_cap: int = SEED_CAP
) -> tuple[int, int, float] | None:
    """(K, n, power): the fewest runs K·n (ties: fewer splits), MIN_SPLITS ≤ K ≤ ``k_cap``, MIN_SEEDS ≤ n ≤
    ``n_cap``, whose :func:`plan_power` is ≥ POWER; None when none within the caps."""
    best = None
    for k in range(MIN_SPLITS, k_cap + 1):
        ns = np.arange(MIN_SEEDS, n_cap + 1)
        ok = np.flatnonzero(plan_power(effect, seed_sd, query_var, k, ns, alpha) >= POWER)
        if not ok.size:
            continue
        n = int(ns[ok[0]])
        if best is None or (k * n, k) < (best[0] * best[1], best[0]):
            best = (k, n)
    if best is None:
        return None
    k, n = best
    return k, n, float(plan_power(effect, seed_sd, query_var, k, n, alpha))


def _distinct(arms) -> list:
    """The arms with distinct configs (two arms with the same overrides train the same runs)."""
    seen, out = set(), []
    for a in arms:
        key = json.dumps(a.overrides, sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            out.append(a)
    return out


def price(arms, k: int, n: int, profile) -> tuple[int, float, float]:
    """(runs, CPU worker-seconds, GPU wall seconds) of K = ``k`` splits × ``n`` seeds of ``arms`` under ``profile``
    (a :class:`~reproduce.spec.profiles.Profile` of Flickr8k): K·n runs of each distinct arm, each at
    :func:`run_estimate_s` (CPU) and :func:`gpu_run_estimate_s` / GPU_WORKERS (GPU), plus K × SPLIT_PREPARE_S on
    the CPU."""
    arms = _distinct(arms)
    configs = [a.config(profile, 0) for a in arms]
    cpu = sum(run_estimate_s(c, DATA) for c in configs)
    gpu = sum(gpu_run_estimate_s(c, DATA) for c in configs) / GPU_WORKERS
    return k * n * len(arms), k * n * cpu + k * SPLIT_PREPARE_S, k * n * gpu


def plan_rows(ledger: pd.DataFrame, profile_name: str = "default", claims=None) -> list[Plan]:
    """A :class:`Plan` for every row of ``ledger`` (``claims.csv``) that :func:`binds`, in the ledger's order."""
    rows = binding_rows(ledger)
    if not len(rows):
        return []
    claims = claims or claim_data.load().claims
    profile = profile_for(profile_name, DATA)
    out = []
    for r in rows.to_dict("records"):
        effect, sd, v = _num(r["paper_effect"]), _num(r["seed_sd"]), _num(r["query_var"])
        alpha = family_alpha(int(r["family_size"]))
        seeds_now = int(r["n_seeds"])
        base = dict(
            id=r["id"],
            dataset=r["dataset"],
            test_sd=math.sqrt(v),
            seeds_now=seeds_now,
            power_now=_num(r.get("power")),
            share=query_share(sd, v, planned_seeds(r)),
            alpha=alpha,
        )
        found = cheapest_plan(effect, sd, v, alpha)
        if found is None:
            why = f"not reachable within {K_CAP} splits × {SEED_CAP} seeds"
            out.append(
                Plan(
                    **base, k=0, n=0, arms=0, runs=0, trained=0, cpu_s=math.nan, gpu_s=math.nan, power=math.nan, why=why
                )
            )
            continue
        k, n, pw = found
        arms = primary_arms(claims[r["id"]], profile) if r["id"] in claims else []
        if not arms:
            out.append(
                Plan(
                    **base,
                    k=k,
                    n=n,
                    arms=0,
                    runs=0,
                    trained=0,
                    cpu_s=math.nan,
                    gpu_s=math.nan,
                    power=pw,
                    why="its primary names no arms: no price",
                )
            )
            continue
        runs, cpu_s, gpu_s = price(arms, k, n, profile)
        n_arms = runs // (k * n)
        trained = min(n, seeds_now) * n_arms
        out.append(
            Plan(**base, k=k, n=n, arms=n_arms, runs=runs, trained=trained, cpu_s=cpu_s, gpu_s=gpu_s, power=pw, why="")
        )
    return out


def plans_frame(plans: list[Plan]) -> pd.DataFrame:
    """The plans as a table (one row each)."""
    return pd.DataFrame([asdict(p) for p in plans])
