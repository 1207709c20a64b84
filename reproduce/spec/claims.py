"""Every claim of ``notes/claims.md`` declared ONCE, in ``reproduce/data/claims.toml``: its primary
contrast, its paper's effect, its notebook.

This module loads that file (:mod:`reproduce.spec.claim_data`) and checks it against the study: every arm
a contrast names is an arm of :mod:`reproduce.spec.experiments` (any profile, sweeps unthinned) and every
metric key of an arm contrast is a key of the evaluation record (:mod:`reproduce.spec.labels`); a typo
fails at import with the claim id and field. No contrast (arms + metric) is the primary row of two
claims (tested).

``measure="arms"`` — the effect is a paired difference of two arms' test metrics (of the mean of a
list of arms, or of each arm of a list: ``versus``), computed from the runs by
:func:`reproduce.protocol.claim_rows.primary_row`; ``measure="notebook"`` — a quantity that is not an arm
contrast (complexity slope, label agreement, approximation error, identity, curves): its per-seed
(per-fold, per-batch) effects come from the notebook's claim file, recognised by
:meth:`Contrast.matches`.
"""

from __future__ import annotations

import dataclasses
import functools

import pandas as pd

from reproduce.spec import experiments, labels
from reproduce.spec.claim_data import CLAIMS_TOML, DATASETS, EFFECT_COLUMNS, Claim, ClaimDataError, Contrast, load
from reproduce.spec.claim_data import primary_arm_names as _primary_arm_names
from reproduce.spec.profiles import get_profile

__all__ = [
    "CLAIMS",
    "CLAIMS_TOML",
    "DATASETS",
    "NULL_PAIRS",
    "YARD",
    "Claim",
    "ClaimDataError",
    "Contrast",
    "claim",
    "claim_ids",
    "contrast_key",
    "paper_effects",
    "primary_arm_names",
]


@functools.cache
def _known_arms() -> dict[str, tuple]:
    """``{paper key: every arm}`` of :mod:`reproduce.spec.experiments` under the default profile with its sweeps
    unthinned and no group skipped; built once (the names and groups a claim may use both come from it)."""
    full = dataclasses.replace(get_profile("default"), thin_sweeps=False, skip_groups=frozenset())
    return {paper: tuple(experiments.arms(paper, full)) for paper in experiments.PAPERS}


def known_arm_names() -> dict[str, set]:
    """``{paper key: every arm name}`` of :func:`_known_arms` (the names a claim may use)."""
    return {paper: {a.name for a in arms} for paper, arms in _known_arms().items()}


def known_arm_groups() -> dict[str, set]:
    """``{paper key: every arm group}`` of :func:`_known_arms`."""
    return {paper: {a.group for a in arms} for paper, arms in _known_arms().items()}


def _check_arm_groups(claims: dict[str, Claim], groups: dict[str, set], path=CLAIMS_TOML) -> None:
    """Every ``arm_groups`` entry of a notebook measure is a group of its ``arms_of`` paper."""
    for c in claims.values():
        for g in c.primary.arm_groups:
            if g not in groups.get(c.primary.paper, set()):
                raise ClaimDataError(
                    f"{path}: claim {c.id}, primary: arm_groups: got {g!r}, expected a group of "
                    f"{c.primary.paper!r} in reproduce.spec.experiments: {sorted(groups.get(c.primary.paper, ()))}"
                )


_FILE = load(CLAIMS_TOML, arm_names=known_arm_names(), is_metric=labels.is_metric_key)
_check_arm_groups(_FILE.claims, known_arm_groups())
CLAIMS: dict[str, Claim] = _FILE.claims
NULL_PAIRS: list[tuple[str, str, str]] = _FILE.null_pairs
# the relevance a loss was NOT trained on: synthetic world → true relevance r*, Flickr8k → expert judgements
YARD: dict[str, str] = _FILE.yardstick


def claim(cid: str) -> Claim:
    if cid not in CLAIMS:
        raise KeyError(f"unknown claim id {cid!r}; the registry has {', '.join(CLAIMS)}")
    return CLAIMS[cid]


def claim_ids() -> list[str]:
    return list(CLAIMS)


def paper_effects() -> pd.DataFrame:
    """The papers' reported effects, one row per claim id (``[claim.paper_effect]`` of the claims file):
    ``paper_effect`` (NaN where the paper gives only a figure), ``unit``, ``source``, ``backbone``,
    ``dataset``, ``computation``."""
    df = pd.DataFrame([{"id": c.id, **c.paper_effect} for c in CLAIMS.values()], columns=["id", *EFFECT_COLUMNS])
    return df.set_index("id")


def contrast_key(c: Claim, dataset: str) -> tuple:
    """What makes a primary contrast unique: arms (order matters), how a list of arms enters, the metric
    (and co-metric), or the notebook row."""
    p = c.primary
    if p.measure == "arms":
        co = () if p.co_metric is None else (str(p.co_metric_for(dataset)), p.co_scale)
        return ("arms", p.paper, p.arm_a, p.arm_b, p.versus, str(p.metric_for(dataset)), *co)
    return ("notebook", c.id, tuple(sorted(p.legacy_for(dataset).items())))


def primary_arm_names(paper: str) -> frozenset:
    """Names of the arms that enter a primary contrast of ``paper`` (a profile gives them every seed)."""
    return _primary_arm_names(paper)
