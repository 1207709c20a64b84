"""The driver's progress bar over the runs of a plan, and its estimate against what the invocation cost.

* **The bar** (:class:`RunProgress`): one tqdm bar over the runs of the whole invocation whose total is the plan's
  bound (:mod:`reproduce.protocol.plan`; replaced by the exact count once tuning has chosen), with an ETA from the
  estimated cost of the runs left, corrected by how the finished runs compared with their estimate
  (:func:`eta_seconds`).
* **At the start** (:func:`start`): the plan's lines, then the bar.
* **At the end** (:func:`finish`): estimated vs actual wall time, printed and written to ``manifest.json``
  (``estimate``).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

from tqdm.auto import tqdm

from coherent_itr.config import Config

from reproduce.protocol.cost import minutes, run_estimate_s
from reproduce.protocol.plan import DataSetEstimate, Plan, estimated_s, paper_cost_lines, plan_lines
from reproduce.protocol.tuning import SETTING_FIELDS
from reproduce.spec.profiles import COSTS

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


def slot(config: Config) -> str:
    """What a run is apart from its tuning setting (lr, warm-up): the stand-in of the plan's bound and the run tuning
    then chose for it share it (the same arm, seed and epochs at another setting)."""
    return repr([(f.name, getattr(config, f.name)) for f in dataclasses.fields(config) if f.name not in SETTING_FIELDS])


# --- the bar ------------------------------------------------------------------------------------------
@dataclass
class RunProgress:
    """Progress of every run of the invocation: a tqdm bar (opened per training phase, so the
    preparation's bars never nest under it) whose total is the plan's bound, with a cost-based ETA.
    Without bars (``enabled=False``: ``--no-progress``, log files, CI) one plain line per finished run says the
    same (:meth:`log_line`), so a log shows that hours of training are moving."""

    estimates: dict  # data set -> reproduce.protocol.plan.DataSetEstimate
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
    # (data set, phase) -> slot -> keys of the bound's stand-ins that no run the protocol found ready has replaced
    _stand_ins: dict = field(default_factory=dict)
    _slot_of: dict = field(default_factory=dict)  # (phase, a stand-in's key) -> its slot (a key names its data set)

    def __post_init__(self) -> None:
        for e in self.estimates.values():
            self._est.update(e.run_s())
            self._hold_stand_ins(e.data, "tune", e.tuning_more)
            if not e.exact:
                self._hold_stand_ins(e.data, "final", e.final_todo)
        self.planned_s = self.estimated_total_s()
        self.planned_runs = sum(e.runs for e in self.estimates.values())

    @property
    def total(self) -> int:
        return self.done + len(self._est)

    @property
    def remaining_est_s(self) -> float:
        return sum(self._est.values())

    @classmethod
    def of(cls, plan: Plan, enabled: bool = True) -> "RunProgress":
        """The bar of ``plan``: a copy of its estimates (what tuning learns updates the copy; the plan stays as
        made), its workers and notebooks."""
        estimates = {d: dataclasses.replace(e) for d, e in plan.estimates.items()}
        return cls(estimates, plan.workers, plan.notebooks_s, enabled=enabled)

    def estimated_total_s(self) -> float:
        """The plan's estimated wall seconds: runs over the workers, preparation, notebooks."""
        return estimated_s(self.estimates, self.workers, self.notebooks_s)

    def final_known(self, data: str, todo: list) -> None:
        """Tuning chose: the data set's final runs are ``todo`` (replacing the bound)."""
        e = self.estimates.get(data)
        if e is None:  # a data set without measured costs: counted, not priced
            e = self.estimates[data] = DataSetEstimate(data, [], [], 0, 0.0)
        for c in e.final_todo:
            self._est.pop(("final", c.key()), None)
        self._stand_ins.pop((data, "final"), None)
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
        self._stand_ins.pop((data, "tune"), None)
        e.tuning_more = list(todo)
        self._est.update({("tune", c.key()): run_estimate_s(c, data, evaluated=False) for c in todo})
        self._refresh()

    def _hold_stand_ins(self, data: str, phase: str, configs: list) -> None:
        held = self._stand_ins.setdefault((data, phase), {})
        for c in configs:
            k, s = c.key(), slot(c)
            held.setdefault(s, []).append(k)
            self._slot_of[(phase, k)] = s

    def ready(self, data: str, tuning: list, final: list) -> None:
        """Runs the protocol found ready one tuning problem at a time (:mod:`reproduce.protocol.pipeline`). One the
        bar does not count yet takes the place of a stand-in of the plan's bound with its slot (:func:`slot`: the
        same run at the setting the bound assumed), so a problem that chose early is not counted twice until every
        problem has chosen; a run with no stand-in left (a health check's other seeds) adds to the total."""
        e = self.estimates.get(data)
        if e is None:
            e = self.estimates[data] = DataSetEstimate(data, [], [], 0, 0.0)
        for phase, runs, price in (
            ("tune", tuning, lambda c: run_estimate_s(c, data, evaluated=False) if data in COSTS else 0.0),
            ("final", final, e.final_s),
        ):
            held = self._stand_ins.get((data, phase), {})
            keys_of = [c.key() for c in runs]
            for k in keys_of:  # a stand-in that is itself ready stands for nothing else
                keys = held.get(self._slot_of.pop((phase, k), None), [])
                if k in keys:
                    keys.remove(k)
            for c, k in zip(runs, keys_of):
                if ("tune", k) in self._est or ("final", k) in self._est:
                    continue
                keys = held.get(slot(c), [])
                while keys:  # the first stand-in of its slot still to do (a finished one is no longer counted)
                    gone = keys.pop(0)
                    self._slot_of.pop((phase, gone), None)
                    if self._est.pop((phase, gone), None) is not None:
                        break
                self._est[(phase, k)] = price(c)
        self._refresh()

    def eta_s(self) -> float:
        elapsed = self.train_elapsed_s + (time.perf_counter() - self._opened if self._bar is not None else 0.0)
        return eta_seconds(self.remaining_est_s, self.done_est_s, elapsed, self.workers)

    def open(self, desc: str) -> "RunProgress":
        """Open the bar of a phase; none while the plan has no run to do (reading imported runs: no empty bar in the
        log, once a phase)."""
        self._opened = time.perf_counter()
        self._desc = desc
        if self.total <= self.done:
            self._bar = None
            return self
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
            f"{self._desc}: {self.done}/{self.total} runs done, {minutes(elapsed)} in this phase, "
            f"ETA ≈ {minutes(self.eta_s())} of runs (estimate)"
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
        self._bar.set_postfix_str(f"ETA ≈ {minutes(self.eta_s())} of runs (estimate)", refresh=True)

    def report(self, actual_s: float, runs_done: int) -> dict:
        """:func:`finish` of this progress: the estimated against the actual wall time."""
        return finish(self, actual_s, runs_done)

    def close(self) -> None:
        if self._bar is not None:
            self.train_elapsed_s += time.perf_counter() - self._opened
            self._bar.close()
            self._bar = None


# --- the driver's lines ---------------------------------------------------------------------------------
def start(plan: Plan, enabled: bool = True) -> RunProgress:
    """Print ``plan``'s lines (and, for the ``paper`` profile, its cost on this device) and return the invocation's
    :class:`RunProgress` (``enabled=False``: one plain line per finished run instead of a bar)."""
    prog = RunProgress.of(plan, enabled)
    for line in plan_lines(plan):
        print(line, flush=True)
    if plan.profile_name == "paper":
        for p in plan.data_sets:
            for line in paper_cost_lines(p.profile, p.data, p.papers, plan.workers):
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
        "source": "reproduce.spec.profiles.COSTS scaled by reproduce.protocol.cost.run_estimate_s",
    }
    print(
        f"reproduce: estimated {minutes(est)}, took {minutes(actual_s)}"
        + (f" ({actual_s / est:.2f}× the estimate)" if est > 0 else ""),
        flush=True,
    )
    return rec
