"""coherent_itr/kmeans1d.py: its levels and numbers of levels equal the adaptive ladder's torch back-end's
(``adaptive_levels_torch``) exactly, on planted rows (uniform, heavy ties, constant, two tight clusters, n from 1
to 200, every (L_MIN, L_MAX) the study runs and short rows with n < L_MAX) and on relevance-like rows; equal the
sklearn back-end's where that one is exact (well-separated clusters); the operation count does not grow with the
rows or their length; and the module moves no run key."""

from __future__ import annotations

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from coherent_itr import code_identity, runs
from coherent_itr import kmeans1d as km
from coherent_itr.config import Config
from coherent_itr.losses import adaptive_ladder as al

#: the study's (L_MIN, L_MAX): Table VIII/IX's sweep (lminmax), the β₂ arms' (2, 2) and the paper default (2, 4)
STUDY_BOUNDS = ((1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (2, 3), (2, 4), (2, 5))
#: l_min = 1 < l_max: refused by the loss, accepted by both functions
OTHER_BOUNDS = ((1, 3),)


def _planted(kind: str, rows: int, n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    v = torch.rand(rows, n, generator=g)
    if kind == "ties":  # four values only
        v = (v * 3).round() / 3
    elif kind == "constant":  # every row constant, one row per value
        v = torch.rand(rows, 1, generator=g).expand(rows, n).contiguous()
    elif kind == "mixed":  # constant rows among uniform ones
        v[: rows // 3] = 0.25
    elif kind == "two_clusters":  # two tight clusters per row
        hi = torch.rand(rows, n, generator=g) < 0.3
        v = torch.where(hi, 0.8, 0.2) + 1e-3 * v
    return v


def _assert_same(values: torch.Tensor, l_min: int, l_max: int) -> None:
    level_ref, k_ref = al.adaptive_levels_torch(values, l_min, l_max)
    level, k = km.adaptive_levels(values, l_min, l_max)
    assert level.dtype == level_ref.dtype == torch.int64 and k.dtype == k_ref.dtype == torch.int64
    assert level.shape == level_ref.shape and k.shape == k_ref.shape
    assert torch.equal(k, k_ref), (l_min, l_max, (k != k_ref).sum().item())
    assert torch.equal(level, level_ref), (l_min, l_max, (level != level_ref).sum().item())


@pytest.mark.parametrize("kind", ["uniform", "ties", "constant", "mixed", "two_clusters"])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 31, 127, 200])
def test_equal_to_the_torch_back_end_on_planted_rows(kind, n):
    values = _planted(kind, 24, n, seed=n)
    for l_min, l_max in STUDY_BOUNDS + OTHER_BOUNDS:
        _assert_same(values, l_min, l_max)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_equal_to_the_torch_back_end_on_relevance_like_rows(dtype):
    """Stand-in for Sentence-BERT rows of a B = 128 batch (not available offline): per row most candidates near
    0 and a few high, some of them tied, as both directions of three batches stacked (768 rows × 127)."""
    g = torch.Generator().manual_seed(7)
    rows, n = 768, 127
    low = (0.08 * torch.randn(rows, n, generator=g)).abs()
    share = 0.02 + 0.2 * torch.rand(rows, 1, generator=g)
    high = 0.3 + 0.6 * torch.rand(rows, n, generator=g)
    v = torch.where(torch.rand(rows, n, generator=g) < share, high, low).clamp(0, 1)
    v[::5, :4] = v[::5, 4:5]  # a few exactly tied candidates
    v = v.to(dtype)
    for l_min, l_max in STUDY_BOUNDS:
        _assert_same(v, l_min, l_max)
    _, k = km.adaptive_levels(v, 2, 4)
    assert set(k.tolist()) >= {2, 3}, "the stand-in rows choose more than one number of levels"


def test_equal_to_the_loss_on_its_own_off_diagonal_rows():
    """The rows AdaptiveLadderLoss.levels passes (B × (B − 1), diagonal excluded), for a clamped-cosine rel."""
    torch.manual_seed(0)
    f = torch.nn.functional.normalize(torch.rand(128, 384), dim=1)
    rel = (f @ f.T).clamp(0, 1)
    values = rel[~torch.eye(128, dtype=torch.bool)].view(128, 127)
    _assert_same(values, 2, 4)
    _assert_same(torch.cat([values, values.flip(0)]), 2, 4)


@pytest.mark.parametrize("l_min,l_max", [(2, 4), (3, 3)])
def test_equal_to_sklearn_on_well_separated_clusters(l_min, l_max):
    """Three tight clusters far apart: Lloyd's k-means finds the optimum for every k, so the reference back-end
    is exact there; both choose three levels and the same members."""
    g = torch.Generator().manual_seed(3)
    rows, n = 6, 30
    centre = torch.tensor([0.1, 0.5, 0.9])
    which = torch.randint(0, 3, (rows, n), generator=g)
    which[:, :3] = torch.arange(3)  # every cluster present
    v = centre[which] + 0.01 * torch.rand(rows, n, generator=g)
    level_sk, k_sk = al.adaptive_levels_sklearn(v, l_min, l_max)
    level, k = km.adaptive_levels(v, l_min, l_max)
    assert k.tolist() == [3] * rows and torch.equal(k, k_sk)
    assert torch.equal(level, level_sk)
    assert torch.equal(level, 3 - which)  # level 1 = the highest centre


def test_refuses_bounds_out_of_order():
    with pytest.raises(ValueError):
        km.adaptive_levels(torch.rand(3, 5), 3, 2)
    with pytest.raises(ValueError):
        km.adaptive_levels(torch.rand(3, 5), 0, 2)


def _ops(fn) -> int:
    """Leaf aten operations of a call (benchmarks/bench_step_ops.py's proxy for launched kernels)."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    ev = [e for e in prof.events() if e.name.startswith("aten::")]
    return sum(1 for e in ev if not any(c.name.startswith("aten::") for c in e.cpu_children))


def test_the_operation_count_does_not_grow_with_rows_or_their_length():
    counts = set()
    for rows, n in ((8, 15), (128, 127), (256, 200)):
        v = torch.rand(rows, n)
        km.adaptive_levels(v, 2, 4)  # shape constants cached, as in a training run's later steps
        counts.add(_ops(lambda v=v: km.adaptive_levels(v, 2, 4)))
    # the count may differ by a few allocation ops between shapes, not in proportion to rows or n
    assert max(counts) - min(counts) <= 8, counts
    assert max(counts) < _ops(lambda: al.adaptive_levels_torch(torch.rand(128, 127), 2, 4))


def test_its_dp_dtype_is_the_reference_back_ends():
    assert km.DP_DTYPE == al.DP_DTYPE


# --- run keys ------------------------------------------------------------------------------------------------
def test_the_module_is_in_no_run_keys_file_set():
    """kmeans1d.py lies outside losses/ and metrics/, no library module imports it, and no frozen file set holds
    it, so adding or editing it moves no run key; the adaptive ladder's training key stays frozen."""
    assert "kmeans1d.py" not in runs.evaluation_files()
    assert "kmeans1d.py" not in code_identity.load().get("files", {})
    for cfg in (
        Config(data="synthetic", data_scale="smoke", loss="triplet"),
        Config(data="synthetic", data_scale="smoke", loss="adaptive_ladder", relevance="sbert"),
        Config(data="synthetic", data_scale="smoke", loss="ladder", relevance="sbert"),
    ):
        files = runs.training_files(cfg)
        assert "kmeans1d.py" not in files
        assert code_identity.frozen_hash(tuple(sorted(files))) is not None, cfg.loss
    assert "losses/adaptive_ladder.py" in runs.training_files(
        Config(data="synthetic", data_scale="smoke", loss="adaptive_ladder", relevance="sbert")
    )
