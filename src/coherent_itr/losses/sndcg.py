"""Smooth-NDCG listwise loss of "Integrating Listwise Ranking into Pairwise-based Image-Text
Retrieval" (Listwise paper Eqs. 9–21).

For query image V_i (row i of ``sim``) and relevance ``r[i, j] ∈ [0, 1]`` of caption j (the RSC
score, Eq. 8, diagonal included):

* DCG (Eq. 9): ``Σ_j (2^{r_ij} − 1) / log2(1 + π_ij)`` over the whole batch (no cut-off), with the
  hard rank ``π_ij = 1 + Σ_{k≠j} 1{s_ij − s_ik < 0}`` (Eq. 10).
* IDCG (Eqs. 12–13): the same sum with the ideal rank ``π*_ij = 1 + Σ_{k≠j} 1{r_ij − r_ik < 0}``
  — tied relevances *share* the best rank among them ("competition" ranks 1, 2, 2, 4), exactly
  as Eq. 13 reads (and the authors' code). ``idcg="sorted"`` uses the textbook IDCG instead
  (gains sorted decreasingly at positions 1…N, as ``sklearn.metrics.ndcg_score``); the two agree
  when the row has no tied relevances, and with ties the paper's IDCG is larger (NDCG < 1 is
  then possible even for a perfect ranking).
* Smooth rank (Eq. 16): ``R_ij = 1 + Σ_{k≠j} σ((s_ik − s_ij)/τ)``. Eq. 16 as printed has
  ``σ(s_ij − s_ik)``, the opposite sign of Eq. 10's indicator ``1{s_ij − s_ik < 0} = H(s_ik − s_ij)``;
  the sign here follows Eq. 10 (with the printed sign the best item would get the worst rank).
  The sigmoid's argument is clamped to ±``clamp`` (50, as the authors' code; gradient 0 beyond
  it). Values and gradients stay finite in float32 for τ down to 1e-4. In float32 with
  clamp > 32 the clamp is a no-op to within eps² (see :func:`clamp_is_negligible`) and is
  skipped for speed; float64, or a smaller clamp, applies it exactly.
* NDCG-hat = DCG-hat / IDCG (Eq. 18); ``L = (1/N) Σ_i (1 − NDCG-hat_i)`` per direction
  (Eqs. 20–21), image→text plus text→image (Eq. 19). Text→image ranks images for caption i by
  ``sim[:, i]`` with relevance ``r[:, i]`` — i.e. ``sim.T`` and ``rel.T``. The authors' code reuses
  the untransposed ``r`` there (a bug, irrelevant only when r is symmetric); ``t2i_rel=
  "untransposed"`` reproduces it.
* A row whose gains are all 0 (IDCG = 0) has no ranking to learn: its loss term is 0.

Memory: the smooth ranks need a B×B×B tensor of sigmoids. They are computed in chunks of query
rows inside a custom autograd function whose backward recomputes the sigmoids chunk by chunk
(closed-form gradient, tested against autograd through a loop reference), so peak memory is
``chunk_rows · B² · peak_bytes_per_element(dtype)`` regardless of B — ≤ ``max_chunk_mb`` (default
256 MiB; B = 512 in float32 → 64 rows per chunk, float64 → 32). When one chunk holds the whole
batch (B ≤ 256 in float32 by default) the forward keeps the sigmoid derivatives instead of
recomputing them.
"""

from __future__ import annotations

import math

import torch

from .base import ITRLoss, capturing, check_choice, check_range, stat
from .registry import register

LN2 = math.log(2.0)


def peak_bytes_per_element(dtype: torch.dtype) -> int:
    """Upper bound on bytes alive per element of a chunk's rows×B×B tensors: at most three float
    temporaries (difference, sigmoid, its derivative) and one bool mask at any time; 4 floats."""
    return 4 * torch.finfo(dtype).bits // 8


def chunk_rows_for(b: int, dtype: torch.dtype, max_chunk_mb: float) -> int:
    """Rows per chunk so that ``rows · b² · peak_bytes_per_element`` ≤ ``max_chunk_mb`` MiB (≥ 1)."""
    per_row = b * b * peak_bytes_per_element(dtype)
    return max(1, min(b, int(max_chunk_mb * 2**20) // per_row))


def clamp_is_negligible(clamp: float, dtype: torch.dtype) -> bool:
    """True when clamping the sigmoid's argument at ±clamp changes σ and σ' by less than eps²
    of the dtype (e^{−clamp} < eps²: float32 for clamp > 32, float64 for clamp > 72). Then the
    clamp and its gradient mask are skipped: σ is stable for any argument, and the omitted
    differences (< e^{−clamp} per pair) are below what sums of O(eps) terms can represent."""
    return math.exp(-clamp) < torch.finfo(dtype).eps ** 2


def _chunk_sigmoids(s: torch.Tensor, tau: float, clamp: float, with_grad: bool):
    """For rows s (c×B): sig[c, j, k] = σ(clamp((s_k − s_j)/τ)) with the diagonal j = k zeroed,
    and, if asked, dsig = σ'·1{inside the clamp}, so that ∂sig/∂s_k = −∂sig/∂s_j = dsig/τ
    (0 beyond the clamp, as autograd through the clamp, and on the diagonal)."""
    st = (s / tau).contiguous()  # rows of sim.T are strided: copy them once
    x = st.unsqueeze(1) - st.unsqueeze(2)  # x[c, j, k] = (s_k − s_j)/τ
    exact = not clamp_is_negligible(clamp, s.dtype)
    sig = torch.sigmoid(x.clamp(-clamp, clamp) if exact else x)
    sig.diagonal(dim1=1, dim2=2).zero_()
    if not with_grad:
        return sig, None
    outside = (x.abs_() > clamp) if exact else None
    del x
    dsig = torch.addcmul(sig, sig, sig, value=-1.0)  # σ − σ² = σ(1 − σ); diagonal 0
    if exact:
        dsig.masked_fill_(outside, 0.0)
    return sig, dsig


def _dcg_grad(
    grad_out: torch.Tensor, gains: torch.Tensor, rank: torch.Tensor, dsig: torch.Tensor, tau: float
) -> torch.Tensor:
    """Gradient of Σ_i grad_out_i · DCG-hat_i w.r.t. the rows' similarities (closed form).

    ∂DCG_i/∂R_ij = −g_ij / ((1 + R_ij) · ln2 · log2(1 + R_ij)²); R_ij depends on s_ik through
    +dsig_ijk/τ (k ≠ j) and on s_ij through −Σ_k dsig_ijk/τ.
    """
    lg = torch.log2(1.0 + rank)
    g = grad_out.unsqueeze(1) * (-gains / ((1.0 + rank) * LN2 * lg * lg))
    return (torch.bmm(g.unsqueeze(1), dsig).squeeze(1) - g * dsig.sum(dim=2)) / tau


class _SmoothDCG(torch.autograd.Function):
    """DCG-hat of every row (Eq. 17) with smooth ranks (Eq. 16), chunked forward and backward.

    When the whole batch fits in one chunk the forward keeps the sigmoid derivatives for the
    backward (one B×B×B tensor, within the same memory bound); otherwise the backward
    recomputes them chunk by chunk."""

    @staticmethod
    def forward(ctx, sim, gains, tau, clamp, chunk):
        b = sim.shape[0]
        keep = ctx.needs_input_grad[0] and chunk >= b
        out = sim.new_empty(b)
        for r0 in range(0, b, chunk):
            sig, dsig = _chunk_sigmoids(sim[r0 : r0 + chunk], tau, clamp, with_grad=keep)
            rank = 1.0 + sig.sum(dim=2)
            del sig
            out[r0 : r0 + chunk] = (gains[r0 : r0 + chunk] / torch.log2(1.0 + rank)).sum(dim=1)
        if keep:
            ctx.save_for_backward(gains, rank, dsig)
        else:
            ctx.save_for_backward(sim, gains)
        ctx.keep, ctx.tau, ctx.clamp, ctx.chunk = keep, tau, clamp, chunk
        return out

    @staticmethod
    def backward(ctx, grad_out):
        if ctx.keep:
            gains, rank, dsig = ctx.saved_tensors
            return _dcg_grad(grad_out, gains, rank, dsig, ctx.tau), None, None, None, None
        sim, gains = ctx.saved_tensors
        grad = torch.zeros_like(sim)
        for r0 in range(0, sim.shape[0], ctx.chunk):
            sl = slice(r0, r0 + ctx.chunk)
            sig, dsig = _chunk_sigmoids(sim[sl], ctx.tau, ctx.clamp, with_grad=True)
            rank = 1.0 + sig.sum(dim=2)
            del sig
            grad[sl] = _dcg_grad(grad_out[sl], gains[sl], rank, dsig, ctx.tau)
        return grad, None, None, None, None


def ideal_dcg(gains: torch.Tensor, rel: torch.Tensor, mode: str) -> torch.Tensor:
    """IDCG per row: Eq. 12–13 (ties share the best rank) or the sorted textbook IDCG."""
    n = rel.shape[1]
    if mode == "paper":
        return (gains / torch.log2(1.0 + hard_ranks(rel))).sum(dim=1)
    pos = torch.arange(1, n + 1, device=rel.device, dtype=gains.dtype)
    return (gains.sort(dim=1, descending=True).values / torch.log2(1.0 + pos)).sum(dim=1)


def hard_ranks(x: torch.Tensor) -> torch.Tensor:
    """``1 + #{k : x_ik > x_ij}`` per entry (Eqs. 10 and 13; ties share the best rank), O(B² log B)."""
    srt = x.sort(dim=1).values.contiguous()
    greater = x.shape[1] - torch.searchsorted(srt, x.contiguous(), right=True)
    return (1 + greater).to(x.dtype if x.is_floating_point() else torch.float64)


@register("sndcg")
class SmoothNDCGLoss(ITRLoss):
    """Smooth-NDCG (Listwise Eqs. 9–21); ``rel`` in [0, 1] (RSC, Eq. 8).

    ``tau``: sigmoid temperature (paper 0.01). ``clamp``: bound on the sigmoid argument (50).
    ``idcg``: ``"paper"`` (Eq. 13, ties share a rank) or ``"sorted"``. ``t2i_rel``:
    ``"transposed"`` (correct) or ``"untransposed"`` (authors' code). ``max_chunk_mb``: memory
    budget of the B×B×B work per chunk (see module docstring).
    """

    requires_relevance = True
    capturable = True

    def __init__(
        self,
        tau: float = 0.01,
        clamp: float = 50.0,
        idcg: str = "paper",
        t2i_rel: str = "transposed",
        max_chunk_mb: float = 256.0,
    ) -> None:
        super().__init__()
        owner = "sndcg"
        check_range(owner, "tau", tau, lo=0.0, lo_open=True)
        check_range(owner, "clamp", clamp, lo=0.0, lo_open=True)
        check_choice(owner, "idcg", idcg, ("paper", "sorted"))
        check_choice(owner, "t2i_rel", t2i_rel, ("transposed", "untransposed"))
        check_range(owner, "max_chunk_mb", max_chunk_mb, lo=0.0, lo_open=True)
        self.tau, self.clamp, self.idcg, self.t2i_rel = float(tau), float(clamp), idcg, t2i_rel
        self.max_chunk_mb = float(max_chunk_mb)

    def _direction(self, sim: torch.Tensor, rel: torch.Tensor, chunk: int):
        gains = torch.pow(2.0, rel) - 1.0
        idcg = ideal_dcg(gains, rel, self.idcg)
        ok = idcg > 0
        safe = torch.where(ok, idcg, 1.0)
        dcg_hat = _SmoothDCG.apply(sim, gains, self.tau, self.clamp, chunk)
        ndcg_hat = torch.where(ok, dcg_hat / safe, 1.0)
        with torch.no_grad():
            dcg = (gains / torch.log2(1.0 + hard_ranks(sim.detach()))).sum(dim=1)
            ndcg = torch.where(ok, dcg / safe, 1.0)
        return (1.0 - ndcg_hat).mean(), ndcg_hat.detach(), ndcg

    @staticmethod
    def check_relevance(rel: torch.Tensor) -> None:
        """Raise unless every relevance score is finite and in [0, 1] up to 1e-6 (RSC scores, Listwise Eq. 8)."""
        if not torch.isfinite(rel).all() or rel.min() < -1e-6 or rel.max() > 1 + 1e-6:
            lo, hi = float(rel.min()), float(rel.max())
            raise ValueError(
                f"sndcg: rel must be finite and in [0, 1] up to 1e-6 (RSC scores, Listwise Eq. 8); got range "
                f"[{lo!r}, {hi!r}] (all finite: {bool(torch.isfinite(rel).all())})"
            )

    def forward(self, sim: torch.Tensor, rel: torch.Tensor | None = None) -> torch.Tensor:
        self.check_inputs(sim, rel)
        rel = rel.detach().to(sim.dtype)
        if not capturing():  # a captured step's relevance is checked on the host before it is copied in
            self.check_relevance(rel)
        rel = rel.clamp(0.0, 1.0)
        chunk = chunk_rows_for(sim.shape[0], sim.dtype, self.max_chunk_mb)
        l_i2t, nh_i2t, n_i2t = self._direction(sim, rel, chunk)
        rel_t = rel.T if self.t2i_rel == "transposed" else rel
        l_t2i, nh_t2i, n_t2i = self._direction(sim.T, rel_t, chunk)
        self.diagnostics = {
            "ndcg_hat_i2t": stat(nh_i2t.mean()),
            "ndcg_i2t": stat(n_i2t.mean()),
            "ndcg_hat_t2i": stat(nh_t2i.mean()),
            "ndcg_t2i": stat(n_t2i.mean()),
            "chunk_rows": chunk,
            "n_chunks": -(-sim.shape[0] // chunk),
        }
        return l_i2t + l_t2i
