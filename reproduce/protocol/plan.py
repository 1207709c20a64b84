"""The plan of one ``python -m reproduce`` invocation, made once before any work and read by everything after it.

* **Per data set** (:class:`DataSetPlan`, :func:`data_set_plan`): its profile, the papers, the runs known before
  tuning (the tuning runs of a tuned profile, else every run), those the cache lacks, and their estimate
  (:class:`DataSetEstimate`, :func:`estimate_data_set`): the tuning runs to train and an upper bound of the final
  runs — every arm × its seeds at its family's setting, counted at the grid setting that gives the family the most
  runs not yet cached (the setting is chosen only after tuning) — and, as a second bound, the final runs if the
  health check of the other seeds (:mod:`reproduce.protocol.tuning`) moved every family through its whole grid.
  With every tuning run cached the final runs are the tuned plan's (exact).
* **The invocation** (:class:`Plan`, :func:`make_plan`): the data sets' plans, the workers, the notebooks'
  expected wall seconds and the machine whose runs are read (``--runs-from``); its lines (:func:`plan_lines`), the
  runs the cache must have room for, and the estimate the progress bar
  (:class:`reproduce.protocol.progress.RunProgress`) and the manifest read. Wall time = worker-seconds / workers +
  data preparation + notebooks, priced by :mod:`reproduce.protocol.cost`.
* **The ``paper`` profile** (:func:`paper_cost_lines`): its expected cost on the current device — the paper model's
  step FLOP at the rate the default model's measured Flickr8k step achieves on this CPU, or (CUDA) at the rate of
  a matmul of the GRU's shape timed on the device: an estimate, said so.
* **A profile's whole protocol before any run** (:func:`estimate_cost`, :func:`cost_table`;
  ``python -m reproduce.protocol.plan``).
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from coherent_itr import paths, runs
from coherent_itr.runs.migrations import upgrade_machine_1
from reproduce.protocol import tuning
from reproduce.protocol import cost
from reproduce.protocol.cost import (
    REFERENCE_MODEL,
    TOKENS_PER_CAPTION,
    gpu_run_estimate_s,
    minutes,
    prepare_estimate_s,
    run_estimate_s,
    step_flop,
)
from reproduce.spec import experiments
from reproduce.spec.paths import ROOT
from reproduce.spec.profiles import (
    ASSUMED_STEP_SPEEDUP,
    COSTS,
    GPU_COSTS,
    PROFILES,
    Profile,
    profile_for,
    run_seconds,
)


# --- the runs ----------------------------------------------------------------------------------------
def final_run_bounds(profile, papers, cache) -> tuple[list, int]:
    """(final configs not yet cached, at each family's grid setting with the most of them: an upper bound
    of the final runs to train; how many if every family went through its whole grid). Without tuning:
    the plan's configs not cached, both times."""
    if profile.tuning is None:
        todo = [c for c in experiments.plan(profile, papers) if not cache.has(c)]
        return todo, len(todo)
    per_family: dict[str, dict[tuple, dict]] = {}
    for paper in papers or experiments.PAPERS:
        arms = experiments.arms(paper, profile)
        for arm in arms:
            fam = tuning.family_of(arm, arms)
            fk = tuning.tuning_key(fam, profile)
            for s in tuning.grid(fam, profile):
                bucket = per_family.setdefault(fk, {}).setdefault(tuple(sorted(s.items())), {})
                for c in arm.configs(profile, **s):
                    bucket.setdefault(c.key(), c)
    bound: list = []
    every = 0
    for by_setting in per_family.values():
        left = [[c for c in b.values() if not cache.has(c)] for b in by_setting.values()]
        bound += max(left, key=len)
        every += sum(len(x) for x in left)
    return bound, every


@dataclass
class DataSetEstimate:
    data: str
    tuning_todo: list  # tuning runs to train (training entry only)
    final_todo: list  # final runs to train or evaluate: the bound before tuning, the exact list after
    final_every: int  # bound if the health check moved every family through its whole grid
    prepare_s: float
    exact: bool = False  # final_todo is the tuned plan (not a bound)
    tuning_keys: frozenset = frozenset()  # every tuning run's key (a chosen one is only evaluated as a final run)
    tuning_more: list = field(default_factory=list)  # successive halving: the full runs past the rungs (stand-ins)
    final_plan: list | None = None  # every tuning run cached: the tuned plan itself

    @property
    def runs(self) -> int:
        return len(self.tuning_todo) + len(self.tuning_more) + len(self.final_todo)

    def final_s(self, c, price=None) -> float:
        if self.data not in COSTS:
            return 0.0
        return (price or run_estimate_s)(c, self.data, trained=c.key() in self.tuning_keys)

    def run_s(self, price=None) -> dict[tuple, float]:
        """Estimated worker-seconds of every run to do, by (phase, config key); tuning runs are not evaluated.
        ``price``: one run's seconds (default :func:`run_estimate_s`, the CPU's; :func:`gpu_run_estimate_s` on a
        GPU)."""
        price = price or run_estimate_s
        out = {("tune", c.key()): price(c, self.data, evaluated=False) for c in self.tuning_todo}
        out.update({("tune", c.key()): price(c, self.data, evaluated=False) for c in self.tuning_more})
        out.update({("final", c.key()): self.final_s(c, price) for c in self.final_todo})
        return out


def estimate_data_set(profile, data: str, papers, configs: list, todo: list, cache) -> DataSetEstimate:
    """The estimate of one data set's plan (``configs``/``todo`` as the driver planned them: the tuning
    runs of a tuned profile, else every run); ``papers == []``: none (the data card only). With every tuning
    run cached the final runs are the tuned plan's uncached ones (exact), else a bound (:func:`final_run_bounds`)."""
    if papers == []:
        return DataSetEstimate(data, [], [], 0, 0.0, exact=True)
    if profile.tuning is None:
        return DataSetEstimate(data, [], list(todo), len(todo), prepare_estimate_s(data, todo), exact=True)
    if not todo:  # every rung is cached: once the settings that went on are too, the final plan is known
        try:
            went_on = tuning.survivor_configs(profile, papers, cache)
            done = all(cache.has_training(c) for c in went_on)
            tuned = tuning.tuned_plan(profile, papers, cache) if done else None
        except tuning.TuningIncomplete:
            tuned = None
        if tuned is not None:
            final = [c for c in tuned if not cache.has(c)]
            keys = frozenset(c.key() for c in [*configs, *went_on])
            return DataSetEstimate(
                data, [], final, len(final), prepare_estimate_s(data, final), True, keys, final_plan=tuned
            )
    final, every = final_run_bounds(profile, papers, cache)
    more = [c for c in tuning.survivor_stand_ins(profile, papers) if not cache.has_training(c)]
    prep = prepare_estimate_s(data, [*todo, *final])
    keys = frozenset(c.key() for c in [*configs, *more])
    return DataSetEstimate(data, list(todo), final, every, prep, tuning_keys=keys, tuning_more=more)


@dataclass(frozen=True)
class DataSetPlan:
    """One data set's share of the plan: ``configs`` are the runs known before tuning (a tuned profile's tuning runs,
    else every run), ``todo`` those of them the cache lacks, ``estimate`` their cost (None for a data set without
    measured costs). Frozen: the runs tuning adds are the driver's to count (``reproduce.driver.cli``), and the
    progress bar prices its own copy of the estimate (:meth:`reproduce.protocol.progress.RunProgress.of`)."""

    data: str
    profile: Profile  # with its data set applied (reproduce.spec.profiles.profile_for)
    configs: list
    todo: list
    papers: list | None = None
    estimate: DataSetEstimate | None = None

    @property
    def tuned(self) -> bool:
        return self.profile.tuning is not None

    @property
    def results_dir(self) -> Path:
        return ROOT / self.profile.results_dir


def data_set_plan(profile: str | Profile, data: str, papers, cache) -> DataSetPlan:
    """The plan of one data set under ``profile`` (a name, or the profile the driver resolved) for ``papers`` (the
    command line's; None: all; papers that train nothing, such as the data card, leave an empty plan). With a tuning
    grid (profile ``default``) its runs are the tuning runs only: the final runs are known once tuning has trained;
    the estimate bounds them."""
    profile = profile_for(profile, data)
    papers = [p for p in papers if p in experiments.PAPERS] if papers else None
    if papers == []:
        configs = []
    elif profile.tuning is not None:
        configs = tuning.tuning_configs(profile, papers)
    else:
        configs = experiments.plan(profile, papers)
    # tuning runs are only trained (their test split is never evaluated): a trained one is done
    done = (lambda c: tuning.tuning_run_done(c, profile, cache)) if profile.tuning is not None else cache.has
    todo = [c for c in configs if not done(c)]
    est = estimate_data_set(profile, data, papers, configs, todo, cache) if data in COSTS else None
    return DataSetPlan(data, profile, configs, todo, papers, est)


@dataclass(frozen=True)
class Plan:
    """The invocation's plan: every data set's (:class:`DataSetPlan`), the training workers, the notebooks'
    expected wall seconds (0 when they are skipped) and the machine whose imported runs are read (``--runs-from``;
    None: this machine's)."""

    profile_name: str
    data_sets: list[DataSetPlan]
    workers: int
    notebooks_s: float = 0.0
    runs_from: str | None = None

    @property
    def estimates(self) -> dict[str, DataSetEstimate]:
        """``{data set: estimate}`` of the data sets with measured costs."""
        return {p.data: p.estimate for p in self.data_sets if p.estimate is not None}

    @property
    def runs_known(self) -> int:
        """Runs to train or evaluate known before tuning, every data set (what the cache needs room for first)."""
        return sum(len(p.todo) for p in self.data_sets)


def make_plan(
    profiles: dict[str, Profile], papers, cache, workers: int, notebooks_s: float = 0.0, runs_from: str | None = None
) -> Plan:
    """The plan of the data sets of ``profiles`` (``{data set: its resolved profile}``, in order; :func:`data_set_plan`
    each), made once before any work."""
    plans = [data_set_plan(p, d, papers, cache) for d, p in profiles.items()]
    name = next(iter(profiles.values())).name
    return Plan(name, plans, workers, notebooks_s, runs_from)


def estimated_s(estimates: dict, workers: int, notebooks_s: float) -> float:
    """Estimated wall seconds: the runs' worker-seconds over the workers, the data preparation, the notebooks."""
    worker_s = sum(sum(e.run_s().values()) for e in estimates.values())
    return worker_s / max(1, workers) + sum(e.prepare_s for e in estimates.values()) + notebooks_s


def plan_lines(plan: Plan) -> list[str]:
    """The plan in words: per data set the tuning runs and the bound of final runs, then the estimate."""
    lines = []
    for e in plan.estimates.values():
        runs_s = sum(e.run_s().values())
        health = (
            f" (≤ {e.final_every} if the health check of the other seeds moved every family through its grid)"
            if e.final_every > len(e.final_todo)
            else ""
        )
        final = f"{len(e.final_todo)} final run(s)" if e.exact else f"≤ {len(e.final_todo)} final run(s){health}"
        lines.append(
            f"plan [{plan.profile_name}/{e.data}]: {len(e.tuning_todo)} tuning run(s) + {final} to train or evaluate; "
            f"estimated {minutes(runs_s / max(1, plan.workers))} of runs on {plan.workers} worker(s)"
            + (f" + {minutes(e.prepare_s)} of data preparation" if e.prepare_s else "")
        )
    total = sum(e.runs for e in plan.estimates.values())
    bound = "" if all(e.exact for e in plan.estimates.values()) else "≤ "
    lines.append(
        f"plan [{plan.profile_name}]: {bound}{total} run(s) in all; estimated wall time ≈ "
        f"{minutes(estimated_s(plan.estimates, plan.workers, plan.notebooks_s))}"
        + (f" (notebooks ≈ {minutes(plan.notebooks_s)} included)" if plan.notebooks_s else "")
        + " — from the per-run costs measured on the study's 2-core machine (reproduce.spec.profiles.COSTS), "
        "every run at its expected epochs (reproduce.spec.profiles.EXPECTED_EPOCHS: early stopping measured)"
    )
    if torch.cuda.is_available():
        packed = runs.engine_from_env() is not None
        price = cost.packed_run_estimate_s if packed else gpu_run_estimate_s
        gpu_s = sum(sum(e.run_s(price).values()) for e in plan.estimates.values()) / max(1, plan.workers)
        lines.append(
            f"plan [{plan.profile_name}]: training here runs on CUDA, which those CPU costs do not price; priced "
            f"from {GPU_COSTS['device']} (reproduce.spec.profiles.GPU_COSTS), the runs take ≈ {minutes(gpu_s)} on "
            f"{plan.workers} worker(s), data preparation and notebooks apart; the ETA corrects itself from the runs "
            "that finish, and `python -m reproduce.protocol.cost CACHE` says what they cost"
        )
        if packed:
            lines.append(packed_line(plan.profile_name))
    else:
        lines.append(cpu_line(plan.profile_name, plan.runs_from))
    return lines


def packed_line(profile_name: str) -> str:
    """How the plan prices the packed engine's runs (``$COHERENT_ITR_ENGINE`` packs on CUDA): from the packed
    measurement of a GPU visit (``reproduce.spec.profiles.PACKED_COSTS``), or, while there is none, as solo runs."""
    if cost.packed_priced_as_solo():
        return (
            f"plan [{profile_name}]: packed runs priced as solo runs: no packed measurement yet "
            "(reproduce.spec.profiles.PACKED_COSTS is None; a GPU visit's packed measurement goes there)"
        )
    return (
        f"plan [{profile_name}]: packed runs priced from {cost.PACKED_COSTS['device']} "
        "(reproduce.spec.profiles.PACKED_COSTS), the price above"
    )


def cpu_line(profile_name: str, source: str | None = None) -> str:
    """Where the runs come from and which CPU computes what the notebooks compute themselves: with ``source`` (the
    machine of ``--runs-from``) the imported machine's runs, none trained here; else this CPU, whose runs have keys of
    their own unless it is the committed archive's (a CPU run's key names its CPU:
    :func:`coherent_itr.runs.cpu_identity`)."""
    here = runs.cpu_identity()
    if source:
        there = upgrade_machine_1(runs.load_machine(paths.cache_dir(create=False), source))
        where = there.get("device") or f"CPU {there['cpu']}"
        return (
            f"plan [{profile_name}]: every run is read from those imported from machine {source} ({where}, torch "
            f"{there.get('torch')}; --runs-from): none trains here, a missing one is an error; what the notebooks "
            f"compute themselves (caption embeddings, relevance, image features) is computed on this CPU, {here}, "
            "and may differ from the committed files in its last bits"
        )
    if here == runs.REFERENCE_CPU:
        return (
            f"plan [{profile_name}]: runs train on this CPU, {here}: the CPU of the committed run archive "
            "(results/runs/, `make runs`), whose runs serve here"
        )
    return (
        f"plan [{profile_name}]: runs train on this CPU, {here}, not the run archive's ({runs.REFERENCE_CPU}): their "
        "numbers differ, so they have keys of their own (`make reproduce` reads the archive's instead: --runs-from "
        "committed); image features and caption embeddings are computed here too, in cache folders named for this "
        "CPU (coherent_itr.determinism.cpu_tag)"
    )


# --- the paper profile on this device -----------------------------------------------------------------
def matmul_gflops(device: str, seconds: float = 0.3) -> float:
    """GFLOP/s of the GRU's recurrent matmul at the paper's size ((128 × 1024) @ (1024 × 3072), float32)
    timed on ``device`` for about ``seconds``."""
    a = torch.randn(128, 1024, device=device)
    b = torch.randn(1024, 3072, device=device)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    (a @ b).sum().item()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        a @ b
        n += 1
    sync()
    return n * 2 * 128 * 1024 * 3072 / (time.perf_counter() - t0) / 1e9


def paper_cost_lines(profile, data: str, papers, workers: int, device: str | None = None) -> list[str]:
    """The paper profile's expected cost on ``device`` (default: CUDA when available, else this CPU), as
    lines that say it is an estimate and from what."""
    if data not in COSTS or papers == []:
        return []
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    ref_step_s = (COSTS[data]["epoch_s"] - COSTS[data]["val_s"]) / COSTS[data]["steps"]
    ref_rate = step_flop(**REFERENCE_MODEL, tokens_per_caption=TOKENS_PER_CAPTION[data]) / ref_step_s
    m = profile.model
    flop = step_flop(m["batch_size"], m["embed_dim"], m["word_dim"], m["text_hidden"], TOKENS_PER_CAPTION[data])
    if device.startswith("cuda"):
        rate, how = matmul_gflops(device) * 1e9, f"a matmul of the GRU's shape timed on {torch.cuda.get_device_name()}"
        lanes = 1
    else:
        rate, how = ref_rate, "the rate the default model's measured Flickr8k step reaches on the study's CPU"
        lanes = workers
    step_s = flop / rate
    tune = [*tuning.tuning_configs(profile, papers), *tuning.survivor_stand_ins(profile, papers)]
    final, _ = final_run_bounds(profile, papers, type("NoCache", (), {"has": staticmethod(lambda c: False)})())
    steps_per_epoch = COSTS[data]["steps"] * 128 / m["batch_size"]
    steps = sum(c.epochs * math.ceil(steps_per_epoch * c.train_fraction) for c in [*tune, *final])
    return [
        f"paper [{data}] on {device}: ESTIMATE ≈ {step_s:.2f} s a training step ({flop / 1e9:.1f} GFLOP, "
        f"bench_run_profile's arithmetic, at {rate / 1e9:.0f} GFLOP/s: {how})",
        f"paper [{data}] on {device}: ESTIMATE ≈ {minutes(steps * step_s / lanes)} for ≤ {len(tune) + len(final)} "
        f"runs ({steps:,} steps at their epoch caps, {lanes} in parallel; validation and evaluation not included)",
    ]


# --------------------------------------------------------------------------------------------------
# The whole protocol's cost before any run (what ``python -m reproduce.protocol.plan`` prints)
# --------------------------------------------------------------------------------------------------
def estimate_cost(
    profile: Profile | str, data: str, workers: int = 2, papers=None, speedup: float = ASSUMED_STEP_SPEEDUP
) -> dict:
    """Runs and time of the profile's whole protocol on ``data`` ("synthetic" or "flickr8k"), every run at
    its expected epochs (:func:`expected_epochs`). Counts the tuning runs (seed 0, the grid of
    every main arm) and the final runs (every arm × its seeds at the tuned setting) as *distinct* runs —
    the chosen setting's seed-0 run is a tuning run, trained once. The final runs' settings are not known
    before tuning; their cost is the same for any lr / warm-up, so the default setting stands in."""
    if data not in COSTS:
        raise ValueError(f"data must be one of {sorted(COSTS)}, got {data!r}")
    prof = profile_for(profile, data)
    tune = {c.key(): c for c in [*tuning.tuning_configs(prof, papers), *tuning.survivor_stand_ins(prof, papers)]}
    # the default setting (a grid point) stands in for the chosen one; a main arm's final seed-0 run is
    # then one of the tuning runs, as the chosen one is after tuning
    final = {k: c for k, c in ((c.key(), c) for c in experiments.plan(prof, papers)) if k not in tune}
    problems = {tuning.tuning_key(a, prof) for p in (papers or experiments.PAPERS) for a in tuning.main_arms(prof, p)}
    tune_s = sum(run_seconds(c, data, speedup=speedup, evaluated=False) for c in tune.values())
    tune_s += len(problems) * COSTS[data]["eval_s"]  # the chosen seed-0 run of each tuning problem is evaluated
    final_s = sum(run_seconds(c, data, speedup=speedup) for c in final.values())
    train_wall = (tune_s + final_s) / workers
    c = COSTS[data]
    total = train_wall + c["prepare_s"] + c["notebooks_s"]
    return {
        "profile": prof.name,
        "data": data,
        "epoch_cap": prof.model.get("epochs"),
        "tuning_runs": len(tune),
        "final_runs": len(final),
        "runs": len(tune) + len(final),
        "worker_hours": (tune_s + final_s) / 3600,
        "train_wall_min": train_wall / 60,
        "total_min": total / 60,
        "workers": workers,
        "speedup": speedup,
    }


def cost_table(profile: str = "default", workers: int = 2) -> str:
    rows = [estimate_cost(profile, d, workers) for d in COSTS]
    lines = [
        "| data | cap E | tuning runs | final runs | runs | worker-h | train wall (min) | + prep + notebooks (min) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['data']} | {r['epoch_cap']} | {r['tuning_runs']} | {r['final_runs']} | {r['runs']} | "
            f"{r['worker_hours']:.2f} | {r['train_wall_min']:.1f} | {r['total_min']:.1f} |"
        )
    lines.append(
        f"| both | | | | {sum(r['runs'] for r in rows)} | {sum(r['worker_hours'] for r in rows):.2f} | "
        f"{sum(r['train_wall_min'] for r in rows):.1f} | {sum(r['total_min'] for r in rows):.1f} |"
    )
    return "\n".join(lines) + (
        f"\n\n{workers} workers at the measured costs (``COSTS``), every run at its expected epochs "
        "(``EXPECTED_EPOCHS``); unchosen tuning runs are not evaluated on the test split.\n"
    )


def main(argv=None) -> None:
    """``python -m reproduce.protocol.plan [--profile P] [--workers N]``: the cost table of :func:`cost_table`."""
    ap = argparse.ArgumentParser(
        prog="python -m reproduce.protocol.plan",
        description="What the whole protocol of a profile costs on the study's 2-core machine, before any run "
        "(runs, worker-hours, wall time per data set).",
    )
    ap.add_argument("--profile", default="default", choices=sorted(PROFILES))
    ap.add_argument("--workers", type=int, default=2, help="parallel training processes (default: 2)")
    a = ap.parse_args(argv)
    if a.workers < 1:
        ap.error(f"--workers must be ≥ 1, got {a.workers}")
    print(cost_table(a.profile, a.workers))


if __name__ == "__main__":
    main()
