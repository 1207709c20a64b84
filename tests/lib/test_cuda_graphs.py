"""The captured training step (coherent_itr.cuda_graphs) on the CPU, through the replay stand-in: the same
update as the eager step, its width buckets, the statistics it keeps on the device, the losses it may capture,
its fallback, and what enters the run key. The capture itself needs a GPU (benchmarks/bench_cuda.py, part
``graphs``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from coherent_itr import cuda_graphs, losses, runs
from coherent_itr.config import Config
from coherent_itr.runs import identity
from coherent_itr.data import make_toy_splits
from coherent_itr.train import train
from tiny_run import tiny

# two epochs, a learning-rate decay between them, a ragged last batch (60 captions, batches of 16)
TINY = tiny(epochs=2, batch_size=16, lr_decay=0.5)


@pytest.fixture(scope="module")
def toy():
    return make_toy_splits(12, 12, 12, seed=0)


def _pair(toy, monkeypatch, **over):
    """The eager run and the replayed run of one config, captions padded to their batch's exact width."""
    monkeypatch.setattr(cuda_graphs, "WIDTH_STEP", 1)
    cfg = Config(**tiny(**{**TINY, **over}))
    eager = train(cfg, splits=toy, progress=False)
    replayed = train(cfg, splits=toy, progress=False, graph_backend=cuda_graphs.ReplayBackend())
    return eager, replayed


@pytest.mark.parametrize(
    "loss, extra",
    [
        ("triplet", {}),
        ("vsepp", {"warmup_epochs": 1}),
        ("triplet_sn", {}),
        ("unified", {}),
        ("vlc", {}),
        ("listwise", {"relevance": "true"}),
        ("sndcg", {"relevance": "true"}),
        ("sam", {"relevance": "true"}),
        ("sam_authors", {"relevance": "true"}),
        ("bcls", {"relevance": "true"}),
        ("ladder", {"relevance": "true", "warmup_epochs": 1}),
        ("adaptive_ladder", {"relevance": "true"}),
        ("sam", {"relevance": "true", "loss_params": {"sampling": "RS"}}),
        ("sam_authors", {"relevance": "true", "loss_params": {"sampling": "RS", "seed": 4}}),
    ],
)
def test_the_replayed_step_is_the_eager_step(toy, monkeypatch, loss, extra):
    """With each batch padded to its own longest caption (as the eager step pads), replaying the captured step
    trains the same model bit for bit: same validation history, same test embeddings. Only the order in which
    the epoch means are summed differs."""
    eager, replayed = _pair(toy, monkeypatch, loss=loss, **extra)
    engine = replayed.record["engine"]
    assert engine["step"] == "replay" and engine["reason"] is None
    assert engine["captured_steps"] > 0
    np.testing.assert_array_equal(eager.arrays["test_img"], replayed.arrays["test_img"])
    np.testing.assert_array_equal(eager.arrays["test_cap"], replayed.arrays["test_cap"])
    for a, b in zip(eager.history, replayed.history, strict=True):
        assert set(a) == set(b)
        assert a["val_rsum"] == b["val_rsum"] and a["n_steps"] == b["n_steps"] and a["lr"] == b["lr"]
        for k, v in a.items():
            if isinstance(v, float) and (k.startswith("loss_") or k == "train_loss"):
                assert b[k] == pytest.approx(v, rel=1e-9, abs=1e-12), k
    assert "engine" not in eager.record  # a CPU run's record is as it always was


def test_padding_to_a_wider_bucket_keeps_the_update_close(toy):
    """At the real bucket width (a multiple of 8, at most the widest caption) the padding changes only the GEMM
    shapes: one epoch ends within float32 rounding of the eager model."""
    cfg = Config(**tiny(**{**TINY, "epochs": 1, "lr": 2e-4}))
    eager = train(cfg, splits=toy, progress=False)
    replayed = train(cfg, splits=toy, progress=False, graph_backend=cuda_graphs.ReplayBackend())
    widths = [int(g.removeprefix("width")) for g in replayed.record["engine"]["graphs"]]
    assert widths and all(w % cuda_graphs.WIDTH_STEP == 0 or w == max(widths) for w in widths)
    np.testing.assert_allclose(eager.arrays["test_cap"], replayed.arrays["test_cap"], atol=1e-5)


@pytest.mark.parametrize(
    "longest, full, want", [(1, 40, 8), (8, 40, 8), (9, 40, 16), (17, 20, 20), (20, 20, 20), (33, 40, 40)]
)
def test_width_buckets(longest, full, want):
    assert cuda_graphs.width_bucket(longest, full) == want


@pytest.mark.parametrize("longest", [0, 41])
def test_a_width_outside_the_captions_is_refused(longest):
    with pytest.raises(ValueError, match=r"1\.\.40 tokens; got"):
        cuda_graphs.width_bucket(longest, 40)


def test_one_graph_per_width_and_warmup_phase(toy, monkeypatch):
    _, replayed = _pair(toy, monkeypatch, loss="vsepp", warmup_epochs=1)
    graphs = replayed.record["engine"]["graphs"]
    assert any(g.endswith("-warmup") for g in graphs) and any(not g.endswith("-warmup") for g in graphs)


def test_ragged_batches_and_the_first_steps_run_eagerly(toy, monkeypatch):
    """60 training captions in batches of 16: 3 full batches and a ragged one per epoch; the first
    EAGER_FIRST full batches of the run are eager too."""
    _, replayed = _pair(toy, monkeypatch, loss="triplet")
    per_epoch = toy.train.n_captions // 16
    assert replayed.record["engine"]["captured_steps"] == 2 * per_epoch - cuda_graphs.EAGER_FIRST


class _Failing:
    name = "failing"

    def capture(self, body):
        raise RuntimeError("operation not permitted when stream is capturing\nmore")


def test_a_failed_capture_falls_back_to_the_eager_step(toy):
    """The run goes on eagerly, is the eager run bit for bit, and says why in one line."""
    cfg = Config(**tiny(**TINY, loss="triplet"))
    eager = train(cfg, splits=toy, progress=False)
    fell_back = train(cfg, splits=toy, progress=False, graph_backend=_Failing())
    engine = fell_back.record["engine"]
    assert engine["step"] == "eager" and engine["captured_steps"] == 0
    assert (
        engine["reason"].startswith("capture of width") and "RuntimeError: operation not permitted" in engine["reason"]
    )
    assert "\n" not in engine["reason"]
    np.testing.assert_array_equal(eager.arrays["test_cap"], fell_back.arrays["test_cap"])
    assert [h["val_rsum"] for h in eager.history] == [h["val_rsum"] for h in fell_back.history]


class _Silent:
    name = "silent"

    def capture(self, body):
        raise AssertionError()


def test_a_capture_failure_without_a_message_is_named_by_its_type(toy):
    cfg = Config(**tiny(**TINY, loss="triplet"))
    engine = train(cfg, splits=toy, progress=False, graph_backend=_Silent()).record["engine"]
    assert engine["reason"].endswith("AssertionError: (no message)")


def test_a_non_finite_captured_loss_names_its_step(toy, monkeypatch):
    """The captured steps' losses are read once an epoch; the first non-finite one is named."""
    monkeypatch.setattr(cuda_graphs, "EAGER_FIRST", 0)
    real = cuda_graphs.GraphedSteps._collect

    def poisoned(self, step_no, outputs):
        if step_no == 1:
            outputs = {**outputs, "train_loss": torch.tensor(float("nan"))}
        real(self, step_no, outputs)

    monkeypatch.setattr(cuda_graphs.GraphedSteps, "_collect", poisoned)
    cfg = Config(**tiny(**TINY, loss="triplet"))
    with pytest.raises(FloatingPointError, match=r"non-finite loss nan at step 1 \(loss=triplet.*a captured step"):
        train(cfg, splits=toy, progress=False, graph_backend=cuda_graphs.ReplayBackend())


@pytest.mark.parametrize(
    "loss, params, capturable",
    [
        ("triplet", {}, True),
        ("vsepp", {}, True),
        ("triplet_sn", {}, True),
        ("unified", {}, True),
        ("vlc", {}, True),
        ("sndcg", {}, True),
        ("listwise", {}, True),
        ("sam", {}, True),  # the paper's SN: the furthest negative, found on the device
        ("sam_authors", {}, True),
        ("sam", {"sampling": "RS"}, True),  # negatives drawn on the host before each captured step
        ("bcls", {}, True),  # Triplet-SN + Kendall SW-HS
        ("kendall_sw_hs", {}, True),
        ("bcls", {"kendall": "kendall"}, True),  # the full Kendall loss (its counts stay on the device)
        ("ladder", {"thresholds": (0.5,)}, True),
        ("adaptive_ladder", {}, True),  # exact 1-D k-means by dynamic programming on the device
        ("adaptive_ladder", {"backend": "sklearn"}, False),  # K-Means on the host
    ],
)
def test_which_losses_are_captured(loss, params, capturable):
    crit = losses.build(loss, **params)
    blocker = cuda_graphs.capture_blocker(torch.device("cpu"), crit, stand_in=True)
    assert (blocker is None) == capturable, blocker
    assert cuda_graphs.capture_blocker(torch.device("cpu"), crit) == "not a CUDA device"


def test_graphs_switched_off_by_the_environment(monkeypatch):
    monkeypatch.setenv(cuda_graphs.ENV, "0")
    blocker = cuda_graphs.capture_blocker(torch.device("cuda"), losses.build("triplet"))
    assert blocker == "COHERENT_ITR_CUDA_GRAPHS=0"


def test_the_step_engine_enters_a_cuda_runs_key_and_no_cpu_key(monkeypatch):
    """A CPU run's numerics name its CPU and no step engine; on CUDA the key names eager or the graph engine."""
    cfg = Config(**tiny(loss="triplet", device="cpu"))
    monkeypatch.setattr(identity, "cpu_identity", lambda: runs.REFERENCE_CPU)
    assert runs.device_numerics(cfg) == {"cpu": runs.REFERENCE_CPU}
    assert cuda_graphs.step_identity(cfg, "cuda") == f"cuda-graph:{cuda_graphs.engine_source_sha()}"
    assert cuda_graphs.step_identity(cfg.replace(loss="bcls", relevance="true"), "cuda") == (
        f"cuda-graph:{cuda_graphs.engine_source_sha()}"  # one record per machine; bcls trains eagerly there
    )
    assert cuda_graphs.step_identity(cfg, "cpu") == "eager"
    monkeypatch.setenv(cuda_graphs.ENV, "0")
    assert cuda_graphs.step_identity(cfg, "cuda") == "eager"


def test_a_diagnostic_while_captured_is_a_tensor_and_the_same_mean(monkeypatch):
    """masked_mean_stat: the capture form (no boolean indexing) gives the eager float."""
    from coherent_itr.losses import base

    g = torch.Generator().manual_seed(0)
    x = torch.randn(9, 9, generator=g)
    mask = torch.rand(9, 9, generator=g) > 0.5
    eager = base.masked_mean_stat(x, mask)
    empty = base.masked_mean_stat(x, torch.zeros_like(mask), empty=0.0)
    monkeypatch.setattr(base, "capturing", lambda: True)
    captured = base.masked_mean_stat(x, mask)
    assert torch.is_tensor(captured) and float(captured) == pytest.approx(eager, rel=1e-6)
    assert float(base.masked_mean_stat(x, torch.zeros_like(mask), empty=0.0)) == empty == 0.0
    assert torch.is_tensor(base.stat(x.sum()))


def test_each_run_captures_on_its_own_stream_one_capture_at_a_time(monkeypatch):
    """Runs side by side in one process (threads): :class:`cuda_graphs.CudaBackend` captures on a stream of its
    run's own, not ``torch.cuda.graph``'s one side stream for the process, in ``thread_local`` mode (another run
    goes on with eager work meanwhile), and never while another capture holds the lock. CUDA is planted."""
    made, calls = [], []

    class Graph:
        def replay(self):
            calls.append("replay")

    class Stream:
        def __init__(self):
            made.append(self)

    class Capture:
        def __init__(self, graph, stream=None, capture_error_mode="global"):
            calls.append((stream, capture_error_mode, cuda_graphs._CAPTURE_LOCK.locked()))

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(torch.cuda, "CUDAGraph", Graph)
    monkeypatch.setattr(torch.cuda, "Stream", Stream)
    monkeypatch.setattr(torch.cuda, "graph", Capture)
    a, b = cuda_graphs.CudaBackend(), cuda_graphs.CudaBackend()
    for backend in (a, a, b):
        replay, outputs = backend.capture(lambda: {"train_loss": torch.zeros(())})
        replay()
        assert set(outputs) == {"train_loss"}
    assert len(made) == 2 and a.stream is made[0] and b.stream is made[1]
    assert calls == [
        (made[0], "thread_local", True),
        "replay",
        (made[0], "thread_local", True),
        "replay",
        (made[1], "thread_local", True),
        "replay",
    ]
    assert not cuda_graphs._CAPTURE_LOCK.locked()


CAPTURED_FORWARDS = [
    ("triplet", {}),
    ("triplet", {"max_violation": False}),
    ("vsepp", {}),
    ("triplet_sn", {}),
    ("unified", {}),
    ("vlc", {}),
    ("sndcg", {}),
    ("listwise", {}),
    ("sam", {}),
    ("sam", {"sampling": "HN", "margin_pairing": "crossed", "margin_max": 0.5}),
    ("sam_authors", {}),
    ("sam", {"sampling": "RS", "seed": 5}),
    ("sam_authors", {"sampling": "RS"}),
    ("kendall_sw_hs", {}),
    ("kendall_sw_hs", {"alpha": 0.4, "beta": 0.3, "reduction": "mean"}),
    ("bcls", {}),
    ("ladder", {"thresholds": (0.5,)}),
    ("kendall", {}),
    ("kendall", {"reduction": "pair_mean", "margin": 0.1}),
    ("adaptive_ladder", {}),
    ("adaptive_ladder", {"l_min": 2, "l_max": 3, "hard_contrastive": False}),
    ("bcls", {"kendall": "kendall"}),
    ("ladder", {"thresholds": (0.7, 0.4, 0.2), "hard_contrastive": False, "reduction": "mean"}),
]


@pytest.mark.parametrize("symmetric", [True, False], ids=["symmetric-rel", "asymmetric-rel"])
@pytest.mark.parametrize("loss, params", CAPTURED_FORWARDS)
def test_a_capturable_loss_reads_nothing_on_the_host_while_captured(loss, params, symmetric, monkeypatch):
    """What a capture forbids, checked on the CPU: with ``capturing()`` planted True and every host read of a
    tensor (``float``, ``int``, ``bool``, ``item``, ``tolist``, ``numpy``), every value-dependent shape
    (``nonzero``, ``masked_select``, ``unique``, indexing by a boolean mask), host draw (``randint``) and tensor
    made from host data (``torch.tensor`` or ``torch.as_tensor`` of a number or list: a copy to the device) raising,
    the forward and backward of each capturable loss run, give the eager loss and gradient, and keep each numeric
    diagnostic as a 0-d tensor equal to the eager float (an eager-only diagnostic is a list or histogram). Random
    negatives are drawn before the step, as :class:`cuda_graphs.GraphedSteps` draws them."""
    import sys

    from coherent_itr import determinism

    g = torch.Generator().manual_seed(3)
    b = 16
    sim = (torch.rand(b, b, generator=g, dtype=torch.float32) * 2 - 1).requires_grad_(True)
    rel = torch.rand(b, b, generator=g)
    if symmetric:  # e.g. caption–caption relevance (the adaptive ladder then clusters one direction eagerly)
        rel = (rel + rel.T) / 2
    rel.fill_diagonal_(1.0)

    def run(crit):
        if sim.grad is not None:
            sim.grad = None
        value = crit(sim, rel)
        value.backward()
        return value.detach().clone(), sim.grad.clone(), dict(crit.diagnostics)

    def warmed(crit):  # the engine's first steps run eagerly: what a loss makes once per device exists by then
        crit(sim.detach(), rel)
        return crit

    want_value, want_grad, want_diag = run(warmed(losses.build(loss, **params)))
    crit = warmed(losses.build(loss, **params))
    assert crit.capturable
    for m in crit.modules():  # random negatives: drawn on the host before the step, as GraphedSteps does
        if hasattr(m, "draw_step_inputs"):
            m.init_step_inputs(b, sim.device)
            m.draw_step_inputs()
            m.from_drawn = True
    switch = determinism.capturing
    for name, module in list(sys.modules.items()):  # every module that imported the switch
        if name.startswith("coherent_itr.") and getattr(module, "capturing", None) is switch:
            monkeypatch.setattr(module, "capturing", lambda: True)

    def host_read(*_a, **_k):
        raise AssertionError("a host read while captured")

    for name in ("__float__", "__int__", "__bool__", "item", "tolist", "numpy", "nonzero", "masked_select"):
        monkeypatch.setattr(torch.Tensor, name, host_read)
    for name in ("randint", "nonzero", "masked_select", "unique"):  # host draws; shapes that depend on values
        monkeypatch.setattr(torch, name, host_read)

    def no_host_data(make):  # torch.tensor(x) on CUDA copies host memory to the device (x a number too): refused
        def checked(data, *rest, **kw):
            if not torch.is_tensor(data):
                host_read()
            return make(data, *rest, **kw)

        return checked

    for name in ("tensor", "as_tensor"):
        monkeypatch.setattr(torch, name, no_host_data(getattr(torch, name)))

    def no_mask(method):  # x[mask] and x[mask] = y: on CUDA the mask's count is read on the host first
        def checked(self, index, *rest):
            parts = index if isinstance(index, tuple) else (index,)
            if any(torch.is_tensor(i) and i.dtype == torch.bool for i in parts):
                host_read()
            return method(self, index, *rest)

        return checked

    for name in ("__getitem__", "__setitem__"):
        monkeypatch.setattr(torch.Tensor, name, no_mask(getattr(torch.Tensor, name)))
    value, grad, diag = run(crit)
    monkeypatch.undo()
    assert torch.equal(value, want_value) and torch.equal(grad, want_grad)
    for k, v in want_diag.items():
        if isinstance(v, (list, dict)):
            assert k not in diag
            continue
        assert k in diag, k
        got = diag[k]
        assert (torch.is_tensor(got) and got.dim() == 0) or isinstance(got, (int, float)), k
        assert float(got) == pytest.approx(v, rel=1e-12, abs=1e-12), k
    assert set(diag) <= set(want_diag)


def test_the_engines_hash_is_frozen_so_a_declared_edit_keeps_the_captured_runs_keys(monkeypatch):
    """A captured run's key names the engine's frozen hash (``code_identity.json``, set ``cuda_graphs.py``): an edit
    of the module declared neutral keeps it, so GPU runs are not lost to a comment; an undeclared edit moves it."""
    from coherent_itr import code_identity

    frozen = code_identity.frozen_hash(cuda_graphs.ENGINE_FILES)
    assert frozen is not None and cuda_graphs.engine_source_sha() == frozen
    monkeypatch.setattr(code_identity, "_changed_now", lambda: {"cuda_graphs.py": "declared"})
    assert cuda_graphs.engine_source_sha() == frozen
    monkeypatch.setattr(code_identity, "_changed_now", lambda: {"cuda_graphs.py": "undeclared"})
    assert cuda_graphs.engine_source_sha() != frozen
