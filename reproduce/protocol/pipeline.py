"""The protocol one tuning problem at a time: what can train now, so that no worker waits for another problem's runs.

Trained in phases — every rung, then every setting that goes on, then every final run — each phase would wait for its
slowest run while the other workers idle (on one GPU shared by 16 processes about half of them trained at a time
during tuning: ``results/benchmarks/gpu/README.md``). The tuning problems are independent, so each goes its own way:
:func:`ready_runs` says, from what the cache holds, which runs nothing holds back any more. A problem's rungs first;
then the full runs of the settings that go on past them; once all its tuning runs are trained (or failed) its choice
(:func:`~reproduce.protocol.tuning.health_checked_choice`) and the final runs of every arm that shares it, every seed;
and when the health check of the other seeds moves the choice, the next setting's. Asked again after every run until
nothing is ready, it ends at a fixed point of :func:`~reproduce.protocol.tuning.tuned_plan` (every final run trained
or failed), the same whatever order the runs finished in (``tests/reproduce/protocol/test_ready_runs.py``).

Every answer reads the records of the tuning runs again: :class:`KnownRuns` keeps what a cache once held (an entry,
once written and verified, does not change while the driver runs) so that each answer reads only what is new.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

from coherent_itr.config import Config

from reproduce.protocol import tuning
from reproduce.protocol.trials import setting_of
from reproduce.spec import experiments
from reproduce.spec.profiles import Profile


@dataclass
class Ready:
    """What a data set's protocol can train now."""

    tuning: list[Config]  # tuning runs not in the cache (their training entry only)
    final: list[Config]  # final runs not in the cache (trained and evaluated) of the problems whose choice is made
    waiting: int  # tuning problems whose choice still waits for one of their tuning runs

    @property
    def chosen_all(self) -> bool:
        return self.waiting == 0


def ready_runs(profile: Profile, papers=None, cache=None, failed_keys=(), is_collapsed=None) -> Ready:
    """The runs of ``papers`` under ``profile`` that nothing holds back, given what ``cache`` holds and which runs
    failed (``failed_keys``: config keys; a failed run is a failed trial, never retried). Without tuning in the
    profile: every run of the plan not in the cache. ``papers=None`` selects every paper; an empty list selects none
    (nothing is ready, nothing waits)."""
    if papers is not None and not papers:
        return Ready([], [], 0)
    if profile.tuning is None:
        return Ready([], [c for c in experiments.plan(profile, papers) if not cache.has(c)], 0)
    fams: dict[str, tuning.Family | None] = {}
    tune: dict[str, Config] = {}
    for paper in papers or experiments.PAPERS:
        for arm in tuning.main_arms(profile, paper):
            k = tuning.tuning_key(arm, profile)
            if k in fams:
                if fams[k] is not None:
                    fams[k].members.append(f"{paper}/{arm.name}")
                continue
            trials, missing = tuning.arm_trials(arm, profile, cache, failed_keys, is_collapsed=is_collapsed)
            if missing:  # its rungs, or the full runs of the settings that went on past them
                fams[k] = None
                for c in missing:
                    tune.setdefault(c.key(), c)
                continue
            fams[k] = tuning.Family(k, arm, [f"{paper}/{arm.name}"], trials, None)
    chosen = {k: f for k, f in fams.items() if f is not None}
    final: dict[str, Config] = {}
    for f in chosen.values():
        f.chosen = tuning.health_checked_choice(f, profile, cache, failed_keys, is_collapsed=is_collapsed)
        if "collapsed_other_seeds" in f.chosen:
            # no setting is healthy on every seed: the least collapsed is chosen, so each one's count must be whole
            # (the phases train every seed of each setting they try: a setting left early counts them all too)
            for t in f.trials:
                if t["collapsed"] or t["status"] != "ok":
                    continue
                for seed in f.arm.pilot_seeds(profile):
                    c = f.arm.config(profile, seed, **setting_of(t))
                    if seed != profile.tuning.seed and c.key() not in failed_keys and not cache.has(c):
                        final.setdefault(c.key(), c)
    for paper in papers or experiments.PAPERS:
        arms = experiments.arms(paper, profile)
        for arm in arms:
            if tuning.tuning_key(tuning.family_of(arm, arms), profile) not in chosen:
                continue
            for c in tuning.arm_configs(arm, arms, profile, chosen):
                if c.key() not in failed_keys and not cache.has(c):
                    final.setdefault(c.key(), c)
    return Ready(list(tune.values()), list(final.values()), len(fams) - len(chosen))


class KnownRuns:
    """A run cache's reads for :func:`ready_runs`, each entry read (and verified) once: what the cache held once, it
    holds while the driver runs; what it lacked is asked again. Only the training records are kept (the tuner reads
    nothing else), not the test embeddings."""

    def __init__(self, cache) -> None:
        self.cache = cache.with_fixed_code() if hasattr(cache, "with_fixed_code") else cache
        self._records: dict[str, SimpleNamespace] = {}  # config key -> the training entry's record
        self._trained: set[str] = set()
        self._evaluated: set[str] = set()

    def load_training(self, config: Config):
        k = config.key()
        if k not in self._records:
            got = self.cache.load_training(config)
            if got is None:
                return None
            self._records[k] = SimpleNamespace(record=got.record)
            self._trained.add(k)
        return self._records[k]

    def has_training(self, config: Config) -> bool:
        k = config.key()
        if k not in self._trained and self.cache.has_training(config):
            self._trained.add(k)
        return k in self._trained

    def has(self, config: Config) -> bool:
        k = config.key()
        if k not in self._evaluated and self.cache.has(config):
            self._evaluated.add(k)
        return k in self._evaluated
