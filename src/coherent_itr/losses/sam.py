"""Semantic Adaptive Margin (SAM), Biten et al. "Is An Image Worth Five Sentences?", SAM Eq. 7.

``rel`` is the SAM φ matrix: ``phi[i, j] = φ(G_i, c_j)``, the captioning metric (CIDEr-D) of
caption j of the batch against the reference captions ``G_i`` of image i (the references
include image i's own captions, so ``phi[i, i] = φ(G_i, c_i^+)``).

For the positive pair p (image i_p, caption c_p) one negative is sampled per direction:
a caption c_m for image→text and an image i_l (with its batch caption c_l) for text→image::

    L_SAM(p) = [α_i2t + ψ(i_p, c_m) − ψ(i_p, c_p)]_+ + [α_t2i + ψ(i_l, c_p) − ψ(i_p, c_p)]_+
    α = (φ(G_p, c_p^+) − φ(G_p, c_neg^-)) / τ                                   (Eq. 7)

with ψ = ``sim``. Choices, each a named option (paper first):

* ``margin_pairing="matched"`` (default): each hinge's margin uses *its own* negative —
  α_i2t from c_m, α_t2i from the negative image's caption c_l. Eq. 7 as printed writes α_i2t
  with c_l and α_t2i with c_m (the labels are swapped relative to the hinges), which contradicts
  the text ("assigns a unique margin value specific to each sampled pair"); the authors' code
  does the same crossing (``margin_s`` from the image-retrieval negative is added to the
  caption-retrieval cost). ``"crossed"`` reproduces Eq. 7 verbatim / the code.
* ``t2i_phi="anchor_refs"`` (default, Eq. 7 and the authors' code): the text→image margin scores
  the negative image's caption against the anchor's references, φ(G_p, c_l) = ``phi[p, l]``.
  ``"candidate_refs"`` uses the relevance of the negative image to the anchor caption,
  φ(G_l, c_p) = ``phi.T[p, l]`` — the library-wide ``rel.T`` convention.
* Margin clamps: the paper has none. The authors' code clamps above at 1 (``margin_max=1.0``)
  and has no lower clamp (margins can go negative when a negative scores above the positive);
  ``margin_min=0.0`` clamps below.
* Sampling (SAM Sec. 5.4, as the *paper* defines it): ``"HN"`` hard negative = the negative most
  similar to the anchor in the batch; ``"SN"`` soft negative = the *furthest* (least similar)
  negative; ``"RS"`` a uniformly random negative (seeded ``torch.Generator``). The authors' code
  inverts the names: its "soft" takes the 2nd-largest of ``s_ij − s_ii`` (≈ the hardest
  negative) and its "hard" the 2nd-smallest (≈ an easy negative). Paper default here: SN with
  τ = 3 (Table 4; the code's ``metric_div`` is 3 by default).
* ``keep_triplet``: add the plain VSE++ triplet loss (Eq. 6, hardest negatives, margin 0.2) —
  Tables 4–5 column T. ``weight`` multiplies L_SAM (the code uses 5 on top of CVSE; the paper
  gives no value, default 1).

Per-anchor hinges of both directions are reduced over anchors by ``sum`` (code) or ``mean``.

Two named variants: ``sam`` (:class:`SAMLoss`) is SAM *as written* — SN the furthest
negative, no clamp, weight 1, each hinge with its own negative's margin; ``sam_authors``
(:class:`SAMAuthorsLoss`) is SAM *as coded* — the code's "soft" near-hardest negative, margins crossed
and clamped at 1, weight 5, its text→image hinge indexed by the negative image.
Indices are sampled without gradient; φ is a label (no gradient).

``diagnostics``: mean margins per direction, the fraction of negative margins, the fraction of
active hinges, the mean similarity of the sampled negatives, the sampled indices
(``negatives_i2t[q]`` = caption sampled for image q, ``negatives_t2i[q]`` = image sampled for
caption q), and the triplet term's diagnostics when ``keep_triplet``.
"""

from __future__ import annotations

import torch

from ..determinism import capturing
from .base import ITRLoss, check_choice, check_range, off_diagonal_mask, reduce, stat
from .registry import register
from .triplet import TripletLoss

SAMPLINGS = ("RS", "HN", "SN")


def sample_negatives(
    sim: torch.Tensor, sampling: str, generator: torch.Generator | None, drawn: torch.Tensor | None = None
) -> torch.Tensor:
    """Index of one negative column j ≠ q for every anchor row q of ``sim`` (no gradient). ``"RS"`` draws
    ``randint(0, B − 1)`` per anchor from ``generator`` on the host, or takes ``drawn``, that draw made before
    the step (a captured step: :meth:`_SAMBase.draw_step_inputs`)."""
    b = sim.shape[0]
    with torch.no_grad():
        if sampling == "RS":
            r = drawn if drawn is not None else torch.randint(0, b - 1, (b,), generator=generator, device="cpu")
            r = r.to(sim.device)
            q = torch.arange(b, device=sim.device)
            return r + (r >= q).long()  # uniform over the b − 1 columns ≠ q
        neg = off_diagonal_mask(b, sim.device)
        if sampling == "HN":
            return sim.detach().masked_fill(~neg, float("-inf")).argmax(dim=1)
        return sim.detach().masked_fill(~neg, float("inf")).argmin(dim=1)  # SN: furthest


def _check_sam_args(owner: str, tau: float, sampling: str, weight: float, generator) -> None:
    """The argument checks both SAM variants share."""
    check_range(owner, "tau", tau, lo=0.0, lo_open=True)
    check_choice(owner, "sampling", sampling, SAMPLINGS)
    check_range(owner, "weight", weight, lo=0.0)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ValueError(f"{owner}: generator={generator!r} must be a torch.Generator or None")


def _check_phi(owner: str, phi: torch.Tensor) -> None:
    if not torch.isfinite(phi).all():
        raise ValueError(f"{owner}: rel (phi) contains NaN or infinite values")


def _phi(owner: str, rel: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """SAM's φ matrix (no gradient), refusing NaN or infinite relevance (while a CUDA graph is captured the host
    has checked it before copying it in: :meth:`_SAMBase.check_relevance`)."""
    phi = rel.detach().to(dtype)
    if not capturing():
        _check_phi(owner, phi)
    return phi


class _SAMBase(ITRLoss):
    """What SAM's two readings share: the relevance they need, the optional VSE++ Triplet-HN term
    (margin ``triplet_margin``, hardest negatives), the generator of their random negatives, and the
    diagnostics common to both."""

    requires_relevance = True

    def _setup(
        self, owner: str, tau, sampling, weight, keep_triplet, triplet_margin, reduction, seed, generator
    ) -> None:
        _check_sam_args(owner, tau, sampling, weight, generator)
        self.owner = owner
        self.tau, self.sampling, self.weight = float(tau), sampling, float(weight)
        self.keep_triplet = bool(keep_triplet)
        self.triplet = TripletLoss(margin=triplet_margin, max_violation=True, reduction=reduction)
        self.generator = generator if generator is not None else torch.Generator().manual_seed(int(seed))
        self._drawn: torch.Tensor | None = None  # RS: a captured step's two draws, made on the host before it
        self.from_drawn = False  # True inside a captured step: the forward reads ``_drawn`` instead of drawing

    @property
    def honours_warmup(self) -> bool:
        """Warm-up changes this loss only through its Triplet-HN term: the SAM term's own negative sampling
        does not read ``self.warmup``, so without ``keep_triplet`` the warm-up changes nothing."""
        return self.keep_triplet and self.triplet.honours_warmup

    capturable = True  # "RS": the host draws before each captured step (draw_step_inputs), in the eager order

    def init_step_inputs(self, batch: int, device) -> None:
        """Before any capture: the device buffer of a captured step's random negatives (``"RS"`` only)."""
        if self.sampling == "RS":
            self._drawn = torch.zeros(2, batch, dtype=torch.long, device=device)

    def draw_step_inputs(self) -> None:
        """Before a captured step: its ``"RS"`` draws — image→text, then text→image, as the eager forward makes
        them from the same generator — copied into the buffer the captured forward reads."""
        if self._drawn is None:
            return
        b = self._drawn.shape[1]
        r = torch.stack([torch.randint(0, b - 1, (b,), generator=self.generator, device="cpu") for _ in range(2)])
        pin = self._drawn.device.type == "cuda"
        self._drawn.copy_(r.pin_memory() if pin else r, non_blocking=pin)

    def _drawn_pair(self) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        if self.from_drawn and self._drawn is not None:
            return self._drawn[0], self._drawn[1]
        return None, None

    def check_relevance(self, rel: torch.Tensor) -> None:
        """The check :func:`_phi` makes, on the host, for a batch a captured step copies in."""
        _check_phi(self.owner, rel)

    def _with_triplet(self, loss: torch.Tensor, sim: torch.Tensor) -> torch.Tensor:
        """``loss`` plus the Triplet-HN term when ``keep_triplet``."""
        return loss + self.triplet(sim) if self.keep_triplet else loss

    def _record(self, margins, hinges, negatives, extra: dict) -> None:
        """``self.diagnostics`` from the (image→text, text→image) pairs of margins, hinges and sampled negative
        indices: mean margins, active hinge shares, the negatives, ``extra`` and the Triplet-HN term's own
        (prefixed ``triplet_``)."""
        (a_i2t, a_t2i), (h_i2t, h_t2i), (m_idx, l_idx) = margins, hinges, negatives
        with torch.no_grad():
            self.diagnostics = {
                "margin_mean_i2t": stat(a_i2t.mean()),
                "margin_mean_t2i": stat(a_t2i.mean()),
                **extra,
                "active_fraction_i2t": stat((h_i2t > 0).double().mean()),
                "active_fraction_t2i": stat((h_t2i > 0).double().mean()),
            }
            if not capturing():  # per-step index lists: an eager step's record only
                self.diagnostics.update(negatives_i2t=m_idx.tolist(), negatives_t2i=l_idx.tolist())
            if self.keep_triplet:
                self.diagnostics.update({f"triplet_{k}": v for k, v in self.triplet.diagnostics.items()})


@register("sam")
class SAMLoss(_SAMBase):
    """SAM (Eq. 7) with the paper's sampling definitions; see the module docstring for options."""

    def __init__(
        self,
        tau: float = 3.0,
        sampling: str = "SN",
        keep_triplet: bool = True,
        weight: float = 1.0,
        margin_min: float | None = None,
        margin_max: float | None = None,
        margin_pairing: str = "matched",
        t2i_phi: str = "anchor_refs",
        triplet_margin: float = 0.2,
        reduction: str = "sum",
        seed: int = 0,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        owner = "sam"
        if margin_min is not None and margin_max is not None and margin_min > margin_max:
            raise ValueError(f"{owner}: margin_min={margin_min} > margin_max={margin_max}; expected min ≤ max")
        check_choice(owner, "margin_pairing", margin_pairing, ("matched", "crossed"))
        check_choice(owner, "t2i_phi", t2i_phi, ("anchor_refs", "candidate_refs"))
        check_choice(owner, "reduction", reduction, ("sum", "mean"))
        self._setup(owner, tau, sampling, weight, keep_triplet, triplet_margin, reduction, seed, generator)
        self.margin_min = None if margin_min is None else float(margin_min)
        self.margin_max = None if margin_max is None else float(margin_max)
        self.margin_pairing, self.t2i_phi, self.reduction = margin_pairing, t2i_phi, reduction

    def _clamp(self, m: torch.Tensor) -> torch.Tensor:
        if self.margin_min is not None or self.margin_max is not None:
            m = m.clamp(min=self.margin_min, max=self.margin_max)
        return m

    def forward(self, sim: torch.Tensor, rel: torch.Tensor | None = None) -> torch.Tensor:
        self.check_inputs(sim, rel)
        phi = _phi("sam", rel, sim.dtype)
        b = sim.shape[0]
        q = torch.arange(b, device=sim.device)
        pos = sim.diagonal()
        m_drawn, l_drawn = self._drawn_pair()
        m_idx = sample_negatives(sim, self.sampling, self.generator, m_drawn)  # caption for image anchor q
        l_idx = sample_negatives(sim.T, self.sampling, self.generator, l_drawn)  # image for caption anchor q
        phi_pos = phi.diagonal()
        alpha_m = (phi_pos - phi[q, m_idx]) / self.tau  # margin of negative caption c_m
        if self.t2i_phi == "anchor_refs":
            alpha_l = (phi_pos - phi[q, l_idx]) / self.tau  # φ(G_q, c_l)
        else:
            alpha_l = (phi_pos - phi[l_idx, q]) / self.tau  # φ(G_l, c_q)
        if self.margin_pairing == "matched":
            a_i2t, a_t2i = alpha_m, alpha_l
        else:  # Eq. 7 verbatim / code
            a_i2t, a_t2i = alpha_l, alpha_m
        a_i2t, a_t2i = self._clamp(a_i2t), self._clamp(a_t2i)
        h_i2t = (a_i2t + sim[q, m_idx] - pos).clamp(min=0)
        h_t2i = (a_t2i + sim[l_idx, q] - pos).clamp(min=0)
        loss = self._with_triplet(self.weight * reduce(h_i2t + h_t2i, self.reduction), sim)
        with torch.no_grad():
            extra = {
                "negative_margin_fraction": stat(((a_i2t < 0).double().mean() + (a_t2i < 0).double().mean()) / 2),
                "sampled_negative_sim_mean": stat((sim[q, m_idx].mean() + sim[l_idx, q].mean()) / 2),
            }
        self._record((a_i2t, a_t2i), (h_i2t, h_t2i), (m_idx, l_idx), extra)
        return loss


def _code_rank_pick(
    values: torch.Tensor, sampling: str, generator: torch.Generator | None, drawn: torch.Tensor | None = None
) -> torch.Tensor:
    """Per row of ``values`` (diagonal included), the column the authors' code samples: "SN" (their
    "soft") the 2nd-largest value, "HN" (their "hard") the 2nd-smallest, "RS" uniform over columns ≠ row."""
    if sampling == "RS":
        return sample_negatives(values, "RS", generator, drawn)
    with torch.no_grad():
        return torch.topk(values.detach(), 2, dim=1, largest=(sampling == "SN")).indices[:, 1]


@register("sam_authors")
class SAMAuthorsLoss(_SAMBase):
    """SAM as the authors' public code computes it (``ContrastiveLossMetric``; reference-implementations
    notes) — the paper's text is :class:`SAMLoss`. Per anchor row q of ``sim`` (image q, caption q):

    * image→text: ``d[q, j] = s_qj − s_qq`` over *every* column j (the positive included, d = 0);
      ``m_q`` = the column with the 2nd-largest d (``sampling="SN"``, the code's "soft": the hardest
      negative when the positive is ranked first, else the 2nd-hardest item — possibly q itself), the
      2nd-smallest d (``"HN"``, the code's "hard": a nearly easiest negative) or a uniform j ≠ q (``"RS"``).
    * text→image, as coded: ``e[q, j] = s_qj − s_jj`` (caption j as anchor, image q as its negative) and
      ``l_q`` picked from row q of e by the same rule — the hinge is indexed by the *negative image* q.
    * margins crossed as in Eq. 7 / the code and clamped above at 1 (none below):
      ``a_i2t[q] = min(1, (φ_qq − φ_{q,l_q}) / τ)``, ``a_t2i[q] = min(1, (φ_qq − φ_{q,m_q}) / τ)``, with
      ``phi[i, j] = φ(G_i, c_j)``.
    * ``L = weight · Σ_q ([d[q, m_q] + a_i2t[q]]_+ + [e[q, l_q] + a_t2i[q]]_+)`` (+ the VSE++ triplet loss,
      hardest negatives, margin 0.2, sum, when ``keep_triplet``); the code weights SAM by 5 on top of its
      base loss (``weight=5.0``).

    When the sampled column is the anchor itself (possible for "SN" when a negative violates the positive),
    the hinge is ``[0 + 0]_+ = 0``, as in the code.
    """

    def __init__(
        self,
        tau: float = 3.0,
        sampling: str = "SN",
        keep_triplet: bool = True,
        weight: float = 5.0,
        margin_max: float = 1.0,
        triplet_margin: float = 0.2,
        seed: int = 0,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self._setup("sam_authors", tau, sampling, weight, keep_triplet, triplet_margin, "sum", seed, generator)
        self.margin_max = float(margin_max)

    def forward(self, sim: torch.Tensor, rel: torch.Tensor | None = None) -> torch.Tensor:
        self.check_inputs(sim, rel)
        phi = _phi("sam_authors", rel, sim.dtype)
        b = sim.shape[0]
        q = torch.arange(b, device=sim.device)
        pos = sim.diagonal()
        d = sim - pos[:, None]  # d[q, j] = s_qj − s_qq   (image→text)
        e = sim - pos[None, :]  # e[q, j] = s_qj − s_jj   (text→image, indexed by the image)
        m_drawn, l_drawn = self._drawn_pair()
        m_idx = _code_rank_pick(d, self.sampling, self.generator, m_drawn)
        l_idx = _code_rank_pick(e, self.sampling, self.generator, l_drawn)
        phi_pos = phi.diagonal()
        a_i2t = ((phi_pos - phi[q, l_idx]) / self.tau).clamp(max=self.margin_max)
        a_t2i = ((phi_pos - phi[q, m_idx]) / self.tau).clamp(max=self.margin_max)
        h_i2t = (d[q, m_idx] + a_i2t).clamp(min=0)
        h_t2i = (e[q, l_idx] + a_t2i).clamp(min=0)
        loss = self._with_triplet(self.weight * (h_i2t + h_t2i).sum(), sim)
        with torch.no_grad():
            clamped = ((a_i2t >= self.margin_max).double().mean() + (a_t2i >= self.margin_max).double().mean()) / 2
            extra = {
                "margin_clamped_fraction": stat(clamped),
                "self_sampled_fraction": stat(((m_idx == q).double().mean() + (l_idx == q).double().mean()) / 2),
            }
        self._record((a_i2t, a_t2i), (h_i2t, h_t2i), (m_idx, l_idx), extra)
        return loss
