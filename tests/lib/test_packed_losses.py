"""coherent_itr/packed_losses.py: each batched loss over ``[E, B, B]`` against the per-member call of the frozen loss
module (values and gradients bit for bit on the CPU; the numeric diagnostics within 1e-6 relative), warm-up per
member, the modes and their reasons, relevance gathered on the device against ``provider.batch``, the adaptive
ladder's levels from one k-means DP against the module's own, a whole packed run with batched losses against the
same run with the per-member loop, and the packed key hashing the module."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from coherent_itr import code_identity, losses, runs
from coherent_itr import packed as packed_mod
from coherent_itr import packed_losses as pl
from coherent_itr.config import Config
from coherent_itr.data import load_splits, make_toy_splits, relevance_provider
from tiny_run import tiny

from reproduce.driver import pins

E, B = 4, 12


def _planted(e=E, b=B, seed=0, symmetric_member=1):
    """Similarities in [−1, 1] with a few exact ties; relevance on a 0.1 grid (ties for the k-means, rows with few
    distinct values), the diagonal 1, one member's relevance symmetric."""
    g = torch.Generator().manual_seed(seed)
    sim = torch.rand(e, b, b, generator=g) * 2 - 1
    sim[:, 0, 3] = sim[:, 0, 5]  # a tie among negatives
    rel = (torch.rand(e, b, b, generator=g) * 10).round() / 10
    rel[0, 2] = 0.3  # a row of one distinct value
    rel[symmetric_member] = torch.maximum(rel[symmetric_member], rel[symmetric_member].T)
    rel[:, torch.arange(b), torch.arange(b)] = 1.0
    return sim, rel


def _compare(name, params, warm=None, seed=0, b=B):
    """The batched form against each member's module: values and sim's gradient bit-equal, diagnostics close."""
    warm = warm or [False] * len(params)
    sim, rel = _planted(len(params), b=b, seed=seed)
    solo_crits = [losses.build(name, **p) for p in params]
    pack_crits = [losses.build(name, **p) for p in params]
    for c, c2, w in zip(solo_crits, pack_crits, warm):
        c.set_warmup(w)
        c2.set_warmup(w)
    packed = pl.PackedLoss(pack_crits, b, "cpu")
    assert packed.mode == pl.BATCHED, packed.reason
    s1 = sim.clone().requires_grad_()
    want = torch.stack([c(s1[k], rel[k]) for k, c in enumerate(solo_crits)])
    want.sum().backward()
    s2 = sim.clone().requires_grad_()
    got, diags = packed(s2, rel)
    got.sum().backward()
    assert torch.equal(got.detach(), want.detach()), (got, want)
    assert torch.equal(s2.grad, s1.grad), (s2.grad - s1.grad).abs().max()
    for k, c in enumerate(solo_crits):
        numeric = {
            f"loss_{key}": float(x)
            for key, x in c.diagnostics.items()
            if isinstance(x, (int, float)) and not isinstance(x, bool)
        }
        assert set(diags[k]) == {"train_loss", *numeric}, (k, set(diags[k]) ^ {"train_loss", *numeric})
        assert diags[k]["train_loss"] == float(want[k].detach())
        for key, value in numeric.items():
            assert diags[k][key] == pytest.approx(value, rel=1e-6, abs=1e-7), (k, key)
    return packed


CASES = {
    "triplet": (
        [{}, {"margin": 0.1, "max_violation": False}, {"reduction": "mean"}, {"margin": 0.3}],
        [False, False, True, False],
    ),
    "triplet_sn": ([{}, {"gamma": 10.0, "negatives": "relevance"}, {"margin": 0.05, "reduction": "mean"}], None),
    "vlc": ([{"gamma": 20.0}, {"gamma": 50.0, "reduction": "mean", "average_directions": True}], None),
    "unified": ([{}, {"margin": 0.0, "gamma": 20.0}, {"average_directions": True, "reduction": "mean"}], None),
    "ladder": (
        [
            {},
            {"thresholds": [0.6, 0.4], "alpha": [0.2, 0.01, 0.01], "beta": [1.0, 0.25, 0.125]},
            {"hard_contrastive": False},
            {"beta": [1.0, 0.0]},
        ],
        [False, True, False, False],
    ),
    "adaptive_ladder": (
        [{}, {"l_min": 2, "l_max": 2}, {"hard_contrastive": False}, {"l_min": 3, "l_max": 3}, {}],
        [False, False, False, False, True],
    ),
    "sndcg": ([{}, {"tau": 0.1, "idcg": "sorted"}, {"t2i_rel": "untransposed", "clamp": 5.0}], None),
    "kendall_sw_hs": ([{}, {"margin": 0.1, "reduction": "mean"}, {}], None),
    "listwise": ([{}, {"sndcg_params": {"tau": 0.1}}, {"weight_sndcg": 0.5}], [False, True, False]),
    "bcls": ([{}, {"triplet_params": {"gamma": 10.0}}], None),
    "vsepp": ([{}, {"margin": 0.1}], [True, False]),
    "cvsepp": ([{"adaptive": True}, {"adaptive": True, "ladder_params": {"l_max": 3}}], None),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_batched_loss_is_each_members_module_bit_for_bit(name):
    params, warm = CASES[name]
    _compare(name, params, warm)
    _compare(name, params, warm, seed=3)


@pytest.mark.parametrize("name", ["triplet", "unified", "ladder", "adaptive_ladder", "listwise", "bcls"])
def test_a_batched_loss_is_each_members_module_at_the_default_batch_size(name):
    """B = 128, the study's batch: other reduction lengths, the same bits."""
    params, warm = CASES[name]
    _compare(name, params, warm, b=128)


def test_a_member_alone_or_among_others_gets_the_same_bits():
    """Slot independence of the batched form: member 1 of a pack equals the same member in slot 0 of a pack of
    other members (the same shapes)."""
    sim, rel = _planted(3)
    params = [{}, {"l_min": 2, "l_max": 3}, {}]
    a = pl.PackedLoss([losses.build("adaptive_ladder", **p) for p in params], B, "cpu")
    swapped = [params[1], params[0], params[2]]
    b = pl.PackedLoss([losses.build("adaptive_ladder", **p) for p in swapped], B, "cpu")
    x1, x2 = sim.clone().requires_grad_(), sim[[1, 0, 2]].clone().requires_grad_()
    la, _ = a(x1, rel)
    lb, _ = b(x2, rel[[1, 0, 2]])
    la.sum().backward()
    lb.sum().backward()
    assert torch.equal(la[1], lb[0]) and torch.equal(x1.grad[1], x2.grad[0])


# --- modes ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "loss, params, mode, why",
    [
        ("triplet", {}, "batched", "TripletLoss"),
        ("adaptive_ladder", {}, "batched", "AdaptiveLadderLoss"),
        ("adaptive_ladder", {"backend": "sklearn"}, "loop", "on the host"),
        ("sam", {}, "loop", "random negatives"),
        ("sam_authors", {}, "loop", "random negatives"),
        ("kendall", {}, "loop", "one call per member"),
        ("bcls", {"kendall": "kendall"}, "loop", "term kendall"),
        ("listwise", {}, "batched", "every weighted term"),
    ],
)
def test_member_loss_mode_says_how_and_why(loss, params, mode, why):
    cfg = Config(**tiny(loss=loss, loss_params=params, relevance="true"))
    got, reason = pl.member_loss_mode(cfg)
    assert got == mode and why in reason


def test_every_registered_loss_has_a_mode():
    for name in losses.available():
        if name == "weighted_sum":
            crit = losses.build(name, terms=[{"name": "triplet"}])
        else:
            crit = losses.build(name)
        mode, reason = pl.crit_mode(crit, 128)
        assert mode in (pl.BATCHED, pl.LOOP) and reason, name


def test_sndcg_loops_when_one_chunk_cannot_hold_a_members_batch():
    assert pl.crit_mode(losses.build("sndcg"), 256)[0] == pl.BATCHED
    mode, why = pl.crit_mode(losses.build("sndcg"), 512)
    assert mode == pl.LOOP and "chunk" in why


def test_a_pack_whose_members_disagree_loops_and_says_why():
    sw = [losses.build("kendall_sw_hs"), losses.build("kendall_sw_hs", beta=0.2)]
    packed = pl.PackedLoss(sw, B, "cpu")
    assert packed.mode == pl.LOOP and "window edges" in packed.reason
    mixed = [losses.build("listwise"), losses.build("listwise", weight_sndcg=0.0)]
    assert "zero weights" in pl.PackedLoss(mixed, B, "cpu").reason
    sam = [losses.build("sam"), losses.build("sam", seed=1)]
    packed = pl.PackedLoss(sam, B, "cpu")
    assert packed.mode == pl.LOOP and packed.reason.startswith("member 0: random negatives")
    sim, rel = _planted(2)
    solo = [losses.build("sam"), losses.build("sam", seed=1)]
    got, diags = packed(sim, rel)
    want = [c(sim[k], rel[k]) for k, c in enumerate(solo)]
    assert torch.equal(got, torch.stack(want))
    assert diags[1]["loss_margin_mean_i2t"] == solo[1].diagnostics["margin_mean_i2t"]


# --- the adaptive ladder's levels -------------------------------------------------------------------------------
def _levels_against_module(rel, params):
    crits = [losses.build("adaptive_ladder", **p) for p in params]
    fam = pl._AdaptiveLadder(crits, "cpu")
    li, lt, ki, kt = fam.levels(rel)
    b = rel.shape[1]
    for k, c in enumerate(crits):
        level, chosen = c.levels(torch.cat([rel[k], rel[k].T], dim=0))
        assert torch.equal(li[k], level[:b]) and torch.equal(lt[k], level[b:]), k
        assert torch.equal(ki[k], chosen[:b]) and torch.equal(kt[k], chosen[b:]), k


def test_adaptive_levels_of_the_pack_are_the_modules_on_planted_rows():
    _, rel = _planted(4)
    _levels_against_module(rel, [{}, {"l_min": 2, "l_max": 5}, {}, {"l_min": 3, "l_max": 3}])


def test_adaptive_levels_of_the_pack_are_the_modules_on_synthetic_world_rows():
    """Real-ish rows: batches of 64 of the synthetic world's true relevance (smoke scale)."""
    tr = load_splits("synthetic", scale="smoke", seed=0).train
    provider = relevance_provider("true", tr)
    g = np.random.default_rng(0)
    img = g.choice(tr.n_images, size=(3, 64), replace=False)
    cap = img * tr.captions_per_image + g.integers(0, tr.captions_per_image, size=img.shape)
    rel = torch.from_numpy(np.stack([provider.batch(i, c) for i, c in zip(img, cap)]))
    _levels_against_module(rel, [{}, {}, {"l_min": 2, "l_max": 3}])


# --- relevance on the device --------------------------------------------------------------------------------------
@pytest.mark.parametrize("source", ["toy", "synthetic"])
def test_relevance_gathered_on_the_device_is_provider_batch(source):
    tr = make_toy_splits(48, 12, 12, seed=0).train if source == "toy" else load_splits("synthetic", scale="smoke").train
    provider = relevance_provider("true", tr)
    table = pl.device_relevance(provider, "cpu")
    assert table is not None
    g = np.random.default_rng(1)
    for _ in range(5):
        img = torch.from_numpy(g.integers(0, tr.n_images, size=(3, 16)))
        cap = torch.from_numpy(g.integers(0, tr.n_captions, size=(3, 16)))
        got = table.gather(img, cap)
        want = pl.host_relevance(provider, img, cap, "cpu")
        assert got.shape == (3, 16, 16) and torch.equal(got, want)


def test_providers_computed_per_batch_stay_on_the_host():
    class Computed:  # a provider that is not a table (Sentence-BERT, CIDEr-D)
        def batch(self, i, c):
            return np.zeros((len(i), len(c)), dtype=np.float32)

    assert pl.device_relevance(Computed(), "cpu") is None


# --- whole runs ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("loss, params", [("adaptive_ladder", {}), ("listwise", {"sndcg_params": {"tau": 0.1}})])
def test_a_packed_run_with_batched_losses_is_the_run_with_the_loop(loss, params, monkeypatch):
    """The same pack trained with the batched losses and with every member's own module: the same bits."""
    toy = make_toy_splits(48, 12, 12, seed=0)
    base = Config(**tiny(epochs=2, batch_size=16, loss=loss, loss_params=params, relevance="true", warmup_epochs=1))
    cfgs = [base.replace(seed=1), base.replace(seed=2, lr=1e-3)]
    batched = packed_mod.train_packed(cfgs, splits=toy, width=2, progress=False)
    assert batched[0].record["engine"]["losses"] == "batched"
    real = pl.PackedLoss.__init__

    def looping(self, *args, **kw):
        real(self, *args, **kw)
        self.mode, self.family = pl.LOOP, None

    monkeypatch.setattr(pl.PackedLoss, "__init__", looping)
    looped = packed_mod.train_packed(cfgs, splits=toy, width=2, progress=False)
    assert looped[0].record["engine"]["losses"] == "loop"
    for a, b in zip(batched, looped):
        for key in ("test_img", "test_cap"):
            assert np.array_equal(a.arrays[key], b.arrays[key])
        strip = [{k: v for k, v in h.items() if k != "epoch_time_s"} for h in a.history]
        other = [{k: v for k, v in h.items() if k != "epoch_time_s"} for h in b.history]
        assert [set(h) for h in strip] == [set(h) for h in other]
        for h, o in zip(strip, other):
            for key, value in o.items():
                assert h[key] == pytest.approx(value, rel=1e-6, abs=1e-7), key
            assert h["train_loss"] == o["train_loss"] and h["val_rsum"] == o["val_rsum"]


# --- the packed key ---------------------------------------------------------------------------------------------
def test_the_packed_key_hashes_the_module_and_no_solo_key_does(tmp_path):
    """An edit of any module of the packed engine (packed*.py, kmeans1d.py) changes its source, hence every packed key;
    no solo key hashes these files."""
    root = packed_mod.Path(packed_mod.__file__).parent
    for name in packed_mod.ENGINE_FILES:
        (tmp_path / name).write_bytes((root / name).read_bytes())
    assert packed_mod.engine_source(tmp_path) == packed_mod.engine_identity(4)["source"]
    for name in packed_mod.ENGINE_FILES:
        before = (tmp_path / name).read_bytes()
        (tmp_path / name).write_bytes(before + b"\n# an edit\n")
        assert packed_mod.engine_source(tmp_path) != packed_mod.engine_identity(4)["source"]
        (tmp_path / name).write_bytes(before)
        assert name not in code_identity.load().get("files", {})
    cfgs = (Config(**tiny()), Config(data="synthetic", data_scale="smoke", loss="adaptive_ladder", relevance="sbert"))
    for cfg in cfgs:
        assert not set(packed_mod.ENGINE_FILES) & set(runs.training_files(cfg))
    assert not set(packed_mod.ENGINE_FILES) & set(runs.evaluation_files())


def test_bad_inputs_are_refused_by_name():
    packed = pl.PackedLoss([losses.build("ladder"), losses.build("ladder")], B, "cpu")
    sim, rel = _planted(2)
    with pytest.raises(ValueError, match=r"\[E, B, B\]"):
        packed(sim[0], rel[0])
    with pytest.raises(ValueError, match="needs a relevance tensor"):
        packed(sim, None)
    with pytest.raises(ValueError, match="rel shape"):
        packed(sim, rel[:, :5])
    with pytest.raises(ValueError, match="NaN or infinite"):
        packed(sim, rel.masked_fill(torch.eye(B, dtype=torch.bool), float("nan")))


@pytest.mark.parametrize("loss,params,rel", [("triplet", {}, None), ("adaptive_ladder", {}, "true")])
def test_a_packed_run_executes_no_library_file_its_key_leaves_out(loss, params, rel):
    """Every library file a packed run calls into is in its solo run's file set or the engine's
    (:data:`coherent_itr.packed.ENGINE_FILES`, the ``source`` of its key)."""
    cfg = Config(**tiny(loss=loss, loss_params=params, relevance=rel))
    seen: set[str] = set()
    pins._profiled(lambda: packed_mod.train_packed([cfg, cfg.replace(seed=1)], width=2, progress=False), seen)
    assert seen, "the profiler saw no package code"
    assert not seen - set(runs.training_files(cfg)) - set(packed_mod.ENGINE_FILES), sorted(
        seen - set(runs.training_files(cfg)) - set(packed_mod.ENGINE_FILES)
    )
