"""Adaptive ladder levels with a fixed number of tensor operations: a standalone engine, not yet used by a loss.

:func:`adaptive_levels` returns exactly what
:func:`coherent_itr.losses.adaptive_ladder.adaptive_levels_torch` returns (the same int64 levels and chosen
number of levels, bit for bit on the CPU: ``tests/lib/test_kmeans1d.py``) for every row of ``values``: exact
1-D k-means of the row's sorted values for every k in [l_min, l_max] by dynamic programming over prefix sums,
the number of levels with the highest mean silhouette (first k on ties; a k is eligible only if the row has at
least k distinct values and k ≤ n − 1; a row with none keeps one level), its clusters ordered by decreasing
centroid as levels 1 … k.

The arithmetic of every element is the reference's, in the same order and dtypes (the DP table in
:data:`DP_DTYPE` from float64 prefix sums of the row-centred values, the silhouettes in float64), so the
minima, their first-index tie rule and hence every cluster boundary are the same. What differs is how the work
is laid out, so that the number of operations depends on l_max only, not on the number of rows or their
length n:

* the DP runs on all rows at once (the reference splits the CPU's rows into cache-sized chunks, each chunk
  repeating every operation); memory is rows·(n+1)² entries of :data:`DP_DTYPE`, twice;
* the backtracking of every k runs together: l_max − 1 gathers from the stacked argmin tables;
* the labels and the silhouettes of every candidate k are one rows × K × n computation (K = l_max − l_min + 1)
  instead of one per k, and the levels one gather instead of a loop over k.

Constant index tensors are cached per (n, l_min, l_max, device), like the reference's DP tables, so a
repeated call with the same shapes launches only the operations on the data.
"""

from __future__ import annotations

import torch

# the reference's prefix sums and the dtype of its DP tables, shared so the two cannot drift apart
from .losses.adaptive_ladder import DP_DTYPE, _prefix

_CACHE: dict = {}


def _constants(n: int, l_min: int, l_max: int, device) -> dict:
    """Index tensors that depend on the shapes only (cached)."""
    key = (n, l_min, l_max, str(device))
    if key in _CACHE:
        return _CACHE[key]
    idx = torch.arange(n + 1, device=device)
    diff = idx.view(-1, 1) - idx.view(1, -1)  # [b, a] = b − a
    ks = torch.arange(l_min, l_max + 1, device=device)  # candidate numbers of clusters
    steps = torch.arange(max(l_max - 1, 1), device=device)
    lev = ks.view(-1, 1) - 2 - steps.view(1, -1)  # back table read by candidate k at backtracking step s
    j = torch.arange(l_max, device=device)
    src = (ks.view(-1, 1) - 1 - j.view(1, -1)).clamp(min=0, max=steps.numel() - 1)  # step giving start j of k
    c = {
        # 1/(b − a) for a < b (else 0), and +∞ where a ≥ b, in DP_DTYPE, as the reference builds them
        "inv": torch.where(diff > 0, 1.0 / diff.clamp(min=1).to(DP_DTYPE), 0.0).to(DP_DTYPE),
        "bad": torch.zeros(n + 1, n + 1, dtype=DP_DTYPE, device=device).masked_fill_(diff <= 0, float("inf")),
        "ks": ks,
        # flat offset of table lev in the stacked tables (rows × (l_max − 1)·(n+1)), and whether the step moves
        "offset": lev.clamp(min=0) * (n + 1),
        "moves": lev >= 0,
        # starts[k][j] = the cut of step k − 1 − j for 1 ≤ j < k, 0 for j = 0, n (an empty cluster) for j ≥ k
        "src": src,
        "first": (j == 0).view(1, -1),
        "pad": j.view(1, -1) >= ks.view(-1, 1),
        "pos": torch.arange(n, device=device),
    }
    _CACHE[key] = c
    return c


def _back_tables(xs: torch.Tensor, l_max: int, c: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """Argmin tables of the DP for k = 2 … l_max, stacked rows × (l_max − 1) × (n+1), and the distinct count.

    The reference's recurrence (:func:`coherent_itr.losses.adaptive_ladder.exact_kmeans_1d_sorted`) with its
    operations in its order: ``t[r, b, a] = P2[a] + (P1[b] − P1[a])² / (b − a)`` (−∞ where a ≥ b), ``D_1[b] =
    P2[b] − t[b, 0]``, ``D_k[b] = P2[b] + min_a (D_{k−1}[a] − t[b, a])`` (first a on ties), +∞ at an end b
    that would cut between equal values; the last level only at b = n.
    """
    rows, n = xs.shape
    dev = xs.device
    p1, p2 = (p.to(DP_DTYPE) for p in _prefix(xs - xs.mean(dim=1, keepdim=True)))
    t = p1.unsqueeze(2) - p1.unsqueeze(1)
    t.square_().mul_(c["inv"]).add_(p2.unsqueeze(1)).sub_(c["bad"])
    cut_ok = torch.ones(rows, n + 1, dtype=torch.bool, device=dev)
    cut_ok[:, 1:n] = xs[:, 1:] > xs[:, :-1]
    bad_end = ~cut_ok
    d = (p2 - t[:, :, 0]).masked_fill(bad_end, float("inf"))
    back = []
    for k in range(2, l_max + 1):
        if k < l_max:
            m, arg = (d.unsqueeze(1) - t).min(dim=2)
            d = (p2 + m).masked_fill(bad_end, float("inf"))
        else:  # only b = n is read
            arg = torch.zeros(rows, n + 1, dtype=torch.long, device=dev)
            arg[:, n] = (d - t[:, n, :]).argmin(dim=1)
        back.append(arg)
    n_distinct = 1 + cut_ok[:, 1:n].sum(1)
    if not back:
        return xs.new_zeros(rows, 1, n + 1, dtype=torch.long), n_distinct
    return torch.stack(back, dim=1), n_distinct


def _starts(back: torch.Tensor, n: int, c: dict) -> torch.Tensor:
    """rows × K × l_max first sorted index of each cluster of every candidate k (ascending; n pads j ≥ k)."""
    rows = back.shape[0]
    flat = back.reshape(rows, -1)
    k_count, n_steps = c["offset"].shape
    cut = torch.full((rows, k_count), n, dtype=torch.long, device=back.device)
    cuts = []
    for s in range(n_steps):  # step s reads table k − 2 − s for every k that still has one
        nxt = flat.gather(1, cut + c["offset"][:, s])
        cut = torch.where(c["moves"][:, s], nxt, cut)
        cuts.append(cut)
    got = torch.stack(cuts, dim=2).gather(2, c["src"].unsqueeze(0).expand(rows, -1, -1))
    return got.masked_fill(c["first"], 0).masked_fill(c["pad"], n)


def _silhouettes(xs: torch.Tensor, starts: torch.Tensor, own: torch.Tensor, c: dict) -> torch.Tensor:
    """rows × K mean silhouettes, the reference's formula (``silhouette_1d_sorted``) for every k at once."""
    rows, n = xs.shape
    ends = torch.cat([starts[:, :, 1:], torch.full_like(starts[:, :, :1], n)], dim=2)
    p1, _ = _prefix(xs)
    p1k = p1.unsqueeze(1).expand(-1, starts.shape[1], -1)
    size = (ends - starts).to(xs.dtype)
    mu = (p1k.gather(2, ends) - p1k.gather(2, starts)) / size.clamp(min=1)
    a_idx, b_idx = starts.gather(2, own), ends.gather(2, own)
    pos = c["pos"].view(1, 1, n)
    x = xs.unsqueeze(1)
    intra = (
        (pos - a_idx) * x
        - (p1[:, :n].unsqueeze(1) - p1k.gather(2, a_idx))
        + (p1k.gather(2, b_idx) - p1[:, 1:].unsqueeze(1))
        - (b_idx - pos - 1) * x
    )
    own_size = (b_idx - a_idx).to(xs.dtype)
    a_val = intra / (own_size - 1).clamp(min=1)
    k_top = starts.shape[2] - 1
    k_last = (c["ks"] - 1).view(1, -1, 1)
    below = torch.where(own > 0, x - mu.gather(2, (own - 1).clamp(min=0)), float("inf"))
    above = torch.where(own < k_last, mu.gather(2, (own + 1).clamp(max=k_top)) - x, float("inf"))
    b_val = torch.minimum(below, above)
    denom = torch.maximum(a_val, b_val)
    sil = torch.where(denom > 0, (b_val - a_val) / denom.clamp(min=torch.finfo(xs.dtype).tiny), 0.0)
    sil = torch.where(own_size > 1, sil, 0.0)
    return sil.reshape(-1, n).mean(dim=1).view(rows, -1)


def adaptive_levels(values: torch.Tensor, l_min: int, l_max: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Levels (1 = most relevant) and the chosen number of levels for every row of ``values``.

    ``values``: rows × n relevance of the non-positive candidates. Returns ``(level, k)``: ``level`` rows × n
    int64 in 1 … k_row (in the order of ``values``) and ``k`` rows int64, equal to ``adaptive_levels_torch``'s.
    """
    if not 1 <= l_min <= l_max:
        raise ValueError(f"need 1 <= l_min <= l_max, got ({l_min}, {l_max})")
    rows, n = values.shape
    xs, order = values.detach().to(torch.float64).sort(dim=1)
    if l_max == 1:
        return torch.ones_like(order), torch.ones(rows, dtype=torch.long, device=xs.device)
    c = _constants(n, l_min, l_max, xs.device)
    back, n_distinct = _back_tables(xs, l_max, c)
    starts = _starts(back, n, c)  # rows × K × l_max
    elig = (n_distinct.unsqueeze(1) >= c["ks"]) & (c["ks"] <= n - 1)
    own = (c["pos"].view(1, 1, -1, 1) >= starts[:, :, 1:].unsqueeze(2)).sum(-1)  # rows × K × n, 0 = lowest
    if l_min == l_max:
        best = torch.where(elig[:, 0], l_max, 1)
    else:
        scores = _silhouettes(xs, starts, own, c).masked_fill(~elig, float("-inf"))
        best = c["ks"][scores.argmax(dim=1)]  # first max on ties
        best = torch.where(elig.any(dim=1), best, 1)
    pick = (best - l_min).clamp(min=0).view(rows, 1, 1).expand(-1, 1, n)
    label = own.gather(1, pick).squeeze(1)
    seg = torch.where(best.unsqueeze(1) >= 2, best.unsqueeze(1) - label, 1)
    level = torch.empty_like(seg).scatter_(1, order, seg)
    return level, best
