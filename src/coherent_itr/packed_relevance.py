"""Relevance of a pack's batches (:mod:`coherent_itr.packed`): a provider that is a table — the oracle's matrix
(``TrueRelevance``), the synthetic world's true relevance (``SyntheticTrueRelevance``, whose ``matrix()`` equals its
``batch()`` entry for entry: tested) — is copied to the device once, and a pack's ``[E, B, B]`` batch is one gather
from its ``[E, B]`` image and caption indices; any other provider (Sentence-BERT, CIDEr-D: host arithmetic a device
product would not repeat bit for bit) is asked per member on the host and copied to the device as one tensor."""

from __future__ import annotations

import numpy as np
import torch

from .data.base import TrueRelevance
from .data.synthetic import SyntheticTrueRelevance

#: entries of a relevance table copied to the device at most (float32: 1 GiB)
MAX_TABLE_ENTRIES = 1 << 28


class DeviceRelevance:
    """A relevance table on the device: ``gather(img [E, B], cap [E, B])`` is the ``[E, B, B]`` batch, entry
    ``[e, i, j]`` = table[img[e, i], cap[e, j]] — what ``provider.batch(img[e], cap[e])`` returns, in one op."""

    def __init__(self, table: np.ndarray, device) -> None:
        self.table = torch.from_numpy(np.ascontiguousarray(table, dtype=np.float32)).to(device)

    def gather(self, img_idx: torch.Tensor, cap_idx: torch.Tensor) -> torch.Tensor:
        img = img_idx.to(self.table.device)
        cap = cap_idx.to(self.table.device)
        return self.table[img.unsqueeze(2), cap.unsqueeze(1)]


def device_relevance(provider, device) -> DeviceRelevance | None:
    """The provider's table on the device where it is one (the oracle's matrix, the synthetic world's true
    relevance; at most :data:`MAX_TABLE_ENTRIES` entries), else ``None``: the host path."""
    if not isinstance(provider, (TrueRelevance, SyntheticTrueRelevance)):
        return None
    split = getattr(provider, "split", None)
    if split is not None and split.n_images * split.n_captions > MAX_TABLE_ENTRIES:
        return None
    return DeviceRelevance(provider.matrix(), device)


def host_relevance(provider, img_idx: torch.Tensor, cap_idx: torch.Tensor, device) -> torch.Tensor:
    """The host path: ``provider.batch`` per member, copied to the device as one ``[E, B, B]`` tensor."""
    got = np.stack([provider.batch(i.numpy(), c.numpy()) for i, c in zip(img_idx, cap_idx)])
    return torch.as_tensor(got, dtype=torch.float32, device=device)
