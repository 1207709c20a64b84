"""CUDA-ready code, tested without a GPU. While ``torch.set_default_device("meta")`` is in force, a tensor created
without an explicit device lands on ``meta`` and any operation mixing it with the CPU inputs fails (or, for
indices, leaves a meta tensor that the next CPU operation refuses). So every loss the study trains (built,
forward and backward, with the study's parameters), a training epoch and the validation that selects the
checkpoint run here on CPU inputs under that default: whatever they create takes its device from their inputs,
as it must for CUDA inputs."""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pytest
import torch

from coherent_itr import data as data_mod
from coherent_itr import losses
from coherent_itr import train as train_mod
from coherent_itr.config import Config
from reproduce.spec import experiments


@contextmanager
def default_device_meta():
    torch.set_default_device("meta")
    try:
        yield
    finally:
        torch.set_default_device(None)


def test_the_meta_default_catches_a_tensor_created_without_a_device():
    x = torch.ones(3)
    with default_device_meta(), pytest.raises(RuntimeError, match="meta"):
        _ = x + torch.zeros(3)
    with default_device_meta():
        assert (x + torch.zeros(3, device=x.device)).device.type == "cpu"
    assert torch.zeros(1).device.type == "cpu"  # the default is restored


STUDY_LOSSES = experiments.study_losses()


def test_every_registered_loss_is_covered():
    assert {loss for loss, _ in STUDY_LOSSES} == set(losses.available())
    assert len(STUDY_LOSSES) > 50  # the study's sweeps, not only the defaults


@pytest.mark.parametrize("loss, params", STUDY_LOSSES, ids=[f"{n}-{k}" for k, (n, _) in enumerate(STUDY_LOSSES)])
def test_loss_forward_and_backward_create_nothing_off_their_inputs_device(loss, params):
    g = torch.Generator().manual_seed(0)
    b = 24
    sim = (torch.randn(b, b, generator=g) * 0.3).clamp(-1, 1).requires_grad_()
    rel = torch.rand(b, b, generator=g)
    rel.fill_diagonal_(1.0)
    with default_device_meta():
        crit = losses.build(loss, **params)
        value = crit(sim, rel if getattr(crit, "requires_relevance", False) else None)
        value.backward()
    assert value.device.type == "cpu" and torch.isfinite(value)
    assert sim.grad is not None and sim.grad.device.type == "cpu" and torch.isfinite(sim.grad).all()


@pytest.mark.parametrize("sampling, bf16", [("captions", False), ("images", True)])
def test_a_training_epoch_and_validation_under_the_meta_default_match_the_plain_run(sampling, bf16):
    splits = data_mod.load_splits("toy", scale="smoke")
    cfg = Config(
        data="toy", data_scale="smoke", loss="listwise", relevance="true", embed_dim=16, word_dim=8, text_hidden=8,
        batch_size=32, epochs=1, device="cpu", sampling=sampling, bf16=bf16, grad_diag_every=1, vocab_min_count=1,
    )  # fmt: skip
    results = []
    for meta in (False, True):
        run = train_mod._setup(cfg, splits, None)  # data and model built on the CPU, as for a CUDA run
        with default_device_meta() if meta else contextmanager(lambda: (yield))():
            stats = train_mod._train_epoch(run, 0)
            val = train_mod._validate(run)
            img, cap = train_mod.encode_split(run.model, splits.test, run.vocab, run.device)
        assert all(p.device.type == "cpu" for p in run.model.parameters())
        results.append((stats, val, img, cap, run.iterations))
    (s0, v0, i0, c0, it0), (s1, v1, i1, c1, it1) = results
    assert s0["n_steps"] >= 3 and s0 == s1 and it0 == it1
    assert v0.keys() == v1.keys() and all(v0[k] == v1[k] or (np.isnan(v0[k]) and np.isnan(v1[k])) for k in v0)
    np.testing.assert_array_equal(i0, i1)
    np.testing.assert_array_equal(c0, c1)
