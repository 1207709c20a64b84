"""Seeding, device choice, the CPU and whether a CUDA graph is being captured: same config and seed on the same
CPU → identical numbers."""

from __future__ import annotations

import os
import platform
import random
import re
from functools import lru_cache

import numpy as np
import torch


def seed_everything(seed: int) -> torch.Generator:
    """Seed python, numpy and torch; return a torch CPU generator seeded with ``seed`` for sampling."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def use_deterministic_kernels() -> None:
    """Ask torch for deterministic kernels (CUDA needs the cuBLAS workspace setting).

    Deterministic mode also fills every new ``torch.empty`` with NaN by default (a guard against
    reading uninitialised memory); nothing here reads memory it did not write, so the fill is switched
    off: the fill costs time on every training step, and the numbers do not change without it
    (``tests/lib/test_foundation.py``)."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = False
    torch.backends.cudnn.benchmark = False


def resolve_device(device: str = "auto") -> torch.device:
    """``"auto"`` → CUDA when available, else CPU; ``"cuda"`` without a GPU raises ``ValueError``."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' requested but no CUDA device is available; use device='auto' or 'cpu'")
    if device not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {device!r}")
    return torch.device(device)


def capturing() -> bool:
    """True while the current CUDA stream is capturing a graph (:mod:`coherent_itr.cuda_graphs`); always False
    without CUDA. Code on the training step reads no device value on the host while it is (a capture forbids it)."""
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


# The CPU whose runs keep the keys they had before a CPU run's key named its CPU: that of the committed run archive
# (results/runs/). Runs on any other CPU get keys of their own (:func:`coherent_itr.runs.device_numerics`), and data
# computed on any other CPU cache folders of their own (:func:`cpu_tag`).
REFERENCE_CPU = "AuthenticAMD/AVX2"


@lru_cache(maxsize=1)
def cpu_identity() -> str:
    """The CPU's vendor and the instruction set of torch's CPU kernels on it (``torch.backends.cpu.
    get_cpu_capability()``; ``$ATEN_CPU_CAPABILITY`` can lower it), e.g. ``"AuthenticAMD/AVX2"`` or
    ``"GenuineIntel/AVX512"``. A run's float32 numbers depend on it: one synthetic run of 5 epochs reached validation
    RSUM 115.72 with the AVX2 kernels and 119.04 with the DEFAULT ones, on one machine. The vendor is
    ``/proc/cpuinfo``'s ``vendor_id`` (the math libraries choose code paths by vendor too), else the machine type."""
    vendor = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    vendor = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{vendor or platform.machine() or 'unknown'}/{torch.backends.cpu.get_cpu_capability()}"


def cpu_tag() -> str:
    """The suffix of the cache names of data this CPU computes with float32 kernels (image features, caption
    embeddings, and what is cached from them): ``""`` on :data:`REFERENCE_CPU` (its caches keep their names),
    ``"@GenuineIntel-AVX512"`` and the like elsewhere. Such data differ between CPUs in their last bits, as runs do;
    a run's key names its CPU (:func:`coherent_itr.runs.device_numerics`), so the data it trains on must be this
    CPU's too. Without the tag, a cache shared by machines of two CPUs (a cluster's) would serve one CPU's features
    to the other's runs under keys that name the other CPU."""
    cpu = cpu_identity()
    return "" if cpu == REFERENCE_CPU else "@" + re.sub(r"[^A-Za-z0-9_.]+", "-", cpu)
