"""A tuning trial and the choice among a grid's trials (:mod:`reproduce.protocol.tuning`), reading the validation
fields of a run record only (:data:`VALIDATION_KEYS`: test metrics never reach the tuner; tests poison them).

* **A trial** (:func:`trial_from_record`, :func:`failed_trial`): a grid setting's lr and warm-up, its validation RSUM at
  the selected checkpoint, epochs used and the collapse verdict (``coherent_itr.health.is_collapsed``).
* **Selection** (:func:`select`, in :func:`rank` order): healthy before collapsed or failed, then the higher
  validation RSUM, the smaller lr, no warm-up; under successive halving a setting stopped at its rung last.
* **The health check of the other seeds** (:func:`health_checked_choice`): a setting is kept only if the main arm's
  runs with the other seeds are healthy too (the module docstring of :mod:`reproduce.protocol.tuning`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from coherent_itr.health import HEALTH_KEYS, cone, is_collapsed

from reproduce.spec import experiments
from reproduce.spec.profiles import HN_WARMUP_FIELD, Profile

# the only fields of a run record the tuner reads (no "test", no timing)
VALIDATION_KEYS = ("config", "history", "best_epoch", "epochs_run", "health", "warmup")


@dataclass
class Family:
    """One tuning problem: its key (:func:`reproduce.protocol.tuning.tuning_key`), the main arms that share it, one
    trial per grid setting and the chosen one."""

    key: str
    arm: experiments.Arm  # the first main arm with this tuning problem
    members: list[str]  # "paper/arm" of every main arm sharing it
    trials: list[dict]
    chosen: dict | None


def validation_view(record) -> dict:
    return {k: record[k] for k in VALIDATION_KEYS if k in record}


def default_is_collapsed(view: dict) -> tuple[bool, str]:
    return is_collapsed(view)


def trial_from_record(record, is_collapsed=None) -> dict:
    """One tuning trial from a run record, reading only :data:`VALIDATION_KEYS`: lr, warm-up, the
    validation RSUM at the selected checkpoint, epochs used, and the collapse verdict."""
    view = validation_view(record)
    cfg, hist, best = view["config"], view["history"], view["best_epoch"]
    at = [h for h in hist if h.get("epoch") == best]
    if len(at) != 1:
        raise ValueError(
            f"run record (loss {cfg.get('loss')}, lr {cfg.get('lr')}): best_epoch={best} is not "
            f"one epoch of its history (epochs {[h.get('epoch') for h in hist]})"
        )
    rsum = float(at[0]["val_rsum"])
    collapsed, reason = (is_collapsed or default_is_collapsed)(view)
    if not math.isfinite(rsum):
        collapsed, reason = True, "non-finite validation RSUM"
    health = view.get("health") or {}
    known = all(k in health for k in HEALTH_KEYS)  # the cone: a diagnostic shown beside the choice, never deciding
    return {
        "lr": float(cfg["lr"]),
        HN_WARMUP_FIELD: int(cfg.get(HN_WARMUP_FIELD, 0) or 0),
        "val_rsum": rsum,
        "best_epoch": int(best),
        "epochs_run": int(view.get("epochs_run", len(hist))),
        "collapsed": collapsed,
        "collapse_reason": reason,
        "hardneg_cos": float(health["val_hardneg_sim"]) if known else float("nan"),
        "narrow_cone": cone(health)[0] if known else None,
        "status": "ok",
    }


def failed_trial(setting: dict, status: str) -> dict:
    return {
        "lr": float(setting["lr"]),
        HN_WARMUP_FIELD: int(setting.get(HN_WARMUP_FIELD, 0)),
        "val_rsum": float("nan"),
        "best_epoch": None,
        "epochs_run": None,
        "collapsed": True,
        "collapse_reason": status,
        "hardneg_cos": float("nan"),
        "narrow_cone": None,
        "status": status,
    }


def rank(t: dict) -> tuple:
    r = t["val_rsum"]
    stopped = t.get("went_on") is False  # successive halving: stopped at the rung, never trained to the cap
    return (stopped, bool(t["collapsed"]), -(r if math.isfinite(r) else -math.inf), t["lr"], t[HN_WARMUP_FIELD])


def select(trials: list[dict]) -> dict:
    """The chosen trial: healthy before collapsed/failed (``collapsed`` None = unknown counts as healthy),
    then the highest validation RSUM, then the smaller lr, then fewer warm-up epochs. Order-independent."""
    if not trials:
        raise ValueError("select: no tuning trials")
    return min(trials, key=rank)


def setting_of(t: dict) -> dict:
    """The grid setting (lr, warm-up) of a trial."""
    return {"lr": t["lr"], HN_WARMUP_FIELD: t[HN_WARMUP_FIELD]}


def other_seeds_health(
    arm, profile: Profile, setting: dict, cache, failed_keys, train_missing: bool, is_collapsed
) -> tuple[int, int, bool]:
    """(collapsed, checked, complete) over the main arm's runs at ``setting`` with every seed but the
    tuning seed: a failed run counts as collapsed; a run not in the cache is trained on the spot
    (``train_missing``) or leaves the check incomplete."""
    bad = checked = 0
    complete = True
    for seed in arm.pilot_seeds(profile):
        if seed == profile.tuning.seed:
            continue
        cfg = arm.config(profile, seed, **setting)
        if not cache.has_training(cfg):
            if cfg.key() in failed_keys:
                bad, checked = bad + 1, checked + 1
                continue
            if not train_missing:
                complete = False
                continue
            cache.get_or_train(cfg, progress=False, evaluate=False)
        collapsed, _ = (is_collapsed or default_is_collapsed)(validation_view(load_record(cache, cfg)))
        bad, checked = bad + int(bool(collapsed)), checked + 1
    return bad, checked, complete


def health_checked_choice(
    fam: Family, profile: Profile, cache, failed_keys=(), train_missing: bool = False, is_collapsed=None
) -> dict:
    """The family's setting under the health check of the other seeds (module docstring): the first
    healthy seed-0 trial, in :func:`select` order, whose other seeds are healthy; a trial whose other seeds
    are not all trained yet is the (pending) choice — the driver trains them and asks again. Each checked
    trial gets ``other_seeds`` ("k/n collapsed"). Without a cache or a healthy trial: :func:`select`.

    One collapsed seed decides a setting, so ``train_missing`` (a notebook without the driver) trains the missing
    seeds of a setting only while it is undecided, and of every healthy setting when none passes (their counts then
    choose): the runs the driver trains, and never one more."""
    ranked = sorted(fam.trials, key=rank)
    healthy = [t for t in ranked if not t["collapsed"] and t["status"] == "ok"]
    if cache is None or not healthy:
        return ranked[0]

    def check(t: dict, train: bool) -> int | None:
        """The collapsed other seeds of ``t`` (a failing trial keeps the count: whole counts may choose); None
        while none has collapsed but not all are trained."""
        bad, n, complete = other_seeds_health(fam.arm, profile, setting_of(t), cache, failed_keys, train, is_collapsed)
        t["other_seeds"] = f"{bad}/{n} collapsed" + ("" if complete else " (not all trained)")
        if bad:
            t["collapsed_other_seeds"] = bad
        return bad if complete or bad else None

    for t in healthy:
        bad = check(t, False)
        if bad is None and train_missing:
            bad = check(t, True)
        if not bad:  # 0: it passes; None: the pending choice, whose seeds the driver trains before it asks again
            return t
    if train_missing:  # none passes: whole counts choose
        for t in healthy:
            check(t, True)
    return min(healthy, key=lambda t: (t["collapsed_other_seeds"], rank(t)))


def load_record(cache, cfg):
    """The training record (validation and health only: the tuner never sees test metrics)."""
    res = cache.load_training(cfg)
    return None if res is None else res.record
