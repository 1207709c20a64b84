"""The training loop's steps: warm-up switch, early stopping, sampled gradient diagnostics, determinism, bf16."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from coherent_itr import losses
from coherent_itr import train as train_mod
from coherent_itr.config import Config
from coherent_itr.data import make_toy_splits
from coherent_itr.train import train
from tiny_run import tiny

# two epochs with a learning-rate decay between them (grad diagnostics at the Config's default)
TINY = tiny(drop=("grad_diag_every",), epochs=2, batch_size=16, lr_decay=0.5)


@pytest.fixture(scope="module")
def toy():
    return make_toy_splits(48, 12, 12, seed=0)


def _sims(b=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.nn.functional.normalize(torch.randn(b, 6, generator=g), dim=1)
    y = torch.nn.functional.normalize(torch.randn(b, 6, generator=g), dim=1)
    rel = (torch.rand(b, b, generator=g) + torch.eye(b)).clamp(max=1)
    return x @ y.T, (rel + rel.T) / 2


# ----------------------------------------------------------------------------- warm-up in the loss layer
@pytest.mark.parametrize(
    "name, params, all_negatives",
    [
        ("triplet", {}, ("triplet", {"max_violation": False})),
        ("vsepp", {}, ("triplet", {"max_violation": False})),
        ("ladder", {"thresholds": (0.5,)}, ("ladder", {"thresholds": (0.5,), "hard_contrastive": False})),
        ("adaptive_ladder", {}, ("adaptive_ladder", {"hard_contrastive": False})),
    ],
)
def test_warmup_value_is_the_all_negatives_objective(name, params, all_negatives):
    sim, rel = _sims()
    crit = losses.build(name, **params)
    assert crit.honours_warmup
    hard = float(crit(sim, rel))
    crit.set_warmup(True)
    ref = losses.build(all_negatives[0], **all_negatives[1])
    assert float(crit(sim, rel)) == pytest.approx(float(ref(sim, rel)), rel=1e-6)
    assert float(crit(sim, rel)) != pytest.approx(hard)
    crit.set_warmup(False)
    assert float(crit(sim, rel)) == pytest.approx(hard, rel=1e-6)


def test_warmup_reaches_sub_losses_and_spares_losses_without_hardest_negatives():
    sim, rel = _sims()
    # listwise: mean-reduced Triplet-HN + S-NDCG; warm-up swaps only the triplet term
    lw = losses.build("listwise")
    hard = float(lw(sim, rel))
    lw.set_warmup(True)
    tri_all = losses.build("triplet", max_violation=False, reduction="mean")
    sndcg = losses.build("sndcg")
    assert float(lw(sim, rel)) == pytest.approx(float(tri_all(sim)) + float(sndcg(sim, rel)), rel=1e-6)
    assert float(lw(sim, rel)) != pytest.approx(hard)
    # SAM's triplet term (a TripletLoss inside SAM) follows the flag
    sam = losses.build("sam")
    sam.set_warmup(True)
    assert sam.triplet.warmup and sam.honours_warmup
    # no hardest negative: the flag changes nothing and honours_warmup says so
    for name in ("unified", "triplet_sn", "vlc"):
        crit = losses.build(name)
        before = float(crit(sim))
        crit.set_warmup(True)
        assert float(crit(sim)) == before and not crit.honours_warmup
    assert not losses.build("triplet", max_violation=False).honours_warmup


class _Spy(losses.triplet.TripletLoss):
    """Records the warm-up flag of every forward call."""

    calls: list = []

    def forward(self, sim, rel=None):
        _Spy.calls.append(self.warmup)
        return super().forward(sim, rel)


def test_run_switches_objective_at_the_stated_epoch(toy, monkeypatch):
    _Spy.calls = []
    monkeypatch.setattr(train_mod.losses, "build", lambda name, **p: _Spy(**p))
    res = train(Config(**{**TINY, "epochs": 3, "warmup_epochs": 1}), splits=toy, progress=False)
    n1 = res.history[0]["n_steps"]
    assert _Spy.calls == [True] * n1 + [False] * (len(_Spy.calls) - n1) and len(_Spy.calls) > n1
    assert [h["warmup"] for h in res.history] == [True, False, False]
    assert res.record["warmup"] == {"epochs": [1], "applies": True}


def test_config_rejects_bad_new_fields():
    for field, value in (
        ("warmup_epochs", -1),
        ("early_stop_patience", 1.5),
        ("grad_diag_every", True),
        ("bf16", "yes"),
    ):
        with pytest.raises(ValueError, match=f"Config.{field}="):
            Config(**{field: value})


# ----------------------------------------------------------------------------- early stopping
def _scripted_validation(monkeypatch, values):
    """Make validation report ``values`` as its RSUM, epoch by epoch (the rest of the record is real)."""
    scripted = iter(values)
    real = train_mod._validate

    def fake(run):
        val = real(run)
        val["val_rsum"] = next(scripted)
        return val

    monkeypatch.setattr(train_mod, "_validate", fake)


def test_early_stopping_after_patience_epochs_without_improvement(toy, monkeypatch):
    _scripted_validation(monkeypatch, [10.0, 20.0, 15.0, 19.0, 50.0, 60.0])
    cfg = Config(**{**TINY, "epochs": 6, "early_stop_patience": 2})
    res = train(cfg, splits=toy, progress=False)
    assert res.record["epochs_run"] == 4 and len(res.history) == 4  # epochs 3, 4 did not beat epoch 2
    assert res.record["best_epoch"] == 2 and res.record["health"]["epoch"] == 2
    # the lr schedule is the VSE++ one, unchanged by early stopping
    assert [h["lr"] for h in res.history] == pytest.approx([cfg.lr * 0.5**e for e in range(4)])


def test_selection_and_patience_start_after_the_warm_up(toy, monkeypatch):
    # warm-up epoch 1 scores best, the switch to max-violation dips (epoch 2): the run must neither keep
    # the warm-up checkpoint nor stop at the dip — epochs 2.. are the candidates, patience counts from 2
    _scripted_validation(monkeypatch, [90.0, 30.0, 40.0, 35.0, 38.0, 99.0])
    cfg = Config(**{**TINY, "epochs": 6, "early_stop_patience": 1, "warmup_epochs": 1})
    res = train(cfg, splits=toy, progress=False)
    assert [h["warmup"] for h in res.history][:2] == [True, False]
    assert res.record["best_epoch"] == 3 and res.record["epochs_run"] == 4
    assert res.record["health"]["epoch"] == 3 and res.record["health"]["val_rsum"] == 40.0


def test_selection_ignores_warm_up_only_where_the_loss_has_one(toy, monkeypatch):
    # a loss without hardest negatives has no warm-up: epoch 1 is a candidate as before
    _scripted_validation(monkeypatch, [90.0, 30.0, 40.0])
    cfg = Config(**{**TINY, "loss": "triplet_sn", "epochs": 3, "early_stop_patience": 1, "warmup_epochs": 1})
    res = train(cfg, splits=toy, progress=False)
    assert res.record["best_epoch"] == 1 and res.record["epochs_run"] == 2


def test_a_run_that_never_leaves_the_warm_up_keeps_its_last_epoch(toy, monkeypatch):
    _scripted_validation(monkeypatch, [90.0, 30.0])
    cfg = Config(**{**TINY, "epochs": 2, "early_stop_patience": 1, "warmup_epochs": 2})
    res = train(cfg, splits=toy, progress=False)
    assert res.record["best_epoch"] == 2 and res.record["epochs_run"] == 2


# ----------------------------------------------------------------------------- sampled diagnostics
def test_gradient_diagnostics_every_k_steps_only(toy, monkeypatch):
    calls = {"n": 0}
    real_retain = torch.Tensor.retain_grad

    def counting(self):
        calls["n"] += 1
        return real_retain(self)

    monkeypatch.setattr(torch.Tensor, "retain_grad", counting)
    res = train(Config(**{**TINY, "grad_diag_every": 2}), splits=toy, progress=False)
    steps = sum(h["n_steps"] for h in res.history)
    it = res.record["iterations"]
    assert [r["step"] for r in it] == list(range(0, steps, 2))
    assert calls["n"] == 2 * len(it)  # retain_grad on diagnostic steps only
    keys = ("grad_anchor", "grad_hardneg", "grad_negatives", "pos_sim", "hardneg_sim")
    for e, h in enumerate(res.history, start=1):
        rows = [r for r in it if r["epoch"] == e]
        assert h["n_grad_samples"] == len(rows) > 0
        for k in keys:  # epoch means of the samples
            assert h[k] == pytest.approx(np.mean([r[k] for r in rows]))

    calls["n"] = 0
    off = train(Config(**TINY), splits=toy, progress=False)
    assert off.record["iterations"] == [] and calls["n"] == 0
    assert not any(k in h for h in off.history for k in keys)
    # sampling diagnostics does not change training
    np.testing.assert_array_equal(off.arrays["test_img"], res.arrays["test_img"])


# ----------------------------------------------------------------------------- determinism, record, bf16
def test_same_seed_identical_embeddings_and_contract_record(toy):
    cfg = Config(**{**TINY, "warmup_epochs": 1, "grad_diag_every": 3})
    a, b = (train(cfg, splits=toy, progress=False) for _ in range(2))
    for k in ("test_img", "test_cap"):
        assert a.arrays[k].dtype == np.float32
        np.testing.assert_array_equal(a.arrays[k], b.arrays[k])
    assert a.record["iterations"] == b.record["iterations"]
    for key in ("config", "history", "best_epoch", "epochs_run", "health", "timing", "data", "machine"):
        assert key in a.record
    assert "test" not in a.record
    with pytest.raises(KeyError, match="evaluate_run"):
        a.test
    assert set(a.record["health"]) >= {
        "val_pos_sim",
        "val_hardneg_sim",
        "val_gap",
        "val_rsum_over_chance",
        "collapsed",
        "reason",
    }


def test_a_runs_relevance_is_built_within_its_data_sets_every_caption(toy, monkeypatch):
    """The relevance provider of a run gets the data set's every caption (train, dev, test) as ``within``: its
    Sentence-BERT rows are then those the driver's preparation embeds, whatever the cache held
    (``tests/lib/data/test_data_sbert.py``); a run on a training subset gets the same set."""
    from coherent_itr import data as data_mod

    asked = []
    real = data_mod.relevance_provider
    monkeypatch.setattr(
        data_mod,
        "relevance_provider",
        lambda name, split, **kw: asked.append((split, kw["within"])) or real("true", split),
    )
    every = [c for s in (toy.train, toy.dev, toy.test) for c in s.captions]
    for fraction in (1.0, 0.5):
        cfg = Config(**{**TINY, "epochs": 1}, relevance="sbert", loss="ladder", train_fraction=fraction)
        train(cfg, splits=toy, progress=False)
    assert [w for _, w in asked] == [every, every]
    assert len(asked[1][0].captions) < len(toy.train.captions)  # the subset is the split the provider scores


def test_bf16_option_trains_close_to_float32():
    # Tolerance: the seed-to-seed spread of float32 on this tiny run. Measured (toy 120/30/30, 4 epochs, 3
    # seeds, busy machine): float32 best val RSUM 353 / 313 / 335 (spread 40); bf16 − float32 per seed
    # −13, −10, −10. A bf16 path that does not learn, or diverges, lands far outside 45.
    toy = make_toy_splits(120, 30, 30, seed=0)
    cfg = Config(
        **{
            **TINY,
            "embed_dim": 32,
            "word_dim": 16,
            "text_hidden": 32,
            "batch_size": 32,
            "epochs": 3,
            "lr_decay_epoch": 6,
            "lr_decay": 0.1,
        }
    )
    f32 = train(cfg, splits=toy, progress=False)
    b16 = train(cfg.replace(bf16=True), splits=toy, progress=False)

    def best(r):
        return max(h["val_rsum"] for h in r.history)

    assert abs(best(b16) - best(f32)) <= 45, (best(b16), best(f32))
    assert best(b16) > 2 * f32.history[0]["val_rsum_chance"]


def test_text_encoder_takes_the_state_after_each_captions_last_token():
    """The padded-batch GRU of ``TextEncoder`` against a loop of ``nn.GRUCell`` steps written out per caption
    (same weights), stopped at each caption's own length: equal embeddings and equal gradients; padding
    after a caption changes nothing; lengths outside [1, width] raise."""
    from coherent_itr.models.vse import TextEncoder

    torch.manual_seed(0)
    enc = TextEncoder(vocab_size=50, word_dim=8, hidden=6, embed_dim=4)
    lengths = torch.tensor([5, 1, 3, 7, 2])
    tokens = torch.zeros(5, 7, dtype=torch.long)
    for i, n in enumerate(lengths.tolist()):
        tokens[i, :n] = torch.randint(1, 50, (n,))
    out = enc(tokens, lengths)
    cell = torch.nn.GRUCell(8, 6)
    with torch.no_grad():
        for a in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(cell, a).copy_(getattr(enc.gru, f"{a}_l0"))
    ref = []
    for i, n in enumerate(lengths.tolist()):
        h = torch.zeros(1, 6)
        for t in range(n):
            h = cell(enc.embed(tokens[i : i + 1, t]), h)
        ref.append(torch.nn.functional.normalize(enc.proj(h), dim=-1))
    ref = torch.cat(ref)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
    w = torch.randn(5, 4)
    (g_out,) = torch.autograd.grad((out * w).sum(), enc.gru.weight_hh_l0)
    (g_ref,) = torch.autograd.grad((ref * w).sum(), cell.weight_hh)
    torch.testing.assert_close(g_out, g_ref, rtol=1e-4, atol=1e-6)
    wider = torch.cat([tokens, torch.randint(1, 50, (5, 3))], dim=1)  # junk after every caption's end
    torch.testing.assert_close(enc(wider, lengths), out, rtol=1e-6, atol=1e-7)
    for bad in (torch.tensor([5, 0, 3, 7, 2]), torch.tensor([5, 1, 3, 8, 2])):
        with pytest.raises(ValueError, match="caption lengths"):
            enc(tokens, bad)
