"""Successive halving's arithmetic (Jamieson & Talwalkar 2016; the ``default`` profile's tuning): whether a profile
halves, how many settings go on past the rung, and what a run stopped at the rung would record, read from the
beginning of a longer run (:func:`rung_view`). The protocol that uses them is :mod:`reproduce.protocol.tuning`.
"""

from __future__ import annotations

import math

from coherent_itr.health import HEALTH_KEYS

from reproduce.spec.profiles import Profile


def halving(profile: Profile) -> bool:
    """Whether ``profile`` tunes by successive halving (``TuningGrid.rung_epochs`` > 0)."""
    return profile.tuning is not None and profile.tuning.rung_epochs > 0


def n_survivors(n: int, keep: float) -> int:
    """How many of ``n`` settings go on past the rung: the ``keep`` share, rounded up (at least one)."""
    return max(1, math.ceil(n * keep - 1e-9))


def rung_view(record: dict, epochs: int) -> dict:
    """The validation view (:data:`reproduce.protocol.trials.VALIDATION_KEYS`) of ``record``'s first ``epochs`` epochs:
    what the same run stopped at ``epochs`` records — the selection of ``coherent_itr.train._Selector`` (first
    maximum of validation RSUM from the first epoch after the warm-up; a run that never leaves the warm-up keeps its
    last epoch) on the prefix of the history. Early stopping ends both runs at the same epoch."""
    hist = [h for h in record["history"] if int(h["epoch"]) <= epochs]
    if not hist:
        raise ValueError(f"rung_view: the record has no epoch ≤ {epochs}")
    warm = record.get("warmup", {})
    first = (len(warm.get("epochs", [])) if warm.get("applies") else 0) + 1
    cands = [h for h in hist if int(h["epoch"]) >= first]
    best = hist[-1]
    if cands:
        best = cands[0]
        for h in cands[1:]:
            if h["val_rsum"] > best["val_rsum"]:
                best = h
    health = {k: best[k] for k in HEALTH_KEYS if k in best}
    health.update(epoch=int(best["epoch"]), val_rsum=best["val_rsum"], val_rsum_chance=best.get("val_rsum_chance"))
    return {
        "config": {**record["config"], "epochs": int(epochs)},
        "history": hist,
        "best_epoch": int(best["epoch"]),
        "epochs_run": len(hist),
        "health": health,
    }
