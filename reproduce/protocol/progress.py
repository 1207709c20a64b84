"""The driver's plan, its progress bar and its estimate against what it cost.

* **The plan, before any work** (:func:`plan_data_set`): per data set, the tuning runs to train and an
  upper bound of the final runs — every arm × its seeds at its family's setting, counted at the grid
  setting that gives the family the most runs not yet cached (the setting is chosen only after tuning)
  — and, as a second bound, the final runs if the health check of the other seeds
  (:mod:`reproduce.protocol.tuning`) moved every family through its whole grid.
* **The estimate** (:func:`run_estimate_s`): :func:`reproduce.spec.profiles.run_seconds` (the per-run costs
  measured on the study's machine, ``COSTS``), scaled to the run's model and data size — its training
  and validation by the step's FLOP (:func:`step_flop`, the arithmetic of
  ``benchmarks/bench_run_profile.py``) relative to the model the costs were measured with, and by the
  number of training / validation / test images relative to the measured world; unchanged for the
  ``default`` profile. Wall time = worker-seconds / workers + data preparation + notebooks.
* **The bar** (:class:`RunProgress`): one tqdm bar over the runs of the whole invocation whose total is
  the plan's bound (replaced by the exact count once tuning has chosen), with an ETA from the estimated
  cost of the runs left, corrected by how the finished runs compared with their estimate
  (:func:`eta_seconds`).
* **At the end** (:func:`finish`): estimated vs actual wall time, printed and written to ``manifest.json``
  (``estimate``).
* **The ``paper`` profile** (:func:`paper_cost_lines`): its expected cost on the current device — the
  paper model's step FLOP at the rate the default model's measured Flickr8k step achieves on this CPU,
  or (CUDA) at the rate of a matmul of the GRU's shape timed on the device: an estimate, said so.
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass, field

import torch
from tqdm.auto import tqdm

from coherent_itr.config import Config
from coherent_itr.data.synthetic import SCALES

from reproduce.spec import experiments

from reproduce.protocol import tuning
from reproduce.protocol.prepare import train_rows
from reproduce.spec.profiles import (
    ASSUMED_STEP_SPEEDUP,
    COSTS,
    COSTS_MODEL,
    PROFILES,
    Profile,
    expected_epochs,
    profile_for,
    run_seconds,
)

FEATURE_DIM = 1280  # EfficientNet-Lite0 / synthetic image features
# what ``COSTS`` were measured with: the default profile's model on the default synthetic world and Flickr8k
REFERENCE_MODEL = dict(COSTS_MODEL)
REFERENCE_SIZES = {"synthetic": (3000, 500, 1000), "flickr8k": (6000, 1000, 1000)}  # train, dev, test images
# mean tokens per caption (Σ tokens per batch of 128 / 128: results/benchmarks/run_profile*.md)
TOKENS_PER_CAPTION = {"synthetic": 1603 / 128, "flickr8k": 1768 / 128}
# Flickr8k preparation (``COSTS["flickr8k"]["prepare_s"]``): ≈ 560 s of it featurised all 7,999 photos
FEATURE_S_PER_IMAGE = 560.0 / 7999


def step_flop(
    batch_size: int, embed_dim: int, word_dim: int, text_hidden: int, tokens_per_caption: float, feat_dim=FEATURE_DIM
) -> float:
    """FLOP of one training step (``benchmarks/bench_run_profile.py``): multiply-add = 2 FLOP; GRU forward
    6·H·(W + H) per token, image projection 2·F·D per image, similarities 2·B²·D, text projection 2·H·D
    per caption when H ≠ D; a step ≈ 3 × its forward."""
    b, d, w, h = batch_size, embed_dim, word_dim, text_hidden
    fwd = (
        6 * h * (w + h) * tokens_per_caption * b
        + 2 * feat_dim * d * b
        + 2 * b * b * d
        + (2 * h * d * b if h != d else 0)
    )
    return 3.0 * fwd


def _flop_per_caption(model: dict, data: str) -> float:
    keys = ("batch_size", "embed_dim", "word_dim", "text_hidden")
    return step_flop(*(model[k] for k in keys), TOKENS_PER_CAPTION[data]) / model["batch_size"]


def _sizes(config, data: str) -> tuple[int, int, int]:
    if data == "synthetic":
        return SCALES.get(config.data_scale, REFERENCE_SIZES["synthetic"])
    return REFERENCE_SIZES[data]


def run_estimate_s(config, data: str, evaluated: bool = True, trained: bool = False) -> float:
    """Expected seconds of one run on one worker: :func:`reproduce.spec.profiles.run_seconds` with its training
    and validation scaled by the FLOP per caption relative to :data:`REFERENCE_MODEL` and by the data
    size relative to the measured world, its test evaluation by (test images)² (a images × captions
    matrix). Equals ``run_seconds`` for the default profile's model and data. ``trained``: the run is
    trained already (a chosen tuning run): its fixed part and evaluation only."""
    c = COSTS[data]
    model = {k: getattr(config, k) for k in REFERENCE_MODEL}
    flop = _flop_per_caption(model, data) / _flop_per_caption(REFERENCE_MODEL, data)
    (n_tr, n_dev, n_te), (r_tr, r_dev, r_te) = _sizes(config, data), REFERENCE_SIZES[data]
    epochs = expected_epochs(config, data)
    base = run_seconds(config, data, evaluated=False) - c["fixed_s"]  # epochs × (validation + training)
    per_epoch = base / epochs
    val = c["val_s"]
    train = per_epoch - val
    epoch_s = val * flop * n_dev / r_dev + train * flop * n_tr / r_tr
    eval_s = c["eval_s"] * (n_te / r_te) ** 2 if evaluated else 0.0
    return c["fixed_s"] + eval_s + (0.0 if trained else epochs * epoch_s)


ETA_PRIOR_S = 60.0  # estimated worker-seconds of the plan's own rate (1 / workers) mixed into the measured one


def eta_seconds(remaining_est_s: float, done_est_s: float, elapsed_s: float, workers: int) -> float:
    """Seconds left: the estimated worker-seconds of the runs left, at a rate of wall-seconds per estimated
    worker-second that starts at the plan's own (1 / ``workers``) and moves to the one the finished runs took
    (``elapsed_s / done_est_s``) as they add up: (elapsed_s + ETA_PRIOR_S / workers) / (done_est_s + ETA_PRIOR_S).
    The first short runs, which also pay for the workers' start, do not throw the ETA far off (it moved 6.6 →
    50 min after the first smoke run with the measured rate alone)."""
    if remaining_est_s <= 0:
        return 0.0
    rate = (max(0.0, elapsed_s) + ETA_PRIOR_S / max(1, workers)) / (max(0.0, done_est_s) + ETA_PRIOR_S)
    return remaining_est_s * rate


def _minutes(s: float) -> str:
    """Seconds in words: "42 s", "3.5 min", "2.1 h"."""
    if s < 60:
        return f"{s:.0f} s"
    return f"{s / 60:.1f} min" if s < 3600 else f"{s / 3600:.1f} h"


# --- the plan -----------------------------------------------------------------------------------------
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

    @property
    def runs(self) -> int:
        return len(self.tuning_todo) + len(self.tuning_more) + len(self.final_todo)

    def final_s(self, c) -> float:
        if self.data not in COSTS:
            return 0.0
        return run_estimate_s(c, self.data, trained=c.key() in self.tuning_keys)

    def run_s(self) -> dict[tuple, float]:
        """Estimated worker-seconds of every run to do, by (phase, config key); tuning runs are not evaluated."""
        out = {("tune", c.key()): run_estimate_s(c, self.data, evaluated=False) for c in self.tuning_todo}
        out.update({("tune", c.key()): run_estimate_s(c, self.data, evaluated=False) for c in self.tuning_more})
        out.update({("final", c.key()): self.final_s(c) for c in self.final_todo})
        return out


def prepare_estimate_s(data: str, configs: list) -> float:
    """Seconds of data preparation: the measured ``prepare_s`` with Flickr8k's feature part priced per image
    the runs use (every training image if one run uses them all, else their subsets), dev and test included."""
    c = COSTS[data]
    if data != "flickr8k" or not configs:
        return c["prepare_s"] if configs else 0.0
    n_tr, n_dev, n_te = REFERENCE_SIZES["flickr8k"]

    rows: set[int] = set()
    for cfg in configs:
        rows.update(train_rows(cfg, n_tr).tolist())
    return c["prepare_s"] - FEATURE_S_PER_IMAGE * (n_tr - len(rows))  # the training images left out


def plan_data_set(profile, data: str, papers, configs: list, todo: list, cache) -> DataSetEstimate:
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
            final = [c for c in tuning.tuned_plan(profile, papers, cache) if not cache.has(c)] if done else None
        except tuning.TuningIncomplete:
            final = None
        if final is not None:
            keys = frozenset(c.key() for c in [*configs, *went_on])
            return DataSetEstimate(
                data, [], final, len(final), prepare_estimate_s(data, final), exact=True, tuning_keys=keys
            )
    final, every = final_run_bounds(profile, papers, cache)
    more = [c for c in tuning.survivor_stand_ins(profile, papers) if not cache.has_training(c)]
    prep = prepare_estimate_s(data, [*todo, *final])
    keys = frozenset(c.key() for c in [*configs, *more])
    return DataSetEstimate(data, list(todo), final, every, prep, tuning_keys=keys, tuning_more=more)


# --- the bar ------------------------------------------------------------------------------------------
@dataclass
class RunProgress:
    """Progress of every run of the invocation: a tqdm bar (opened per training phase, so the
    preparation's bars never nest under it) whose total is the plan's bound, with a cost-based ETA.
    Without bars (``enabled=False``: ``--no-progress``, log files, CI) one plain line per finished run says the
    same (:meth:`log_line`), so a log shows that hours of training are moving."""

    estimates: dict  # data set -> DataSetEstimate
    workers: int
    notebooks_s: float
    enabled: bool = True
    done: int = 0
    done_est_s: float = 0.0
    train_elapsed_s: float = 0.0
    t0: float = field(default_factory=time.perf_counter)
    _est: dict = field(default_factory=dict)  # (phase, config key) -> estimated worker-seconds still to do
    _bar: object = None
    _opened: float = 0.0
    planned_s: float = 0.0  # the estimate before any work (what the end compares with)
    planned_runs: int = 0  # the plan's bound of runs before any work
    _desc: str = ""

    def __post_init__(self) -> None:
        for e in self.estimates.values():
            self._est.update(e.run_s())
        self.planned_s = self.estimated_total_s()
        self.planned_runs = sum(e.runs for e in self.estimates.values())

    @property
    def total(self) -> int:
        return self.done + len(self._est)

    @property
    def remaining_est_s(self) -> float:
        return sum(self._est.values())

    def estimated_total_s(self) -> float:
        """The plan's estimated wall seconds: runs over the workers, preparation, notebooks."""
        runs = sum(sum(e.run_s().values()) for e in self.estimates.values())
        return runs / max(1, self.workers) + sum(e.prepare_s for e in self.estimates.values()) + self.notebooks_s

    def final_known(self, data: str, todo: list) -> None:
        """Tuning chose: the data set's final runs are ``todo`` (replacing the bound)."""
        e = self.estimates.get(data)
        if e is None:  # a data set without measured costs: counted, not priced
            e = self.estimates[data] = DataSetEstimate(data, [], [], 0, 0.0)
        for c in e.final_todo:
            self._est.pop(("final", c.key()), None)
        e.final_todo, e.exact = list(todo), True
        self._est.update({("final", c.key()): e.final_s(c) for c in todo})
        self._refresh()

    def survivors_known(self, data: str, todo: list) -> None:
        """Successive halving: the full tuning runs past the rungs are ``todo`` (replacing the stand-ins)."""
        e = self.estimates.get(data)
        if e is None:
            return
        for c in e.tuning_more:
            self._est.pop(("tune", c.key()), None)
        e.tuning_more = list(todo)
        self._est.update({("tune", c.key()): run_estimate_s(c, data, evaluated=False) for c in todo})
        self._refresh()

    def more(self, data: str, todo: list) -> None:
        """Runs beyond the plan (the health check moved a family to its next setting)."""
        e = self.estimates[data]
        e.final_todo = [*e.final_todo, *todo]
        self._est.update({("final", c.key()): e.final_s(c) for c in todo})
        self._refresh()

    def eta_s(self) -> float:
        elapsed = self.train_elapsed_s + (time.perf_counter() - self._opened if self._bar is not None else 0.0)
        return eta_seconds(self.remaining_est_s, self.done_est_s, elapsed, self.workers)

    def open(self, desc: str) -> "RunProgress":
        self._bar = tqdm(
            total=self.total,
            initial=self.done,
            desc=desc,
            unit="run",
            disable=not self.enabled,
            bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} runs [{elapsed}{postfix}]",
        )
        self._opened = time.perf_counter()
        self._desc = desc
        self._refresh()
        return self

    def log_line(self) -> str:
        """The bar in one plain line: phase, runs done of the current total, time in this phase, the ETA."""
        elapsed = time.perf_counter() - self._opened if self._bar is not None else 0.0
        return (
            f"{self._desc}: {self.done}/{self.total} runs done, {_minutes(elapsed)} in this phase, "
            f"ETA ≈ {_minutes(self.eta_s())} of runs (estimate)"
        )

    def run_done(self, config_dict: dict | None = None) -> None:
        """One run finished (trained, evaluated or failed): ``config_dict`` prices it."""
        est = 0.0
        if config_dict is not None:
            k = Config.from_dict(config_dict).key()
            est = self._est.pop(("tune", k), None)
            est = self._est.pop(("final", k), 0.0) if est is None else est
        self.done += 1
        self.done_est_s += est
        if self._bar is not None:
            self._bar.update(1)
            self._refresh()
            if not self.enabled:
                print(self.log_line(), flush=True)

    def update(self, n: int = 1) -> None:
        """tqdm's ``update``: ``n`` runs finished (unpriced: they leave the ETA's calibration alone)."""
        for _ in range(n):
            self.run_done()

    def _refresh(self) -> None:
        if self._bar is None:
            return
        self._bar.total = self.total
        self._bar.set_postfix_str(f"ETA ≈ {_minutes(self.eta_s())} of runs (estimate)", refresh=True)

    def report(self, actual_s: float, runs_done: int) -> dict:
        """:func:`finish` of this progress: the estimated against the actual wall time."""
        return finish(self, actual_s, runs_done)

    def close(self) -> None:
        if self._bar is not None:
            self.train_elapsed_s += time.perf_counter() - self._opened
            self._bar.close()
            self._bar = None


# --- the driver's lines ---------------------------------------------------------------------------------
def plan_lines(profile_name: str, progress: RunProgress, skip_notebooks: bool) -> list[str]:
    """The plan in words: per data set the tuning runs and the bound of final runs, then the estimate."""
    lines = []
    for e in progress.estimates.values():
        runs_s = sum(e.run_s().values())
        health = (
            f" (≤ {e.final_every} if the health check of the other seeds moved every family through its grid)"
            if e.final_every > len(e.final_todo)
            else ""
        )
        final = f"{len(e.final_todo)} final run(s)" if e.exact else f"≤ {len(e.final_todo)} final run(s){health}"
        lines.append(
            f"plan [{profile_name}/{e.data}]: {len(e.tuning_todo)} tuning run(s) + {final} to train or evaluate; "
            f"estimated {_minutes(runs_s / max(1, progress.workers))} of runs on {progress.workers} worker(s)"
            + (f" + {_minutes(e.prepare_s)} of data preparation" if e.prepare_s else "")
        )
    total = sum(e.runs for e in progress.estimates.values())
    bound = "" if all(e.exact for e in progress.estimates.values()) else "≤ "
    lines.append(
        f"plan [{profile_name}]: {bound}{total} run(s) in all; estimated wall time ≈ {_minutes(progress.planned_s)}"
        + ("" if skip_notebooks else f" (notebooks ≈ {_minutes(progress.notebooks_s)} included)")
        + " — from the per-run costs measured on the study's 2-core machine (reproduce.spec.profiles.COSTS), "
        "every run at its expected epochs (reproduce.spec.profiles.EXPECTED_EPOCHS: early stopping measured)"
    )
    return lines


def start(args, plans: list, cache, notebooks_s: float) -> RunProgress:
    """Estimate the driver's ``plans`` (``reproduce.driver.cli.DataSetPlan``) with ``notebooks_s`` wall seconds of
    notebooks (the driver's estimate: ``reproduce.driver.notebooks.expected_seconds``), print the plan lines (and, for
    the ``paper`` profile, its cost on this device) and return the invocation's :class:`RunProgress`."""
    estimates = {
        p.data: plan_data_set(p.profile, p.data, p.papers, p.configs, p.todo, cache) for p in plans if p.data in COSTS
    }
    nb = 0.0 if args.skip_notebooks else notebooks_s
    prog = RunProgress(estimates, args.workers, nb, enabled=not args.no_progress)
    for line in plan_lines(args.profile, prog, args.skip_notebooks):
        print(line, flush=True)
    if args.profile == "paper":
        for p in plans:
            for line in paper_cost_lines(p.profile, p.data, p.papers, args.workers):
                print(line, flush=True)
    return prog


def finish(progress: RunProgress, actual_s: float, runs_done: int) -> dict:
    """Print the estimated against the actual wall time; returns it for ``manifest.json`` (``estimate``)."""
    est = progress.planned_s
    rec = {
        "estimated_s": round(est, 1),
        "actual_s": round(actual_s, 1),
        "actual_over_estimated": round(actual_s / est, 3) if est > 0 else None,
        "runs_planned_at_most": progress.planned_runs,
        "runs_done": runs_done,
        "source": "reproduce.spec.profiles.COSTS scaled by reproduce.protocol.progress.run_estimate_s",
    }
    print(
        f"reproduce: estimated {_minutes(est)}, took {_minutes(actual_s)}"
        + (f" ({actual_s / est:.2f}× the estimate)" if est > 0 else ""),
        flush=True,
    )
    return rec


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
        f"paper [{data}] on {device}: ESTIMATE ≈ {_minutes(steps * step_s / lanes)} for ≤ {len(tune) + len(final)} "
        f"runs ({steps:,} steps at their epoch caps, {lanes} in parallel; validation and evaluation not included)",
    ]


# --------------------------------------------------------------------------------------------------
# The whole protocol's cost before any run (what ``python -m reproduce.protocol.progress`` prints)
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
    """``python -m reproduce.protocol.progress [--profile P] [--workers N]``: the cost table of :func:`cost_table`."""
    ap = argparse.ArgumentParser(
        prog="python -m reproduce.protocol.progress",
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
