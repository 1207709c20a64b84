"""Config validation, determinism, the run cache, and a tiny end-to-end training run."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from coherent_itr import runs
from coherent_itr.runs import cache as cache_mod
from coherent_itr.runs import store
from coherent_itr.evaluation import evaluate_run
from coherent_itr.config import Config
from coherent_itr.data import make_toy_splits
from coherent_itr.metrics import retrieval_metrics
from coherent_itr.train import train
from tiny_run import tiny

# three epochs of a wider toy model: enough for the loss to fall (grad diagnostics at the Config's default)
TINY = tiny(drop=("grad_diag_every",), embed_dim=32, word_dim=16, text_hidden=32, epochs=3, lr_decay_epoch=2)


# ----------------------------------------------------------------------------- config
@pytest.mark.parametrize(
    "field, value, msg",
    [
        ("loss", "nope", "Config.loss='nope' is invalid"),
        ("epochs", 0, "Config.epochs=0"),
        ("batch_size", 1, "Config.batch_size=1"),
        ("lr", -1.0, "Config.lr=-1.0"),
        ("train_fraction", 1.5, "train_fraction"),
        ("device", "tpu", "device"),
        ("sampling", "pairs", "sampling"),
        ("loss_params", {"margin": -1}, "margin=-1"),
        ("loss_params", {"gamma": 3}, "unknown parameter"),
    ],
)
def test_config_validation_names_field_value_and_allowed(field, value, msg):
    with pytest.raises(ValueError, match=msg):
        Config(**{field: value})


def test_config_roundtrip_and_unknown_field():
    c = Config(**TINY)
    assert Config.from_dict(c.to_dict()) == c
    with pytest.raises(ValueError, match="unknown Config field"):
        Config.from_dict({**c.to_dict(), "epoch": 3})
    assert c.key() == Config(**TINY).key() and c.key() != c.replace(seed=1).key()


# ----------------------------------------------------------------------------- training
@pytest.fixture(scope="module")
def toy():
    return make_toy_splits(120, 30, 30, seed=0)


def test_same_config_and_seed_give_identical_numbers(toy):
    a = train(Config(**TINY), splits=toy, progress=False)
    b = train(Config(**TINY), splits=toy, progress=False)
    strip = lambda h: [{k: v for k, v in e.items() if "time" not in k} for e in h]
    assert strip(a.history) == strip(b.history)
    assert evaluate_run(a, splits=toy) == evaluate_run(b, splits=toy)
    np.testing.assert_array_equal(a.arrays["test_img"], b.arrays["test_img"])
    np.testing.assert_array_equal(a.arrays["test_cap"], b.arrays["test_cap"])
    c = train(Config(**{**TINY, "seed": 1}), splits=toy, progress=False)
    assert strip(c.history) != strip(a.history)


def test_nan_fill_of_new_memory_is_off_and_changes_no_number(toy, monkeypatch):
    """Training switches off deterministic mode's NaN fill of new tensors (a speed cost); with the fill on,
    every number is the same — nothing reads memory it did not write."""
    import torch

    import coherent_itr.train as train_mod
    from coherent_itr.determinism import use_deterministic_kernels

    strip = lambda h: [{k: v for k, v in e.items() if "time" not in k} for e in h]
    off = train(Config(**TINY), splits=toy, progress=False)
    assert torch.utils.deterministic.fill_uninitialized_memory is False

    def with_fill():
        use_deterministic_kernels()
        torch.utils.deterministic.fill_uninitialized_memory = True

    monkeypatch.setattr(train_mod, "use_deterministic_kernels", with_fill)
    try:
        on = train(Config(**TINY), splits=toy, progress=False)
        assert torch.utils.deterministic.fill_uninitialized_memory is True
    finally:
        torch.utils.deterministic.fill_uninitialized_memory = False
    assert strip(on.history) == strip(off.history)
    np.testing.assert_array_equal(on.arrays["test_img"], off.arrays["test_img"])
    np.testing.assert_array_equal(on.arrays["test_cap"], off.arrays["test_cap"])


def test_tiny_training_loss_decreases_and_beats_random(toy):
    res = train(Config(**{**TINY, "epochs": 8, "lr_decay_epoch": 6}), splits=toy, progress=False)
    test = evaluate_run(res, splits=toy)
    losses = [h["train_loss"] for h in res.history]
    assert losses[-1] < losses[0]
    rng = np.random.default_rng(0)
    img = toy.test.image_of_caption
    random_rsum = np.mean([retrieval_metrics(rng.normal(size=(30, 150)), img)["rsum"] for _ in range(20)])
    # test metrics are not part of train()'s record (evaluation.evaluate_run computes them from the
    # stored float32 embeddings); the RSUM is recomputed here from those embeddings directly
    test_rsum = retrieval_metrics(res.arrays["test_img"] @ res.arrays["test_cap"].T, img)["rsum"]
    assert res.arrays["test_img"].dtype == np.float32
    assert test_rsum > random_rsum + 100, (test_rsum, random_rsum)
    assert test["rsum"] == pytest.approx(test_rsum)  # evaluate_run scores the same stored embeddings
    for key in ("val_rsum", "val_pos_sim", "val_hardneg_sim", "train_loss"):
        assert all(np.isfinite(h[key]) for h in res.history), key
    assert 1 <= res.record["best_epoch"] <= 8
    assert res.record["best_epoch"] == 1 + int(np.argmax([h["val_rsum"] for h in res.history]))


def test_training_with_a_relevance_provider(toy):
    # the relevance path: provider "true" feeds B×B rel batches to the loss
    res = train(Config(**{**TINY, "epochs": 1, "relevance": "true"}), splits=toy, progress=False)
    assert np.isfinite(evaluate_run(res, splits=toy)["rsum"])


# ----------------------------------------------------------------------------- run cache
def test_cache_hit_and_invalidation(tmp_path, toy):
    cache = runs.RunCache(tmp_path)
    cfg = Config(**{**TINY, "epochs": 1})
    first = cache.get_or_train(cfg, progress=False, splits=toy)
    assert cache.has(cfg)
    again = cache.get_or_train(cfg, progress=False, splits=toy)
    assert again.record == first.record  # served from disk
    assert not cache.has(cfg.replace(seed=5))  # seed is part of the key
    assert not cache.has(cfg.replace(loss_params={"margin": 0.1}))
    assert not runs.RunCache(tmp_path, threads=2).has(cfg)  # thread count is part of the key
    # (code changes: tests/lib/test_cache.py::test_metric_edit_reevaluates_and_a_new_loss_trains_only_its_runs)


def test_source_hash_changes_with_source(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "a.py").write_text("x = 1\n")
    h1 = runs.source_hash(pkg)
    (pkg / "a.py").write_text("x = 2\n")
    assert runs.source_hash(pkg) != h1


def test_interrupted_store_leaves_no_result_and_is_redone(tmp_path, toy, monkeypatch):
    cache = runs.RunCache(tmp_path)
    cfg = Config(**{**TINY, "epochs": 1})
    calls = {"n": 0}
    real = store.atomic_write_json

    def interrupted(path, obj):
        calls["n"] += 1
        raise KeyboardInterrupt("simulated Ctrl-C while writing")

    for module in (cache_mod, store):  # the entry's record.json and its checksum.json
        monkeypatch.setattr(module, "atomic_write_json", interrupted)
    with pytest.raises(KeyboardInterrupt):
        cache.get_or_train(cfg, progress=False, splits=toy)
    assert not cache.has(cfg)
    assert list((cache.root / "train").iterdir()) == []  # no temp folder left behind
    for module in (cache_mod, store):
        monkeypatch.setattr(module, "atomic_write_json", real)
    res = cache.get_or_train(cfg, progress=False, splits=toy)
    assert cache.has(cfg) and np.isfinite(res.test["rsum"])
    stored = json.loads((cache.path(cfg) / "record.json").read_text())
    assert stored["training_code_hash"] == runs.training_code_hash(cfg) and stored["run_key"] == cache.path(cfg).name


# ----------------------------------------------------------------------------- gradient diagnostics
def test_tangent_gradients_match_unified_paper_eqs_11_12():
    """For an image→text Triplet-HN loss, the autograd-measured tangent norms equal Eqs. 11–12."""
    from coherent_itr.gradients import tangent_gradient_stats

    torch.manual_seed(0)
    b, d, m = 6, 5, 0.5
    v = torch.nn.functional.normalize(torch.randn(b, d, dtype=torch.float64), dim=1).requires_grad_(True)
    t = torch.nn.functional.normalize(torch.randn(b, d, dtype=torch.float64), dim=1)
    sim = v @ t.T
    sim.retain_grad()
    v.retain_grad()
    eye = torch.eye(b, dtype=torch.bool)
    hard = sim.detach().masked_fill(eye, -1e9).argmax(1)
    loss = (m + sim[torch.arange(b), hard] - sim.diagonal()).clamp(min=0).sum()
    loss.backward()
    stats = tangent_gradient_stats(v.detach(), t, sim.detach(), sim.grad, v.grad)
    eq11, eq12 = [], []
    for i in range(b):
        vi, ti, th = v[i].detach(), t[i], t[hard[i]]
        active = float(m + vi @ th - vi @ ti > 0)
        diff = th - ti
        cos = float(vi @ diff / diff.norm())
        eq11.append(active * float(diff.norm()) * (1 - cos**2) ** 0.5)  # ‖∂L/∂v‖ · sin θ(v, t̂ − t)
        eq12.append(active * 1.0 * (1 - float(vi @ th) ** 2) ** 0.5)  # ‖v‖ · sin θ(v, t̂)
    assert stats["grad_anchor"] == pytest.approx(np.mean(eq11), rel=1e-9)
    assert stats["grad_hardneg"] == pytest.approx(np.mean(eq12), rel=1e-9)
    assert stats["grad_negatives"] == pytest.approx(np.mean(eq12), rel=1e-9)  # only ĵ receives gradient


def test_subset_images_renumbers_judgement_tables():
    import pandas as pd

    toy = make_toy_splits(6, 4, 4, seed=0).test
    toy.extras["expert"] = pd.DataFrame(
        {"image_idx": [0, 1, 3, 3], "caption_idx": [0, 17, 2, 15], "score": [4, 3, 2, 1]}
    )
    sub = toy.subset_images(np.array([3, 1]))
    # image 3 -> 0 (its captions 15..19 -> 0..4); image 1 -> 1 (captions 5..9 -> 5..9);
    # pairs whose image or caption is gone (image 0, caption 0 or 2) are dropped
    t = sub.extras["expert"]
    assert t.to_dict("list") == {"image_idx": [1, 0], "caption_idx": [2, 0], "score": [3, 1]}
    assert sub.captions[0] == toy.captions[15]


def test_config_key_ignores_loss_params_equal_to_defaults():
    a = Config(loss="triplet")
    assert a.key() == Config(loss="triplet", loss_params={"margin": 0.2, "max_violation": True}).key()
    assert a.key() != Config(loss="triplet", loss_params={"margin": 0.3}).key()
    lad = dict(loss="ladder", relevance="true")
    assert Config(**lad).key() == Config(**lad, loss_params={"thresholds": [0.40]}).key()  # tuple default
    assert Config(**lad).key() != Config(**lad, loss_params={"thresholds": [0.35]}).key()


def test_config_keys_are_pinned():
    """Keys name committed runs: these are the keys the same configs had when the committed runs were trained
    (a Config field's dict, tuple or numpy value included), so a faster ``key()`` may never move one."""
    assert Config().key() == "b92d0c667c945b45"
    assert Config(loss="ladder", relevance="true", loss_params={"thresholds": (0.35, 0.2)}).key() == "ab880855605c2456"
    sam = Config(data="flickr8k", relevance="sbert", loss="sam", lr=6e-4, warmup_epochs=1, seed=3)
    assert sam.key() == "8cfac562ea27f179"
    assert Config(loss="triplet", loss_params={"margin": np.float32(0.1)}).key() == "304b53601c8307e1"


def test_the_cpu_tag_names_a_cpu_other_than_the_reference_in_a_safe_file_name(monkeypatch):
    """Data computed on the reference CPU keep their cache names (an empty tag); another CPU's get its vendor and
    instruction set, with any character a folder name should not hold replaced."""
    from coherent_itr import determinism

    assert runs.cpu_identity is determinism.cpu_identity and runs.REFERENCE_CPU == determinism.REFERENCE_CPU
    monkeypatch.setattr(determinism, "cpu_identity", lambda: determinism.REFERENCE_CPU)
    assert determinism.cpu_tag() == ""
    monkeypatch.setattr(determinism, "cpu_identity", lambda: "GenuineIntel/AVX512")
    assert determinism.cpu_tag() == "@GenuineIntel-AVX512"
    monkeypatch.setattr(determinism, "cpu_identity", lambda: "Some Vendor/../x:y")
    assert determinism.cpu_tag() == "@Some-Vendor-..-x-y" and "/" not in determinism.cpu_tag()
