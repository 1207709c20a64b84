"""Caption embedding in checkpointed batches (coherent_itr.data.sbert): the same bits as one
``SentenceTransformer.encode`` call, and an interrupted embedding resumes from its last checkpoint."""

from __future__ import annotations

import numpy as np
import pytest

from coherent_itr.data import sbert


def _captions(n: int, seed: int = 0) -> list[str]:
    """Distinct captions of varied length (ties in length included), as the data sets have."""
    rng = np.random.default_rng(seed)
    words = ["a", "dog", "runs", "on", "the", "grass", "two", "children", "play", "near", "water", "red", "ball"]
    return sorted({" ".join(rng.choice(words, size=rng.integers(3, 14))) + f" {k}" for k in range(n)})


def test_batches_in_encode_order_give_the_one_call_embeddings_bit_for_bit():
    """The real model: 700 captions in batches of 64, one call against one batch per call."""
    texts = _captions(700)
    one_call = sbert._encode(texts, 64, False)
    batched = sbert._encode_resumable(texts, 64, False, None)
    np.testing.assert_array_equal(one_call, batched)


def _fake_encode(calls: list, fail_at: int | None = None):
    def encode(texts, batch_size, progress):
        calls.append(len(texts))
        if fail_at is not None and len(calls) == fail_at:
            raise KeyboardInterrupt
        return np.stack([np.full(4, float(len(t)), dtype=np.float32) + np.float32(hash(t) % 97) for t in texts])

    return encode


def test_an_interrupted_embedding_resumes_from_its_last_checkpoint(tmp_path, monkeypatch):
    monkeypatch.setattr(sbert, "CHECKPOINT_BATCHES", 2)
    texts = _captions(100)
    partial = tmp_path / "x.partial.npz"
    calls: list = []
    monkeypatch.setattr(sbert, "_encode", _fake_encode(calls, fail_at=6))  # 10 batches of 10
    with pytest.raises(KeyboardInterrupt):
        sbert._encode_resumable(texts, 10, False, partial)
    assert partial.exists()  # checkpoints after batches 2 and 4
    calls.clear()
    monkeypatch.setattr(sbert, "_encode", _fake_encode(calls))
    resumed = sbert._encode_resumable(texts, 10, False, partial)
    assert len(calls) == 6  # batches 5-10, not 1-10
    calls.clear()
    whole = sbert._encode_resumable(texts, 10, False, None)
    np.testing.assert_array_equal(resumed, whole)


@pytest.mark.parametrize("other", ["captions", "batch_size", "corrupt"])
def test_a_checkpoint_of_other_captions_or_batches_is_not_used(tmp_path, monkeypatch, other):
    monkeypatch.setattr(sbert, "CHECKPOINT_BATCHES", 1)
    partial = tmp_path / "x.partial.npz"
    calls: list = []
    monkeypatch.setattr(sbert, "_encode", _fake_encode(calls, fail_at=3))
    with pytest.raises(KeyboardInterrupt):
        sbert._encode_resumable(_captions(50, seed=1 if other == "captions" else 0), 10, False, partial)
    if other == "corrupt":
        partial.write_bytes(b"not an npz")
    calls.clear()
    monkeypatch.setattr(sbert, "_encode", _fake_encode(calls))
    sbert._encode_resumable(_captions(50), 5 if other == "batch_size" else 10, False, partial)
    assert sum(calls) == 50  # every caption embedded again


def test_the_cache_keeps_no_checkpoint_once_the_embedding_is_complete(tmp_path, monkeypatch):
    monkeypatch.setattr(sbert, "CHECKPOINT_BATCHES", 1)
    monkeypatch.setattr(sbert, "_encode", _fake_encode([]))
    monkeypatch.setattr(sbert, "model_id", lambda cache_dir=None: "fake-model")
    emb = sbert.embed_captions(_captions(30), cache_dir=str(tmp_path), batch_size=8, progress=False)
    assert emb.shape == (30, 4)
    folder = tmp_path / "sbert" / "fake-model"
    assert [p.name for p in folder.iterdir() if p.name.endswith(".partial.npz")] == []
    assert len(list(folder.glob("*.npz"))) == 1
