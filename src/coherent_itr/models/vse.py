"""The VSE++ encoders shared by every paper's ablations (Faghri et al.; reference notes).

* Image: precomputed feature → L2-norm → Linear (Xavier init) → L2-norm.
* Text: word embedding (uniform ±0.1) → 1-layer GRU → state at the last real token →
  (Linear when the GRU size differs from the joint size) → L2-norm.

Similarity is the cosine ``s(V_i, T_j) = v_i·t_j`` of the normalised embeddings.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..determinism import capturing


class ImageEncoder(nn.Module):
    def __init__(self, feature_dim: int, embed_dim: int) -> None:
        super().__init__()
        self.fc = nn.Linear(feature_dim, embed_dim)
        r = math.sqrt(6.0) / math.sqrt(feature_dim + embed_dim)  # Xavier uniform, as VSE++
        nn.init.uniform_(self.fc.weight, -r, r)
        nn.init.zeros_(self.fc.bias)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.fc(F.normalize(features, dim=-1)), dim=-1)


class TextEncoder(nn.Module):
    def __init__(self, vocab_size: int, word_dim: int, hidden: int, embed_dim: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, word_dim, padding_idx=0)
        nn.init.uniform_(self.embed.weight, -0.1, 0.1)
        self.gru = nn.GRU(word_dim, hidden, num_layers=1, batch_first=True)
        self.proj = nn.Linear(hidden, embed_dim) if hidden != embed_dim else None

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Embeddings of ``tokens`` (n × T, 0-padded) whose real lengths are ``lengths`` (n, each ≥ 1).

        The GRU runs over the padded batch and the state after each caption's last real token is taken
        (a GRU is causal: the padding after a caption never reaches that state, nor its gradient). This
        is the packed-sequence result computed with fewer, larger operations (on a CPU cheaper than a
        packed sequence for batches of short captions; cuDNN takes it whole on a GPU)."""
        if not capturing():  # a captured batch's width is its longest caption's, on the host (cuda_graphs.width_bucket)
            lo, hi = int(lengths.min()), int(lengths.max())
            if lo < 1 or hi > tokens.shape[1]:
                raise ValueError(
                    f"caption lengths must lie in [1, {tokens.shape[1]}] (the padded width); got [{lo}, {hi}]"
                )
        out, _ = self.gru(self.embed(tokens))  # (n, T, hidden)
        out = out[torch.arange(out.shape[0], device=out.device), lengths.to(out.device) - 1]
        if self.proj is not None:
            out = self.proj(out)
        return F.normalize(out, dim=-1)


class VSEModel(nn.Module):
    """Image and text encoders into a joint space of size ``embed_dim``."""

    def __init__(
        self, feature_dim: int, vocab_size: int, embed_dim: int = 1024, word_dim: int = 300, text_hidden: int = 1024
    ) -> None:
        super().__init__()
        self.image = ImageEncoder(feature_dim, embed_dim)
        self.text = TextEncoder(vocab_size, word_dim, text_hidden, embed_dim)

    def forward(self, features, tokens, lengths):
        return self.image(features), self.text(tokens, lengths)
