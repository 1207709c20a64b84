"""Caption tokenisation and a vocabulary built from *training* captions only.

VSE++ tokenises with NLTK's word tokenizer, lower-cases, wraps captions in ``<start>``/``<end>``
and keeps words seen at least 4 times. We use an equivalent regex tokenizer (words, numbers with
inner apostrophes, and single punctuation marks) so NLTK's data files are not needed. The
released VSE++ vocabulary was built on all splits, leaking test words; ours never sees them.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Iterable, Sequence

import torch

_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?|[^\sa-z0-9]")
PAD, START, END, UNK = "<pad>", "<start>", "<end>", "<unk>"


def tokenize(caption: str) -> list[str]:
    """Lower-cased word and punctuation tokens of ``caption``."""
    return _TOKEN.findall(caption.lower())


class Vocabulary:
    """Word ↔ index map with ``<pad>``=0, ``<start>``, ``<end>``, ``<unk>``."""

    def __init__(self, words: Sequence[str]) -> None:
        self.itos = [PAD, START, END, UNK] + [w for w in words if w not in (PAD, START, END, UNK)]
        self.stoi = {w: i for i, w in enumerate(self.itos)}

    @classmethod
    def build(cls, captions: Iterable[str], min_count: int = 4) -> "Vocabulary":
        """Vocabulary of the words occurring ≥ ``min_count`` times in ``captions`` (sorted for determinism)."""
        counts = Counter(tok for c in captions for tok in tokenize(c))
        return cls(sorted(w for w, n in counts.items() if n >= min_count))

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, caption: str) -> list[int]:
        unk = self.stoi[UNK]
        return [self.stoi[START]] + [self.stoi.get(t, unk) for t in tokenize(caption)] + [self.stoi[END]]

    def encode_batch(self, captions: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Padded (n, max_len) LongTensor of token ids and the (n,) lengths, on the CPU (whatever the
        default device): callers move the ids to the model's device; the lengths index on the host."""
        ids = [self.encode(c) for c in captions]
        lengths = torch.tensor([len(x) for x in ids], dtype=torch.long, device="cpu")
        out = torch.zeros(len(ids), int(lengths.max()) if ids else 0, dtype=torch.long, device="cpu")
        for i, x in enumerate(ids):
            out[i, : len(x)] = torch.tensor(x, dtype=torch.long, device="cpu")
        return out, lengths
