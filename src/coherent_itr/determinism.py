"""Seeding, device choice and whether a CUDA graph is being captured: same config and seed on CPU → identical
numbers."""

from __future__ import annotations

import os
import random

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
