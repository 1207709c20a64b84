"""The claims registry: every claim declared once, arms that exist, no contrast primary for two claims."""

import math

import pandas as pd
import pytest

from reproduce.spec import claims as registry
from reproduce.spec import experiments
from reproduce.protocol.study import profile_for
from helpers import ROOT


IDS = (
    [f"B{i}" for i in range(1, 10)]
    + [f"L{i}" for i in range(1, 7)]
    + [f"S{i}" for i in range(1, 6)]
    + [f"N{i}" for i in range(1, 8)]
    + [f"U{i}" for i in range(1, 7)]
    + ["X1", "X2", "X3"]
)


def test_every_claim_id_declared_once_in_order():
    assert registry.claim_ids() == IDS
    with pytest.raises(KeyError, match="unknown claim id 'Z9'"):
        registry.claim("Z9")


def test_paper_effects_one_row_per_claim_and_spot_checks():
    pe = registry.paper_effects()
    assert sorted(pe.index) == sorted(IDS)
    # recomputed by hand from the papers' tables
    assert pe.loc["B1", "paper_effect"] == pytest.approx(400.1 - 390.4)
    assert pe.loc["B4", "paper_effect"] == pytest.approx((0.291 + 0.287) / 2 - (0.238 + 0.237) / 2, abs=1e-4)
    assert pe.loc["N1", "paper_effect"] == pytest.approx(477.7 - 472.7)
    assert pe.loc["U1", "paper_effect"] == pytest.approx(476.4 - 472.1)
    assert pe.loc["L1", "paper_effect"] == pytest.approx(0.216 - 0.166)
    assert math.isnan(pe.loc["U4", "paper_effect"])  # figure only
    assert pe["source"].notna().all() and pe["computation"].notna().all()


def _configs(paper, arm, profile):
    names = arm if isinstance(arm, tuple) else (arm,)
    arms = {a.name: a for a in experiments.arms(paper, profile)}
    missing = [n for n in names if n not in arms]
    assert not missing, f"arm(s) {missing} not in experiments.arms({paper!r}); have {sorted(arms)}"
    return tuple(sorted(c.key() for n in names for c in arms[n].configs(profile)))


@pytest.mark.parametrize("data", ["synthetic", "flickr8k"])
def test_primary_arms_exist_and_no_contrast_is_primary_twice(data):
    prof = profile_for("default", data)
    seen = {}
    for c in registry.CLAIMS.values():
        p = c.primary
        assert p.kind in ("direction", "equivalence", "identity") and p.measure in ("arms", "notebook")
        if p.measure != "arms":
            assert p.legacy_for(data).get("metric"), f"{c.id}: a notebook measure needs a legacy matcher"
            continue
        arm_b = p.arm_b
        if p.versus == "each":  # arms a thinned sweep does not run are left out; the sweep's ends always run
            run = {a.name for a in experiments.arms(p.paper, prof)}
            arm_b = tuple(b for b in p.arm_b if b in run)
            assert {p.arm_b[0], p.arm_b[-1]} <= set(arm_b), f"{c.id}: the ends of {p.arm_b} must run"
        key = (
            _configs(p.paper, p.arm_a, prof),
            _configs(p.paper, arm_b, prof),
            p.versus,
            str(p.metric_for(data)),
            str(p.co_metric_for(data)),
        )
        assert key not in seen, f"{c.id} and {seen.get(key)} declare the same primary contrast"
        seen[key] = c.id


def test_null_pairs_name_existing_arms():
    prof = profile_for("default", "synthetic")
    for paper, a, b in registry.NULL_PAIRS:
        _configs(paper, a, prof), _configs(paper, b, prof)


@pytest.mark.parametrize("path", sorted(p for p in (ROOT / "results").rglob("claims_*.csv") if "smoke" not in p.parts))
def test_committed_notebook_files_match_each_primary_at_most_once(path):
    df = pd.read_csv(path)
    for (cid, data), part in df.groupby(["id", "dataset"]):
        c = registry.CLAIMS[cid]
        hits = [r for r in part.to_dict("records") if c.primary.matches(data, row=r)]
        assert len(hits) <= 1, f"{path}: {cid} on {data} matches the primary {len(hits)} times"
