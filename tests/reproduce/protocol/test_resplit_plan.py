"""reproduce.protocol.resplit_plan: which Flickr8k rows the test set binds, their cheapest re-split plan, its price."""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import pytest

from reproduce.present import ledger_power
from reproduce.protocol import resplit_plan as rp
from reproduce.protocol.cost import run_estimate_s
from reproduce.protocol.ledger import POWER, family_alpha, power_at
from reproduce.protocol.power_plan import primary_arms
from reproduce.spec import claims as registry
from reproduce.spec.power_seeds import SEED_CAP
from reproduce.spec.profiles import GPU_COSTS, profile_for

# N1 on Flickr8k in the committed ledger: no seed count within the cap reaches 80 %
N1 = dict(paper_effect=5.0, seed_sd=6.1, query_var=1.24**2, n_seeds=9, family_size=7, seeds_for_power=math.nan)


def _row(cid="N1", dataset="flickr8k", role="primary", **kw) -> dict:
    return {"id": cid, "role": role, "dataset": dataset, **N1, "power": 0.11, **kw}


def test_a_row_without_test_set_variance_gets_no_plan():
    ledger = pd.DataFrame([_row(query_var=0.0)])
    assert rp.binding_rows(ledger).empty and rp.plan_rows(ledger) == []


def test_only_primary_flickr8k_rows_with_a_paper_effect_bind():
    assert rp.binds(_row())
    assert not rp.binds(_row(dataset="synthetic")) and not rp.binds(_row(role="secondary"))
    assert not rp.binds(_row(paper_effect=math.nan)) and not rp.binds(_row(seed_sd=math.nan))
    # reachable with seeds: binds only when the test term is at least half the variance at the planned seeds
    small = _row(seed_sd=6.0, query_var=0.1, seeds_for_power=10)  # 0.1 against 3.6 / 10
    large = _row(seed_sd=2.0, query_var=1.0, seeds_for_power=4)  # 1.0 against 4 / 4
    assert rp.query_share(6.0, 0.1, 10) < rp.BINDS_SHARE and not rp.binds(small)
    assert rp.query_share(2.0, 1.0, 4) == pytest.approx(0.5) and rp.binds(large)


def test_a_binding_row_gets_the_cheapest_plan_that_reaches_the_power():
    (plan,) = rp.plan_rows(pd.DataFrame([_row()]))
    alpha = family_alpha(7)
    k, n = plan.k, plan.n
    assert plan.reachable and rp.MIN_SPLITS <= k <= rp.K_CAP and rp.MIN_SEEDS <= n <= SEED_CAP
    # the power recomputed by power_at: K(n − 1) + 1 seeds of the same σ²/(K·n), test-set variance v/K
    n_eq = k * (n - 1) + 1
    again = power_at(5.0, 6.1 * math.sqrt(n_eq / (k * n)), 1.24**2 / k, n_eq, alpha)
    assert plan.power == pytest.approx(again) and again >= POWER
    # no plan with fewer runs (or as many on fewer splits) reaches it
    for kk in range(rp.MIN_SPLITS, rp.K_CAP + 1):
        for nn in range(rp.MIN_SEEDS, SEED_CAP + 1):
            if (kk * nn, kk) < (k * n, k):
                assert rp.plan_power(5.0, 6.1, 1.24**2, kk, nn, alpha) < POWER, (kk, nn)
    assert rp.plan_power(5.0, 6.1, 1.24**2, k, n - 1, alpha) < POWER
    assert plan.test_sd == pytest.approx(1.24) and plan.seeds_now == 9


def test_one_split_is_the_ledgers_own_power():
    alpha = family_alpha(7)
    assert rp.plan_power(5.0, 6.1, 1.5, 1, 9, alpha) == pytest.approx(power_at(5.0, 6.1, 1.5, 9, alpha))


def test_a_row_out_of_reach_of_the_caps_says_so():
    (plan,) = rp.plan_rows(pd.DataFrame([_row(paper_effect=1.0, seed_sd=1.0, query_var=4.0)]))
    assert not plan.reachable and plan.runs == 0 and math.isnan(plan.cpu_s) and math.isnan(plan.power)
    assert f"{rp.K_CAP} splits × {SEED_CAP} seeds" in plan.why


def test_the_price_is_the_runs_times_their_cost_plus_the_splits_preparation():
    profile = profile_for("default", "flickr8k")
    arms = primary_arms(registry.CLAIMS["N1"], profile)
    assert len(arms) == 2
    k, n = 3, 4
    runs, cpu_s, gpu_s = rp.price(arms[:1], k, n, profile)
    one = run_estimate_s(arms[0].config(profile, 0), "flickr8k")
    assert runs == k * n and cpu_s == pytest.approx(runs * one + k * rp.SPLIT_PREPARE_S) and gpu_s > 0
    runs2, cpu2, _ = rp.price(arms, k, n, profile)
    both = sum(run_estimate_s(a.config(profile, 0), "flickr8k") for a in arms)
    assert runs2 == 2 * k * n and cpu2 == pytest.approx(k * n * both + k * rp.SPLIT_PREPARE_S)
    twin = dataclasses.replace(arms[0], name="the same config under another name")
    assert rp.price([arms[0], twin], k, n, profile)[0] == k * n  # arms sharing a config count once
    (plan,) = rp.plan_rows(pd.DataFrame([_row()]))
    assert plan.arms == 2 and plan.runs == plan.k * plan.n * 2 and plan.trained == min(plan.n, 9) * 2
    assert plan.cpu_s == pytest.approx(rp.price(arms, plan.k, plan.n, profile)[1])


def test_the_gpu_price_divides_by_the_workers_gpu_costs_was_measured_with():
    assert f"{rp.GPU_WORKERS} worker processes" in GPU_COSTS["device"]


def test_missing_columns_are_named():
    bad = pd.DataFrame([_row()]).drop(columns=["query_var", "family_size"])
    with pytest.raises(ValueError, match=r"\['query_var', 'family_size'\]"):
        rp.plan_rows(bad)


def test_power_md_gets_the_section():
    ledger = pd.DataFrame([_row(), _row(cid="B1", query_var=0.0)])
    text = ledger_power.resplit_markdown(ledger)
    assert text.startswith("## More test images where they bind")
    (line,) = [x for x in text.splitlines() if x.startswith("| N1 ")]
    (plan,) = rp.plan_rows(ledger)
    assert f"| {plan.k} × {plan.n} | {plan.runs} (" in line and line.endswith(f"| {100 * plan.power:.0f}% |")
    assert "not trained yet" in text and not any(x.startswith("| B1 ") for x in text.splitlines())
    assert "No Flickr8k primary row" in ledger_power.resplit_markdown(ledger.iloc[1:])
