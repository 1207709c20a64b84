"""Equal-budget tuning (Musgrave et al., "A Metric Learning Reality Check", ECCV 2020).

The protocol, exactly:

* **Who is tuned.** Every arm of every paper's main comparison (``experiments.MAIN_GROUPS``: the X1
  overview arms, BCLS Table VIII, Ladder Table I, SAM's full-data fraction arms, Listwise Table V,
  Unified Table 1). Two arms with the same config (VSE++ appears in five papers) are tuned once.
* **The search** (``Profile.tuning``, a :class:`~reproduce.spec.profiles.TuningGrid`): lr ∈ {2e-4, 6e-4,
  2e-3, 6e-3} × warm-up ∈ {0, 1} epoch when a warm-up changes the arm's loss (it selects hardest negatives:
  the library's ``ITRLoss.honours_warmup``, which the training loop reads too), lr alone otherwise —
  8 or 4 runs per arm, seed 0, under the profile's epoch cap and early stopping. Loss hyper-parameters
  stay as the papers fixed them.
* **Successive halving** (``TuningGrid.rung_epochs`` > 0; the ``default`` profile): every setting first
  trains ``rung_epochs`` epochs after its warm-up (:func:`rung_config`); the better half of each grid
  (``keep``, rounded up: 4 of 8, 2 of 4), in the selection order below, trains on to the cap and the others
  stop there (``went_on`` in the tables; never chosen). The same rung and share for every arm. A
  survivor trains again from its first epoch, which repeats the rung bit for bit (the schedule does not
  depend on the cap: tested), so a cached full run also answers for its rung
  (:func:`reproduce.protocol.halving.rung_view`).
* **Selection** (:func:`select`): the best *validation* RSUM of the run (its selected checkpoint, the
  record's ``best_epoch``). A collapsed run (``coherent_itr.health.is_collapsed``) or a failed one is
  never chosen over a healthy one; ties → the smaller lr, then no warm-up. Only validation fields of a
  record are read (:data:`VALIDATION_KEYS`); test metrics never reach the tuner (tests poison them).
* **Final runs.** The chosen setting is trained with every seed of the profile; only those runs enter
  tables, figures and claims (the chosen seed-0 run *is* the tuning run, trained once).
* **Health check of the other seeds** (:func:`health_checked_choice`; a setting healthy on seed 0 can collapse on
  other seeds, as three arms did on Flickr8k — the same rule for every arm, blind to claims and to test metrics): a
  setting is kept only if the main arm's runs with the *other* seeds are healthy too. Otherwise the next setting in
  the seed-0 order is tried with every seed, and so on; when every healthy seed-0 setting collapses on some seed, the
  one with the fewest collapsed seeds is kept (then the seed-0 order) and the tables mark its collapses. The search
  itself (grid × seed 0) stays the same for every arm; the check costs extra final runs only where a chosen setting
  fails on another seed. The driver trains until the choice no longer moves.
* **Families** (:func:`family_of`): a sweep arm (α, β, β₂, L, (L_MIN, L_MAX), τ, m, γ, SAM grid, SAM data
  fractions, calibrated-θ sweeps, the warm-up sensitivity rows) uses the setting tuned for the main arm
  it sweeps around — named by ``Arm.family``, else the main arm of the same paper with the same loss
  (e.g. the BCLS α sweep → "BCLS", Unified m / γ → "Unified", "γ=∞ (Triplet-HN)" → "Triplet-HN",
  SAM 10 % / 25 % → the 100 % arm of the same loss). An arm that fixes a field itself (the warm-up
  sensitivity rows fix ``warmup_epochs``) keeps it and takes only the rest of the setting.

Two phases: :func:`tuning_configs` (train first) → :func:`tuned_plan` (the final configs, from the
cached tuning runs). A trial, the selection and the health check read validation fields only
(:mod:`reproduce.protocol.trials`). The driver trains them one tuning problem at a time
(:mod:`reproduce.protocol.pipeline`).
"""

from __future__ import annotations


import pandas as pd

from coherent_itr.config import Config
from reproduce.protocol.halving import halving, n_survivors, rung_view
from reproduce.protocol.trials import (  # noqa: F401 (VALIDATION_KEYS, select: the tuner's, read as tuning.*)
    VALIDATION_KEYS,
    Family,
    failed_trial,
    health_checked_choice,
    load_record,
    rank,
    select,
    setting_of,
    trial_from_record,
    validation_view,
)
from reproduce.spec import experiments
from reproduce.spec.profiles import HN_WARMUP_FIELD, Profile

SETTING_FIELDS = ("lr", HN_WARMUP_FIELD)


class TuningIncomplete(RuntimeError):
    """Tuning runs that :func:`tuned_plan` needs are not in the cache (train :func:`tuning_configs` first)."""


# --- families -----------------------------------------------------------------------------------------
def main_arms(profile: Profile, paper: str) -> list[experiments.Arm]:
    return [a for a in experiments.arms(paper, profile) if experiments.is_main(a)]


def family_of(arm: experiments.Arm, paper_arms: list[experiments.Arm]) -> experiments.Arm:
    """The main-comparison arm whose tuned setting ``arm`` uses (see the module docstring)."""
    if experiments.is_main(arm):
        return arm
    mains = [a for a in paper_arms if experiments.is_main(a)]
    if arm.family is not None:
        hit = [a for a in mains if a.name == arm.family]
        if len(hit) != 1:
            raise ValueError(
                f"arm {arm.paper}/{arm.name!r}: family {arm.family!r} is not one main arm of "
                f"{arm.paper} (main arms: {[a.name for a in mains]})"
            )
        return hit[0]
    loss = arm.overrides["loss"]
    hit = [a for a in mains if a.overrides["loss"] == loss]
    if len(hit) != 1:
        raise ValueError(
            f"arm {arm.paper}/{arm.name!r} (loss {loss!r}): cannot infer its tuning family — "
            f"{len(hit)} main arms of {arm.paper} use that loss; set Arm.family"
        )
    return hit[0]


def family_table(profile: Profile, papers=None) -> pd.DataFrame:
    """Every arm → the main arm whose tuning it uses (for the README / notebooks)."""
    rows = []
    for paper in papers or experiments.PAPERS:
        arms = experiments.arms(paper, profile)
        for a in arms:
            f = family_of(a, arms)
            rows.append(
                {
                    "paper": paper,
                    "group": a.group,
                    "arm": a.name,
                    "main": experiments.is_main(a),
                    "family": f.name,
                    "fixed": ",".join(k for k in SETTING_FIELDS if k in a.overrides),
                }
            )
    return pd.DataFrame(rows)


def grid(arm: experiments.Arm, profile: Profile) -> list[dict]:
    """The settings ``arm`` (a main arm) is tuned over under ``profile``."""
    if profile.tuning is None:
        raise ValueError(f"profile {profile.name!r} has no tuning grid")
    return profile.tuning.settings(arm.honours_warmup)


def _tuning_config(arm, profile, setting) -> Config:
    return arm.config(profile, profile.tuning.seed, **setting)


def tuning_key(arm: experiments.Arm, profile: Profile) -> str:
    """Identifies a tuning problem: the arm's config at the tuning seed and the grid's first setting
    (two main arms with the same config — VSE++ in five papers — share one)."""
    return _tuning_config(arm, profile, grid(arm, profile)[0]).key()


def tuning_configs(profile: Profile, papers=None) -> list[Config]:
    """Phase 1: every run of the search (main arms × grid, seed ``tuning.seed``), deduplicated — under
    successive halving the rung runs (:func:`rung_config`), whose better part goes on to the cap
    (:func:`survivor_configs`). Empty when the profile has no tuning."""
    if profile.tuning is None:
        return []
    make = rung_config if halving(profile) else _tuning_config
    seen: dict[str, Config] = {}
    for paper in papers or experiments.PAPERS:
        for arm in main_arms(profile, paper):
            for s in grid(arm, profile):
                c = make(arm, profile, s)
                seen.setdefault(c.key(), c)
    return list(seen.values())


# --- successive halving --------------------------------------------------------------------------------
def _first_epoch(arm: experiments.Arm, setting: dict) -> int:
    """The first epoch of the arm's own objective (after the warm-up, when the warm-up changes its loss)."""
    return (int(setting.get(HN_WARMUP_FIELD, 0)) if arm.honours_warmup else 0) + 1


def rung_config(arm: experiments.Arm, profile: Profile, setting: dict) -> Config:
    """The rung run of a grid setting: its tuning config stopped ``rung_epochs`` epochs after the warm-up (never
    past the cap). Its epochs are the first epochs of the full run, bit for bit (the schedule does not depend on
    the cap), so a cached full run answers for its rung too (:func:`rung_view`)."""
    full = _tuning_config(arm, profile, setting)
    return full.replace(epochs=min(full.epochs, _first_epoch(arm, setting) - 1 + profile.tuning.rung_epochs))


def full_config_of(rung: Config, profile: Profile) -> Config:
    """The full tuning run a rung run is the beginning of."""
    return rung.replace(epochs=int(profile.model["epochs"]))


def tuning_run_done(config: Config, profile: Profile, cache) -> bool:
    """A tuning run needs no training: it is cached, or (a rung) its full run is."""
    if cache.has_training(config):
        return True
    return halving(profile) and cache.has_training(full_config_of(config, profile))


def rung_trials(
    arm: experiments.Arm, profile: Profile, cache, failed_keys=(), train_missing: bool = False, is_collapsed=None
) -> tuple[list[dict], list[Config]]:
    """(one trial per grid setting at the rung, the rung configs missing from the cache). A rung is read from
    its own run or from the beginning of its full run; ``train_missing`` trains a missing one on the spot."""
    trials, missing = [], []
    for s in grid(arm, profile):
        rc = rung_config(arm, profile, s)
        rec = None if cache is None else load_record(cache, rc)
        if rec is None and cache is not None:
            full = load_record(cache, _tuning_config(arm, profile, s))
            if full is not None:
                rec = rung_view(validation_view(full), rc.epochs)
            elif train_missing and rc.key() not in failed_keys:
                cache.get_or_train(rc, progress=False, evaluate=False)
                rec = load_record(cache, rc)
        if rec is not None:
            t = trial_from_record(rec, is_collapsed)
        elif rc.key() in failed_keys:
            t = failed_trial(s, "run failed")
        else:
            t = failed_trial(s, "missing")
            missing.append(rc)
        trials.append(t)
    return trials, missing


def survivors(trials: list[dict], keep: float) -> list[dict]:
    """The trials that go on past the rung: the first ``keep`` share (rounded up) in :func:`select` order —
    healthy before collapsed or failed, then the higher validation RSUM, the smaller lr, no warm-up."""
    return sorted(trials, key=rank)[: n_survivors(len(trials), keep)]


def survivor_configs(profile: Profile, papers=None, cache=None, failed_keys=(), is_collapsed=None) -> list[Config]:
    """Phase 1b of successive halving: the full tuning runs of every setting that goes on past its rung,
    deduplicated (raises :class:`TuningIncomplete` while a rung is missing). Empty without halving."""
    if not halving(profile):
        return []
    seen: dict[str, Config] = {}
    missing: list[Config] = []
    for paper in papers or experiments.PAPERS:
        for arm in main_arms(profile, paper):
            trials, miss = rung_trials(arm, profile, cache, failed_keys, is_collapsed=is_collapsed)
            missing += miss
            if miss:
                continue
            for t in survivors(trials, profile.tuning.keep):
                c = _tuning_config(arm, profile, setting_of(t))
                seen.setdefault(c.key(), c)
    if missing:
        raise TuningIncomplete(
            f"{len(missing)} rung run(s) are not in the cache, e.g. {missing[0].loss} lr={missing[0].lr} "
            f"(key {missing[0].key()}); train reproduce.protocol.tuning.tuning_configs(profile) first"
        )
    return list(seen.values())


def survivor_stand_ins(profile: Profile, papers=None) -> list[Config]:
    """For a plan made before any rung ran: the full runs of ``n_survivors`` settings per tuning problem (the
    last ones of the grid — the largest lr, which includes the profile's own — stand in for those that will go
    on; the cost model does not depend on lr or warm-up)."""
    if not halving(profile):
        return []
    seen: dict[str, Config] = {}
    for paper in papers or experiments.PAPERS:
        for arm in main_arms(profile, paper):
            g = grid(arm, profile)
            for s in g[-n_survivors(len(g), profile.tuning.keep) :]:
                c = _tuning_config(arm, profile, s)
                seen.setdefault(c.key(), c)
    return list(seen.values())


# --- phase 2 -----------------------------------------------------------------------------------------
def arm_trials(
    arm: experiments.Arm, profile: Profile, cache, failed_keys=(), train_missing: bool = False, is_collapsed=None
) -> tuple[list[dict], list[Config]]:
    """(one trial per grid setting of the main arm ``arm``, the tuning configs missing from the cache). Under
    successive halving a setting that stopped at its rung keeps its rung trial (``went_on`` False), the others
    their full run's (``went_on`` True, with ``rung_val_rsum``). ``train_missing``: train missing runs on the spot."""
    trials, missing = [], []
    rung, going_on = None, None
    if halving(profile):
        rung, miss = rung_trials(arm, profile, cache, failed_keys, train_missing, is_collapsed)
        missing += miss
        going_on = [id(t) for t in survivors(rung, profile.tuning.keep)] if not miss else []
    for i, s in enumerate(grid(arm, profile)):
        if rung is not None and id(rung[i]) not in going_on:
            r = rung[i]
            stop = f"stopped at the rung (epoch {_first_epoch(arm, s) - 1 + profile.tuning.rung_epochs})"
            status = stop if r["status"] == "ok" else r["status"]
            trials.append({**r, "status": status, "went_on": False, "rung_val_rsum": r["val_rsum"]})
            continue
        cfg = _tuning_config(arm, profile, s)
        if train_missing and cache is not None and not cache.has_training(cfg) and cfg.key() not in failed_keys:
            cache.get_or_train(cfg, progress=False, evaluate=False)
        rec = None if cache is None else load_record(cache, cfg)
        if rec is not None:
            t = trial_from_record(rec, is_collapsed)
        elif cfg.key() in failed_keys:
            t = failed_trial(s, "run failed")
        else:
            missing.append(cfg)
            t = failed_trial(s, "missing")
        if rung is not None:
            t.update(went_on=True, rung_val_rsum=rung[i]["val_rsum"])
        trials.append(t)
    return trials, missing


def families(
    profile: Profile, papers=None, cache=None, failed_keys=(), train_missing: bool = False, is_collapsed=None
) -> dict[str, Family]:
    """Every tuning problem of ``papers`` with its trials (from ``cache``, :func:`arm_trials`) and its choice. A
    run missing from the cache is an error (:class:`TuningIncomplete`) unless its key is in ``failed_keys`` (it
    failed: a trial that is never chosen over a healthy one) or ``train_missing`` (trained on the spot)."""
    out: dict[str, Family] = {}
    missing = []
    for paper in papers or experiments.PAPERS:
        for arm in main_arms(profile, paper):
            k = tuning_key(arm, profile)
            if k in out:
                out[k].members.append(f"{paper}/{arm.name}")
                continue
            trials, miss = arm_trials(arm, profile, cache, failed_keys, train_missing, is_collapsed)
            missing += miss
            out[k] = Family(k, arm, [f"{paper}/{arm.name}"], trials, None)
    if missing:
        raise TuningIncomplete(
            f"{len(missing)} tuning run(s) are not in the cache, e.g. "
            f"{missing[0].loss} lr={missing[0].lr} (key {missing[0].key()}); "
            "train reproduce.protocol.tuning.tuning_configs(profile) first"
        )
    for f in out.values():
        f.chosen = health_checked_choice(f, profile, cache, failed_keys, train_missing, is_collapsed)
    return out


def chosen_setting(fam: Family) -> dict:
    return setting_of(fam.chosen)


def _arm_configs_at(arm: experiments.Arm, profile: Profile, setting: dict) -> list[Config]:
    """The final configs of ``arm`` (every seed) at its family's ``setting``."""
    setting = dict(setting)
    if not arm.honours_warmup:  # a family's warm-up would change nothing in this arm's loss: the config says so
        setting[HN_WARMUP_FIELD] = 0
    return arm.configs(profile, **setting)


def arm_configs(arm: experiments.Arm, paper_arms, profile: Profile, fams: dict[str, Family]) -> list[Config]:
    """The final configs of ``arm`` (every seed) at its family's chosen setting."""
    if profile.tuning is None:
        return arm.configs(profile)
    fam = fams[tuning_key(family_of(arm, paper_arms), profile)]
    return _arm_configs_at(arm, profile, chosen_setting(fam))


def candidate_configs(arm: experiments.Arm, paper_arms, profile: Profile) -> list[Config]:
    """The final configs ``arm`` may have before its family's tuning is done: every seed at every setting of the
    family's grid (:func:`arm_configs` is one setting's of them)."""
    if profile.tuning is None:
        return arm.configs(profile)
    return [c for s in grid(family_of(arm, paper_arms), profile) for c in _arm_configs_at(arm, profile, s)]


def tuned_plan(profile: Profile, papers=None, cache=None, failed_keys=(), is_collapsed=None) -> list[Config]:
    """Phase 2: every final config (each arm × its seeds at its family's chosen setting), deduplicated.
    Without tuning in the profile: ``experiments.plan`` (old behaviour)."""
    if profile.tuning is None:
        return experiments.plan(profile, papers)
    fams = families(profile, papers, cache, failed_keys, is_collapsed=is_collapsed)
    seen: dict[str, Config] = {}
    for paper in papers or experiments.PAPERS:
        arms = experiments.arms(paper, profile)
        for arm in arms:
            for c in arm_configs(arm, arms, profile, fams):
                seen.setdefault(c.key(), c)
    return list(seen.values())


# --- tables ------------------------------------------------------------------------------------------
def trial_rows(fams: dict[str, Family], only_members=None) -> list[dict]:
    """One row per (family, grid setting) of ``fams``: the arm (its first member under ``only_members``, a paper),
    the other members, the setting, its validation and health, whether it went on and was chosen."""
    rows = []
    for f in fams.values():
        members = [m for m in f.members if only_members is None or m.split("/", 1)[0] == only_members]
        if not members:
            continue
        for t in f.trials:
            rows.append(
                {
                    "arm": members[0].split("/", 1)[1],
                    "also": "; ".join(members[1:]) or "",
                    "loss": f.arm.overrides["loss"],
                    "lr": t["lr"],
                    HN_WARMUP_FIELD: t[HN_WARMUP_FIELD],
                    "val_rsum": t["val_rsum"],
                    "best_epoch": t["best_epoch"],
                    "epochs_run": t["epochs_run"],
                    "collapsed": t["collapsed"],
                    "collapse_reason": t["collapse_reason"],
                    "hardneg_cos": t.get("hardneg_cos", float("nan")),
                    "narrow_cone": t.get("narrow_cone"),
                    "status": t["status"],
                    "rung_val_rsum": t.get("rung_val_rsum", float("nan")),
                    "went_on": t.get("went_on"),
                    "other_seeds": t.get("other_seeds", ""),
                    "chosen": t is f.chosen,
                }
            )
    return rows


def tuning_table(profile: Profile, paper: str, cache, is_collapsed=None) -> pd.DataFrame:
    """One row per (main arm of ``paper``, grid setting): lr, warm-up, validation RSUM, epochs, collapsed,
    chosen — the tuning table every notebook shows."""
    if profile.tuning is None:
        return pd.DataFrame(columns=["arm", "lr", HN_WARMUP_FIELD, "val_rsum", "collapsed", "chosen"])
    fams = families(profile, [paper], cache, is_collapsed=is_collapsed)
    return pd.DataFrame(trial_rows(fams, paper))


def covered_papers(profile: Profile, papers, cache) -> list[str] | None:
    """``papers`` (None: all) widened by every other paper whose tuning runs are all done in ``cache``
    (:func:`tuning_run_done`); None when that is every paper."""
    if papers is None or profile.tuning is None:
        return papers
    out = [
        p
        for p in experiments.PAPERS
        if p in papers or all(tuning_run_done(c, profile, cache) for c in tuning_configs(profile, [p]))
    ]
    return None if out == list(experiments.PAPERS) else out
