"""The one registry type (``coherent_itr.registry.Registry``) and the three registries built on it:
losses, metrics and the study's arms; and ``losses.build``'s errors for a parameter of the wrong type
or a missing one."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from coherent_itr import losses, metrics
from coherent_itr.losses import registry as loss_registry
from coherent_itr.losses.triplet import TripletLoss
from coherent_itr.metrics import registry as metric_registry
from coherent_itr.registry import Registry
from reproduce.spec import experiments
from reproduce.spec.profiles import get_profile


def test_registry_register_unregister_registered_available():
    r = Registry("thing")
    a, b = object(), object()
    assert r.register("a", a) is a and r.available() == ["a"] and "a" in r and len(r) == 1
    assert r.register("a", a) is a  # the same object again is a harmless repeat
    with pytest.raises(ValueError, match="thing 'a' is already registered"):
        r.register("a", b)
    with r.registered("b", b) as got:
        assert got is b and r.available() == ["a", "b"] and r.get("b") is b
    assert r.available() == ["a"]
    with pytest.raises(ValueError, match="unknown thing 'b'; registered: a"):
        r.get("b")
    with pytest.raises(ValueError, match="thing 'b' is not registered"):
        r.unregister("b")
    assert r.unregister("b", missing_ok=True) is None
    assert r.unregister("a") is a and r.available() == [] and list(r) == []


def test_registered_unregisters_when_the_block_raises():
    r = Registry("thing")
    with pytest.raises(RuntimeError), r.registered("x", 1):
        raise RuntimeError
    assert "x" not in r


def test_registry_same_rule_decides_repeats():
    r = Registry("metric", same=lambda old, new: old[0] is new[0])
    f = len
    r.register("m", (f, 1))
    assert r.register("m", (f, 2)) == (f, 2)  # same function, new declarations: replaced
    with pytest.raises(ValueError, match="already registered"):
        r.register("m", (print, 1))


class _ScaledTriplet(TripletLoss):
    def __init__(self, scale: float = 2.0, margin: float = 0.2) -> None:
        super().__init__(margin=margin)
        self.scale = scale


def test_losses_register_unregister_and_registered():
    assert losses.registered is loss_registry.registered
    with losses.registered("toy_scaled", _ScaledTriplet):
        assert "toy_scaled" in losses.available() and losses.build("toy_scaled").scale == 2.0
        with pytest.raises(ValueError, match="already registered"):
            losses.register("toy_scaled")(TripletLoss)
    assert "toy_scaled" not in losses.available()
    losses.register("toy_scaled")(_ScaledTriplet)
    assert losses.unregister("toy_scaled") is _ScaledTriplet
    with pytest.raises(ValueError, match="not registered"):
        losses.unregister("toy_scaled")
    assert losses.available() == sorted(losses.available())


@pytest.mark.parametrize(
    "name,params,match",
    [
        ("triplet", {"margin": "a"}, r"parameter margin expects float, got 'a' \(str\)"),
        ("triplet", {"margin": None}, r"parameter margin expects float, got None"),
        ("triplet", {"max_violation": "yes"}, r"parameter max_violation expects bool, got 'yes'"),
        ("triplet", {"reduction": 3}, r"parameter reduction expects str, got 3 \(int\)"),
        ("unified", {"gamma": [50.0]}, r"parameter gamma expects float"),
        ("bcls", {"kendall_params": [1]}, r"parameter kendall_params expects dict or None, got \[1\]"),
        ("ladder", {"thresholds": "0.4"}, r"parameter thresholds expects a sequence of float"),
        ("ladder", {"thresholds": (0.4, "x")}, r"parameter thresholds expects a sequence of float"),
        ("ladder", {"thresholds": [[0.4], [0.3, 0.2]]}, r"parameter thresholds expects a sequence of float"),
        ("adaptive_ladder", {"l_min": 2.5}, r"parameter l_min expects int, got 2.5 \(float\)"),
    ],
)
def test_build_names_the_parameter_and_its_type(name, params, match):
    with pytest.raises(TypeError, match=match) as err:
        losses.build(name, **params)
    assert isinstance(err.value, ValueError)  # Config validation and combined losses catch ValueError


def test_build_accepts_the_types_configs_hold():
    assert losses.build("triplet", margin=1).margin == 1.0  # an int is a number
    assert losses.build("triplet", margin=np.float32(0.1)).margin == pytest.approx(0.1)
    assert isinstance(losses.build("ladder", thresholds=[0.4, 0.3]), torch.nn.Module)
    assert isinstance(losses.build("ladder", thresholds=np.array([0.4, 0.3])), torch.nn.Module)
    assert losses.build("bcls", kendall_params=None) is not None
    assert losses.build("triplet", max_violation=np.bool_(False)).max_violation is False


def test_build_names_missing_required_parameters():
    with pytest.raises(ValueError, match=r"loss 'weighted_sum': missing required parameter\(s\) \['terms'\]"):
        losses.build("weighted_sum")


def test_a_bad_type_in_a_term_of_a_combined_loss_names_the_term():
    with pytest.raises(ValueError, match=r"term 0 \('triplet'\).*parameter margin expects float"):
        losses.build("weighted_sum", terms=[{"name": "triplet", "params": {"margin": "a"}}])


def test_build_still_builds_every_loss_with_its_defaults():
    for name in losses.available():
        if name != "weighted_sum":
            assert isinstance(losses.build(name), torch.nn.Module)


def _mean_diag(problem):
    return {"mean_diag": 0.0}


def _other_diag(problem):
    return {"other_diag": 0.0}


def test_metrics_register_like_the_registry_type():
    assert metric_registry.REGISTRY.available() == metrics.available()
    with metrics.registered("toy_md", "matrix", _mean_diag) as m:
        assert m.fn is _mean_diag and metrics.available()[-1] == "toy_md"
        with pytest.raises(ValueError, match="metric name 'toy_md' registered twice"):  # a name holds one metric
            with metrics.registered("toy_md", "matrix", _other_diag):
                pass
        assert metrics.available()[-1] == "toy_md" and metric_registry.REGISTRY.get("toy_md").fn is _mean_diag
    assert "toy_md" not in metrics.available()
    metrics.unregister("toy_md")  # unknown: a no-op, as before


def test_arms_register_like_the_registry_type():
    profile = get_profile("smoke")
    arm = experiments.make_arm("toy_paper", "main", "toy arm", "triplet")
    other = experiments.make_arm("toy_paper", "main", "toy arm", "sam")
    with experiments.extra_arms(arm, main=True):
        assert experiments.ARMS.available() == [("toy_paper", "toy arm")]
        with pytest.raises(ValueError, match="an arm named 'toy arm' is already registered for paper 'toy_paper'"):
            with experiments.extra_arms(other, main=True):
                pass
        assert experiments.registered_arms("toy_paper") == [arm]
        assert experiments.registered_arms("toy_paper") == [arm]
        assert [a.name for a in experiments.arms("toy_paper", profile)] == ["toy arm"]
    assert experiments.ARMS.available() == [] and "toy_paper" not in experiments.PAPERS
    with pytest.raises(ValueError, match="was not registered"):
        experiments.unregister_arm(arm)


class _NeedsRelevance(TripletLoss):
    requires_relevance = True


def test_traits_are_the_built_losses_and_follow_a_loss_registered_again():
    """``traits`` answers what the built loss says (for every loss at its defaults and at the parameters a plan
    uses); registered again under the same name, the new class is built; a bad parameter raises every time."""
    for name in losses.available():
        if name == "weighted_sum":
            continue
        crit = losses.build(name)
        assert loss_registry.traits(name) == (crit.requires_relevance, crit.honours_warmup), name
    for params in ({"max_violation": False}, {"max_violation": True}, {"margin": np.float32(0.1)}):
        crit = losses.build("triplet", **params)
        assert loss_registry.traits("triplet", **params) == (crit.requires_relevance, crit.honours_warmup)
    with losses.registered("toy_traits", _ScaledTriplet):
        assert loss_registry.traits("toy_traits").requires_relevance is False
    with losses.registered("toy_traits", _NeedsRelevance):
        assert loss_registry.traits("toy_traits").requires_relevance is True
    for _ in range(2):
        with pytest.raises(TypeError, match="parameter margin expects float"):
            loss_registry.traits("triplet", margin="a")
    # an array's repr may elide: such parameters are built every time, never looked up by their repr
    long = np.linspace(0.9, 0.1, 2000)
    assert "..." in repr(long) and not loss_registry._plain({"thresholds": long})
    assert loss_registry._plain({"thresholds": [0.4, 0.3], "terms": [{"name": "triplet", "params": {}}]})


def test_parameters_are_a_new_dict_each_time():
    got = losses.parameters("triplet")
    got["margin"] = "changed"
    assert losses.parameters("triplet")["margin"] == 0.2
