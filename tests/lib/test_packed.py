"""coherent_itr/packed.py: the packed engine against the solo engine and torch's own optimiser and clip, each
member's numbers independent of its neighbours and its slot, per-member selection, early stopping and warm-up, bad
packs refused, and no run key touched."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from coherent_itr import code_identity, runs
from coherent_itr import packed as packed_mod
from coherent_itr import train as train_mod
from coherent_itr.config import Config
from coherent_itr.data import make_toy_splits
from coherent_itr.models import VSEModel
from coherent_itr.packed import PackedAdam, PackedVSE, check_packable, clip_per_member, train_packed
from coherent_itr.train import train
from tiny_run import tiny

BASE = Config(**tiny(epochs=3, batch_size=16))


@pytest.fixture(scope="module")
def toy():
    return make_toy_splits(48, 12, 12, seed=0)


def _models(n=3, hidden=12, embed=16):
    torch.manual_seed(0)
    return [VSEModel(20, 30, embed, 8, hidden) for _ in range(n)]


def _captions(e=3, n=5, width=7, vocab=30, seed=0):
    g = torch.Generator().manual_seed(seed)
    tok = torch.randint(1, vocab, (e, n, width), generator=g)
    lens = torch.randint(1, width + 1, (e, n), generator=g)
    tok[torch.arange(width).view(1, 1, -1) >= lens.unsqueeze(-1)] = 0
    return tok, lens


# --- the model -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("hidden, embed", [(12, 16), (16, 16)])
def test_each_member_computes_its_own_vse_model(hidden, embed):
    """Member e of the pack is VSEModel e (nn.GRU's fused kernel against the recurrence as matrix products: equal
    up to float32 rounding), with and without the text projection."""
    models = _models(hidden=hidden, embed=embed)
    pack = PackedVSE(models)
    feats = torch.randn(3, 5, 20, generator=torch.Generator().manual_seed(1))
    tok, lens = _captions()
    img, txt = pack.image(feats), pack.text(tok, lens)
    for e, m in enumerate(models):
        v, t = m(feats[e], tok[e], lens[e])
        torch.testing.assert_close(img[e], v, rtol=0, atol=1e-6)
        torch.testing.assert_close(txt[e], t, rtol=0, atol=1e-6)


def test_caption_lengths_outside_the_padded_width_are_refused():
    tok, lens = _captions()
    with pytest.raises(ValueError, match=r"lie in \[1, 7\]"):
        PackedVSE(_models()).text(tok, lens.clamp(max=7) * 0)


# --- the optimiser and the clip ------------------------------------------------------------------------------
def test_packed_adam_is_torch_adam_per_member_bit_for_bit():
    """Each member with its own learning rate, one of them frozen for a step: its parameters are those of its own
    torch.optim.Adam that skipped that step."""
    g = torch.Generator().manual_seed(0)
    stacked = torch.nn.Parameter(torch.randn(3, 4, 5, generator=g))
    solo = [torch.nn.Parameter(stacked[e].detach().clone()) for e in range(3)]
    lrs = [1e-3, 2e-3, 5e-4]
    opts = [torch.optim.Adam([solo[e]], lr=lrs[e]) for e in range(3)]
    packed = PackedAdam([stacked])
    for it in range(6):
        grad = torch.randn(3, 4, 5, generator=g)
        active = torch.tensor([True, it != 2, True])
        stacked.grad = grad.clone()
        packed.step(lrs, active)
        for e in range(3):
            if active[e]:
                solo[e].grad = grad[e].clone()
                opts[e].step()
    for e in range(3):
        assert torch.equal(stacked[e], solo[e]), e


def test_clip_per_member_is_clip_grad_norm_per_member():
    g = torch.Generator().manual_seed(0)
    a = torch.nn.Parameter(torch.zeros(3, 4, 5))
    b = torch.nn.Parameter(torch.zeros(3, 6))
    a.grad, b.grad = torch.randn(3, 4, 5, generator=g) * 3, torch.randn(3, 6, generator=g)
    want = []
    for e, limit in enumerate((1.0, 100.0, 0.0)):
        ga, gb = a.grad[e].clone().requires_grad_(), b.grad[e].clone().requires_grad_()
        pa, pb = torch.nn.Parameter(torch.zeros(4, 5)), torch.nn.Parameter(torch.zeros(6))
        pa.grad, pb.grad = ga.detach().clone(), gb.detach().clone()
        if limit > 0:
            torch.nn.utils.clip_grad_norm_([pa, pb], limit)
        want.append((pa.grad, pb.grad))
    clip_per_member([a, b], [1.0, 100.0, 0.0])
    for e, (wa, wb) in enumerate(want):
        torch.testing.assert_close(a.grad[e], wa, rtol=1e-6, atol=0)
        torch.testing.assert_close(b.grad[e], wb, rtol=1e-6, atol=0)
    assert torch.linalg.vector_norm(torch.cat([a.grad[0].flatten(), b.grad[0]])) == pytest.approx(1.0, rel=1e-5)


# --- whole runs ----------------------------------------------------------------------------------------------
def test_a_member_is_bit_equal_in_any_pack_and_slot(toy):
    a, b, c = BASE.replace(seed=1), BASE.replace(seed=2, lr=1e-3), BASE.replace(seed=3, grad_clip=0.5)
    first = train_packed([a, b], splits=toy, width=4, progress=False)[0]
    second = train_packed([c, b, a], splits=toy, width=4, progress=False)[2]
    for key in ("test_img", "test_cap"):
        assert np.array_equal(first.arrays[key], second.arrays[key])
    strip = [{k: v for k, v in h.items() if k != "epoch_time_s"} for h in first.history]
    assert strip == [{k: v for k, v in h.items() if k != "epoch_time_s"} for h in second.history]
    assert (first.record["engine"]["slot"], second.record["engine"]["slot"]) == (0, 2)
    assert first.record["engine"]["width"] == second.record["engine"]["width"] == 4


def test_a_packed_run_is_its_solo_run_up_to_float_rounding(toy):
    """Same weights at the start, same batches, same losses, same Adam: the solo and the packed run of a config
    differ only by the GRU's arithmetic (fused kernel against matrix products). Measured on this toy run: training
    losses within 1e-6, test embeddings within 1.2e-7; the bounds leave a factor of ten."""
    cfg = BASE.replace(seed=1)
    solo = train(cfg, splits=toy, progress=False)
    pack = train_packed([cfg, BASE.replace(seed=5)], splits=toy, width=2, progress=False)[0]
    assert [h["val_rsum"] for h in pack.history] == [h["val_rsum"] for h in solo.history]
    np.testing.assert_allclose(
        [h["train_loss"] for h in pack.history], [h["train_loss"] for h in solo.history], rtol=1e-5
    )
    for key in ("test_img", "test_cap"):
        np.testing.assert_allclose(pack.arrays[key], solo.arrays[key], rtol=0, atol=1e-6)
    assert pack.record["best_epoch"] == solo.record["best_epoch"]
    assert set(pack.record) == set(solo.record) | {"engine"}  # a CPU solo record names no engine


def _script(monkeypatch, module, attr, per_epoch):
    """Validation reports ``per_epoch[epoch][member]`` as RSUM (the rest of the record is real)."""
    real = getattr(module, attr)
    epochs = iter(per_epoch)

    def fake(*args, **kwargs):
        rows = real(*args, **kwargs)
        values = next(epochs)
        if isinstance(rows, dict):
            rows["val_rsum"] = values
            return rows
        for row, v in zip(rows, values):
            row["val_rsum"] = v
        return rows

    monkeypatch.setattr(module, attr, fake)


def test_selection_early_stopping_and_warm_up_per_member_as_the_solo_loop(toy, monkeypatch):
    """Three members with their own patience, warm-up and epochs, under scripted validation: each ends at the epoch
    and keeps the checkpoint its solo run (the solo loop's selector, same script) does."""
    triplet = dict(loss="triplet", loss_params={"max_violation": True})
    cfgs = [
        BASE.replace(seed=1, epochs=5, early_stop_patience=2, **triplet),  # stops after epoch 4, keeps epoch 2
        BASE.replace(seed=2, epochs=5, warmup_epochs=1, early_stop_patience=2, **triplet),  # keeps 3, runs 5
        BASE.replace(seed=3, epochs=2, **triplet),  # its own, shorter, schedule
    ]
    script = [(1.0, 9.0, 5.0), (2.0, 1.0, 6.0), (2.0, 3.0, 0.0), (2.0, 2.0, 0.0), (2.0, 2.0, 0.0)]
    _script(monkeypatch, packed_mod, "_validate", script)
    got = train_packed(cfgs, splits=toy, width=3, progress=False)
    for k, cfg in enumerate(cfgs):
        monkeypatch.undo()
        _script(monkeypatch, train_mod, "_validate", [row[k] for row in script])
        solo = train(cfg, splits=toy, progress=False)
        assert got[k].record["epochs_run"] == solo.record["epochs_run"], k
        assert got[k].record["best_epoch"] == solo.record["best_epoch"], k
        assert got[k].record["warmup"] == solo.record["warmup"], k
        assert [h["warmup"] for h in got[k].history] == [h["warmup"] for h in solo.history], k
    assert [r.record["epochs_run"] for r in got] == [4, 5, 2]
    assert [r.record["best_epoch"] for r in got] == [2, 3, 2]


def test_a_stopped_member_is_frozen_at_its_best_checkpoint(toy, monkeypatch):
    """Member 0 stops after epoch 3 and keeps epoch 1 while its neighbour trains on: its test embeddings are those
    of the same config trained alone for one epoch, bit for bit."""
    cfg = BASE.replace(seed=1, epochs=4, early_stop_patience=2)
    _script(monkeypatch, packed_mod, "_validate", [(5.0, 1.0), (4.0, 2.0), (3.0, 3.0), (0.0, 4.0)])
    got = train_packed([cfg, BASE.replace(seed=2, epochs=4)], splits=toy, width=2, progress=False)[0]
    monkeypatch.undo()
    alone = train_packed([cfg.replace(epochs=1), BASE.replace(seed=2, epochs=1)], splits=toy, width=2, progress=False)
    assert got.record["best_epoch"] == 1 and got.record["epochs_run"] == 3
    for key in ("test_img", "test_cap"):
        assert np.array_equal(got.arrays[key], alone[0].arrays[key])


def test_a_relevance_loss_reads_its_own_members_batch(toy):
    """A loss that needs relevance: each member's look-up follows its own batch (the pack equals each config
    packed with other neighbours)."""
    cfg = BASE.replace(loss="ladder", loss_params={"thresholds": (0.5,)}, relevance="true", epochs=2)
    one = train_packed([cfg.replace(seed=1), cfg.replace(seed=2)], splits=toy, width=2, progress=False)
    two = train_packed([cfg.replace(seed=2), cfg.replace(seed=7)], splits=toy, width=2, progress=False)
    assert np.array_equal(one[1].arrays["test_cap"], two[0].arrays["test_cap"])
    assert not np.array_equal(one[0].arrays["test_cap"], one[1].arrays["test_cap"])


# --- bad packs -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "other, match",
    [
        (dict(data_scale="default"), "data_scale differs"),
        (dict(loss="vsepp"), "loss differs"),
        (dict(text_hidden=32), "text_hidden differs"),
    ],
)
def test_configs_that_cannot_share_a_pack_are_refused_by_name(other, match):
    with pytest.raises(ValueError, match=match):
        check_packable([BASE, BASE.replace(seed=1), BASE.replace(**other)])


@pytest.mark.parametrize(
    "field, match",
    [
        (dict(bf16=True), "bf16=True"),
        (dict(train_fraction=0.5), "train_fraction=0.5"),
    ],
)
def test_what_the_pack_does_not_support_is_refused(field, match):
    with pytest.raises(ValueError, match=f"cannot train these runs: {match}"):
        check_packable([BASE.replace(**field)])
    assert packed_mod.solo_reason(BASE.replace(**field)).startswith(match)
    assert packed_mod.solo_reason(BASE) is None
    with pytest.raises(ValueError, match="at least one config"):
        check_packable([])


def test_a_members_diagnostics_are_its_solo_runs(toy):
    """With sampled gradient diagnostics every 2nd step: the same history keys and iteration steps as the solo
    run, the values equal up to float rounding (the losses' diagnostics and the tangent-gradient statistics)."""
    cfg = BASE.replace(seed=1, epochs=2, grad_diag_every=2)
    solo = train(cfg, splits=toy, progress=False)
    pack = train_packed([cfg, BASE.replace(seed=4, epochs=2, grad_diag_every=2)], splits=toy, progress=False)[0]
    assert [set(h) for h in pack.history] == [set(h) for h in solo.history]
    assert [it["step"] for it in pack.record["iterations"]] == [it["step"] for it in solo.record["iterations"]]
    assert [set(it) for it in pack.record["iterations"]] == [set(it) for it in solo.record["iterations"]]
    for got, want in zip(pack.record["iterations"] + pack.history, solo.record["iterations"] + solo.history):
        for key, value in want.items():
            if isinstance(value, float) and key != "epoch_time_s":
                assert got[key] == pytest.approx(value, rel=1e-4, abs=1e-5), key


# --- run keys ------------------------------------------------------------------------------------------------
def test_the_module_is_in_no_run_keys_file_set():
    """packed.py is in no frozen file set and no solo run's training or evaluation key hashes it."""
    assert "packed.py" not in runs.evaluation_files()
    assert "packed.py" not in code_identity.load().get("files", {})
    for cfg in (BASE, Config(data="synthetic", data_scale="smoke", loss="adaptive_ladder", relevance="sbert")):
        assert "packed.py" not in runs.training_files(cfg)


# --- the engine in the run cache -----------------------------------------------------------------------------
def test_pack_groups_keep_packable_runs_together_up_to_the_width():
    a = [BASE.replace(seed=s) for s in range(5)]
    b = [BASE.replace(loss="vsepp", seed=s) for s in range(2)]
    mixed = [a[0], b[0], a[1], a[2], b[1], a[3], a[4]]
    assert packed_mod.pack_groups(mixed, 3) == [[0, 2, 3], [1, 4], [5, 6]]
    subset = [BASE.replace(seed=s, train_fraction=0.5) for s in range(2)]  # each trains solo
    assert packed_mod.pack_groups([a[0], *subset, a[1]], 3) == [[0, 3], [1], [2]]
    assert packed_mod.pack_groups([], 3) == []


def test_engine_from_the_environment(monkeypatch):
    monkeypatch.delenv(runs.ENGINE_ENV, raising=False)
    assert runs.engine_from_env() is None
    monkeypatch.setenv(runs.ENGINE_ENV, "solo")
    assert runs.engine_from_env() is None
    monkeypatch.setenv(runs.ENGINE_ENV, "pack:4")
    assert runs.engine_from_env() == packed_mod.engine_identity(4)
    monkeypatch.setenv(runs.ENGINE_ENV, "auto:4")
    assert runs.engine_from_env() == (packed_mod.engine_identity(4) if torch.cuda.is_available() else None)
    for bad in ("pack", "pack:0", "packed:4", "pack:x"):
        monkeypatch.setenv(runs.ENGINE_ENV, bad)
        with pytest.raises(ValueError, match=f"{runs.ENGINE_ENV}={bad!r}"):
            runs.engine_from_env()


def test_a_packed_run_has_a_key_of_its_own_and_its_record_gives_it_back(tmp_path, toy):
    """Under the packed engine a config's key is neither its solo key nor that of another width; the stored record
    names the engine, and the key recomputed from it (what the run archive's export does) is the entry's."""
    solo = runs.RunCache(tmp_path, engine=None)
    pack4 = runs.RunCache(tmp_path, engine=packed_mod.engine_identity(4))
    pack8 = runs.RunCache(tmp_path, engine=packed_mod.engine_identity(8))
    cfg = BASE.replace(seed=1, epochs=1)
    assert len({solo.train_key(cfg), pack4.train_key(cfg), pack8.train_key(cfg)}) == 3
    assert solo.train_key(cfg) == runs.run_key(cfg, solo.threads)  # the solo key is what it always was
    res = pack4.get_or_train(cfg, progress=False, splits=toy)
    assert "test" in res.record and res.record["engine"]["width"] == 4
    assert pack4.has(cfg) and not solo.has_training(cfg) and not pack8.has_training(cfg)
    record = pack4.load_training(cfg).record
    assert runs.run_key(cfg, record["threads"], None, runs.record_engine(record)) == pack4.train_key(cfg)
    assert runs.record_engine({"engine": {"step": "eager"}}) is None and runs.record_engine({}) is None


def test_get_or_train_pack_trains_only_the_missing_members_as_packs(tmp_path, toy, monkeypatch):
    cache = runs.RunCache(tmp_path, engine=packed_mod.engine_identity(2))
    cfgs = [BASE.replace(seed=s, epochs=1) for s in range(4)] + [BASE.replace(loss="vsepp", seed=0, epochs=1)]
    cache.get_or_train(cfgs[0], progress=False, splits=toy)
    packs = []
    real = packed_mod.train_packed

    def counting(configs, **kw):
        packs.append([(c.loss, c.seed) for c in configs])
        return real(configs, **kw)

    monkeypatch.setattr(packed_mod, "train_packed", counting)
    got = cache.get_or_train_pack(cfgs, progress=False, splits=toy, evaluate=False)
    assert packs == [[("triplet", 1), ("triplet", 2)], [("triplet", 3)], [("vsepp", 0)]]
    assert [r.record["config"]["seed"] for r in got] == [0, 1, 2, 3, 0]
    assert all(cache.has_training(c) for c in cfgs)
    with pytest.raises(ValueError, match="packed engine"):
        runs.RunCache(tmp_path, engine=None).get_or_train_pack(cfgs)


def test_a_config_the_pack_cannot_train_trains_solo_under_its_solo_key(tmp_path, toy):
    cache = runs.RunCache(tmp_path, engine=packed_mod.engine_identity(2))
    subset = BASE.replace(seed=1, epochs=1, train_fraction=0.5)
    assert cache.engine_of(subset) is None and cache.train_key(subset) == runs.RunCache(tmp_path).train_key(subset)
    got = cache.get_or_train_pack([subset, BASE.replace(seed=2, epochs=1)], progress=False, splits=toy)
    assert "engine" not in got[0].record and got[1].record["engine"]["step"] == "packed"
