"""The training step as a CUDA graph: the whole update — gather, forward, loss, backward, clipping, Adam — replayed
by one launch instead of several hundred.

On a GPU an eager step of the default model is bound by kernel launches and Python, not arithmetic
(``results/benchmarks/cuda.md``: 5.0 ms a step at 128/128/128 and 5.6 ms at the papers' 300/1024/1024), and 16
runs sharing one GPU spend their time on the host. A captured step needs static shapes and no host reads, so:

* **Shapes.** A full batch (``batch_size`` pairs) gathers its features, tokens and lengths on the device from
  index buffers the host fills; captions are padded to a width *bucket* (:func:`width_bucket`: the batch's
  longest caption rounded up to a multiple of :data:`WIDTH_STEP`), one graph per bucket and per warm-up phase.
  The GRU takes each caption's state at its last real token, so the padding does not enter the result (the
  GEMM shapes do, so the numbers are close to, not equal to, the eager ones: :func:`step_identity` enters
  the run key). The ragged last batch of an epoch, the steps that log gradient diagnostics and the first
  :data:`EAGER_FIRST` steps (lazy initialisation of the libraries) run eagerly on the same model and
  optimiser state.
* **No host reads.** Losses that declare ``capturable`` keep their diagnostics as tensors while captured
  (:func:`coherent_itr.losses.base.stat`); the host checks lengths and relevance before copying them in, and
  draws a loss's random numbers (SAM's random negatives) before the step, in the eager order; the
  loss of every captured step is kept on the device and checked for finiteness at the end of the epoch (the
  error names the first bad step, as the eager check does).
* **Optimiser.** Adam with ``capturable=True`` and its learning rate a device tensor, so the VSE++ decay
  (:func:`coherent_itr.train._set_lr`) changes it in place and the graphs stay valid.

A loss that is not capturable (one that reads values on the host or has data-dependent shapes: the adaptive
ladder's sklearn reference back-end, whose K-Means runs on the host) trains eagerly, and so does every run when
``COHERENT_ITR_CUDA_GRAPHS=0``; a capture that fails falls back to eager for the rest of the run with a one-line
reason in the record (``record["engine"]``). On a CPU nothing here runs (the eager path is unchanged); the tests
drive this module with :class:`ReplayBackend`, which "replays" by calling the step.
"""

from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from . import code_identity

ENV = "COHERENT_ITR_CUDA_GRAPHS"
WIDTH_STEP = 8  # caption widths are padded up to a multiple of this: few graphs, little padding
EAGER_FIRST = 2  # steps run eagerly before the first capture (cuBLAS/cuDNN handles, optimiser state)


def enabled_by_env() -> bool:
    """Whether graphs may be used in this process: ``COHERENT_ITR_CUDA_GRAPHS`` unset or not ``0``."""
    return os.environ.get(ENV, "1").strip() not in ("0", "false", "no", "off")


def capture_blocker(device: torch.device, crit: torch.nn.Module, stand_in: bool = False) -> str | None:
    """Why a run on ``device`` with the loss ``crit`` trains eagerly, or ``None`` when its steps are captured
    (``stand_in``: by a stand-in backend such as :class:`ReplayBackend`, whatever the device)."""
    if not stand_in:
        if device.type != "cuda":
            return "not a CUDA device"
        if not enabled_by_env():
            return f"{ENV}=0"
    if not getattr(crit, "capturable", False):
        return f"loss {type(crit).__name__} is not capturable (it reads device values on the host)"
    return None


ENGINE_FILES = ("cuda_graphs.py",)  # a captured run's key names their code beside its training files


def engine_source_sha() -> str:
    """The code hash of this module that a captured run's key names: its frozen hash (an edit declared neutral
    keeps it: :mod:`coherent_itr.code_identity`), else the sha256 (16 hex) of its source."""
    return (
        code_identity.frozen_hash(ENGINE_FILES, "cuda") or hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]
    )


def step_identity(config, device_type: str) -> str:
    """What the run key of ``config`` on a ``device_type`` device records of its step engine:
    ``"cuda-graph:<sha of this module>"`` where graphs are on (every run of such a process: one machine record
    for an archive, :mod:`reproduce.driver.run_archive`; a loss that is not capturable trains eagerly there, as
    the engine decides the same way every time), ``"eager"`` where ``COHERENT_ITR_CUDA_GRAPHS=0``."""
    return f"cuda-graph:{engine_source_sha()}" if device_type == "cuda" and enabled_by_env() else "eager"


def width_bucket(longest: int, full_width: int, step: int = WIDTH_STEP) -> int:
    """The padded width of a batch whose longest caption has ``longest`` tokens: ``longest`` rounded up to a
    multiple of ``step``, at most ``full_width`` (the widest training caption)."""
    if longest < 1 or longest > full_width:
        raise ValueError(f"a batch's longest caption must have 1..{full_width} tokens; got {longest}")
    return min(full_width, -(-longest // step) * step)


# Captures in one process happen one at a time: runs trained side by side (threads, each on its own stream) replay
# concurrently, but a capture synchronises the device and empties the allocator's cache on entry.
_CAPTURE_LOCK = threading.Lock()


class CudaBackend:
    """Captures with :class:`torch.cuda.CUDAGraph` on a stream of its own (``torch.cuda.graph`` would otherwise use
    one side stream for the whole process), in ``thread_local`` error mode: another run's thread may go on with
    its eager work meanwhile. The outputs are the tensors the capture produced; replays run on the caller's
    current stream."""

    name = "cuda-graph"

    def __init__(self) -> None:
        self.stream = None

    def capture(self, body):
        graph = torch.cuda.CUDAGraph()
        with _CAPTURE_LOCK:
            if self.stream is None:
                self.stream = torch.cuda.Stream()
            with torch.cuda.graph(graph, stream=self.stream, capture_error_mode="thread_local"):
                outputs = body()
        return graph.replay, outputs


class ReplayBackend:
    """A stand-in for tests on the CPU: "capture" runs nothing, and each replay calls the step body, whose
    results take the place of the outputs, as a replayed graph rewrites its static outputs."""

    name = "replay"

    def capture(self, body):
        outputs: dict = {}

        def replay():
            outputs.update(body())

        return replay, outputs


@dataclass
class _EpochSums:
    """The captured steps' statistics of one epoch, kept on the device until the epoch ends."""

    losses: list = field(default_factory=list)  # (step, 0-d loss tensor) of every captured step
    sums: dict = field(default_factory=dict)  # diagnostic -> running sum (tensor or float)
    counts: dict = field(default_factory=dict)


class GraphedSteps:
    """Runs the full-batch steps of one training run as replays of captured graphs (see the module docstring).

    ``step`` returns False for a batch it leaves to the eager step; ``end_epoch`` returns the captured steps'
    sums and counts (``train_loss`` and every numeric diagnostic) for the epoch means, after checking every
    captured loss for finiteness."""

    def __init__(self, run, backend=None) -> None:
        self.run = run
        self.backend = backend or CudaBackend()
        c, dev = run.config, run.device
        self.batch = c.batch_size
        self.full_width = int(run.tokens.shape[1])
        self.tokens = run.tokens.to(dev)
        self.lengths = run.lengths.to(dev)
        self.s_img = torch.zeros(self.batch, dtype=torch.long, device=dev)
        self.s_cap = torch.zeros(self.batch, dtype=torch.long, device=dev)
        self.s_rel = (
            torch.zeros(self.batch, self.batch, dtype=torch.float32, device=dev) if run.provider is not None else None
        )
        # losses that draw random numbers on the host (SAM's "RS") draw them before each captured step, into
        # device buffers made here, before any capture
        self.drawing = [m for m in run.crit.modules() if hasattr(m, "draw_step_inputs")]
        for m in self.drawing:
            m.init_step_inputs(self.batch, dev)
        self.graphs: dict = {}
        self.eager_left = EAGER_FIRST
        self.fallback: str | None = None
        self.captured_steps = 0
        self._epoch = _EpochSums()

    # -- the engine's record --------------------------------------------------------------------------------
    def describe(self) -> dict:
        return {
            "step": "eager" if self.fallback else self.backend.name,
            "reason": self.fallback,
            "graphs": sorted(f"width{w}{'-warmup' if warm else ''}" for w, warm in self.graphs),
            "captured_steps": self.captured_steps,
        }

    # -- one step ---------------------------------------------------------------------------------------------
    def step(self, img_idx: torch.Tensor, cap_idx: torch.Tensor, warm: bool, step_no: int) -> bool:
        """Replay the graph of this batch's shape (capturing it first if new); False: run it eagerly."""
        if self.fallback is not None or len(cap_idx) != self.batch:
            return False
        if self.eager_left > 0:
            self.eager_left -= 1
            return False
        run = self.run
        lens = run.lengths[cap_idx]
        width = width_bucket(int(lens.max()), self.full_width)
        rel = None
        if run.provider is not None:
            rel = torch.as_tensor(run.provider.batch(img_idx.numpy(), cap_idx.numpy()), dtype=torch.float32)
            if hasattr(run.crit, "check_relevance"):
                run.crit.check_relevance(rel)
        self._load(img_idx, cap_idx, rel)
        key = (width, bool(warm))
        entry = self.graphs.get(key)
        if entry is None:
            try:
                entry = self._capture(width)
            except Exception as exc:  # any capture failure: eager for the rest of the run, and why
                first = (str(exc).strip().splitlines() or ["(no message)"])[0]
                self.fallback = f"capture of width {width} failed: {type(exc).__name__}: {first}"
                return False
            self.graphs[key] = entry
        replay, outputs = entry
        for m in self.drawing:
            m.draw_step_inputs()
        replay()
        self._collect(step_no, outputs)
        self.captured_steps += 1
        return True

    def _load(self, img_idx, cap_idx, rel) -> None:
        pin = self.run.device.type == "cuda"
        for static, host in ((self.s_img, img_idx), (self.s_cap, cap_idx), (self.s_rel, rel)):
            if static is not None:
                static.copy_(host.pin_memory() if pin else host, non_blocking=pin)

    def _capture(self, width: int):
        run = self.run

        def body() -> dict:
            for m in self.drawing:  # the forward reads the draws made before the step
                m.from_drawn = True
            try:
                return step()
            finally:
                for m in self.drawing:
                    m.from_drawn = False

        def step() -> dict:
            run.opt.zero_grad(set_to_none=True)  # the capture allocates the gradients each replay rewrites
            feats = run.feats.index_select(0, self.s_img)
            tokens = self.tokens.index_select(0, self.s_cap)[:, :width]
            lengths = self.lengths.index_select(0, self.s_cap)
            loss, *_ = run.forward_loss(feats, tokens, lengths, self.s_rel, autocast_cache=False)
            run.apply_update(loss)
            out = {"train_loss": loss.detach()}
            for k, x in run.crit.diagnostics.items():
                if torch.is_tensor(x) and x.dim() == 0:
                    out[f"loss_{k}"] = x
                elif isinstance(x, (int, float)) and not isinstance(x, bool):
                    out[f"loss_{k}"] = float(x)
            return out

        return self.backend.capture(body)

    def _collect(self, step_no: int, outputs) -> None:
        e = self._epoch
        for k, x in outputs.items():
            if k == "train_loss":
                e.losses.append((step_no, x.clone()))
            elif torch.is_tensor(x):
                e.sums[k] = e.sums[k] + x.double() if k in e.sums else x.double().clone()
            else:
                e.sums[k] = e.sums.get(k, 0.0) + x
            e.counts[k] = e.counts.get(k, 0) + 1

    # -- the epoch's statistics -----------------------------------------------------------------------------
    def end_epoch(self) -> tuple[dict[str, float], dict[str, int]]:
        """The captured steps' sums and counts of this epoch; raises ``FloatingPointError`` at the first captured
        step whose loss is not finite (the eager step raises at once; here the epoch's values are read once)."""
        e, self._epoch = self._epoch, _EpochSums()
        sums = {k: float(v) for k, v in e.sums.items()}
        counts = dict(e.counts)
        if e.losses:
            values = torch.stack([x for _, x in e.losses]).double().cpu().numpy()
            bad = np.flatnonzero(~np.isfinite(values))
            if bad.size:
                c = self.run.config
                raise FloatingPointError(
                    f"non-finite loss {values[bad[0]]} at step {e.losses[bad[0]][0]} (loss={c.loss}, "
                    f"params={c.loss_params}; a captured step)"
                )
            sums["train_loss"] = float(values.sum())
            counts["train_loss"] = len(values)
        return sums, counts
