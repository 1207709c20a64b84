"""Coherence: the Coherent Score CS@K (ladder Sec. III-D, Eq. 13) and Kendall τ as BCLS Table VI
uses it (BCLS Eq. 2).

**CS@K.** For each query, take the model's top-K candidates (ranked by decreasing similarity,
ties by the package's pessimistic rule, see :mod:`._blocks`), and compute Kendall's τ-b between
the model's scores of those K candidates and their relevance degrees (Eq. 13: ties in either
list count as ties, not as concordant or discordant pairs). CS@K is the mean over queries, for
image→text and text→image separately. K ≥ the number of candidates means the whole list.

*Candidates.* By default (``candidates="all"``) every caption is a candidate for an image
query (5 per image) and every image for a caption query — the paper's text ("all top-N
candidates"). ``candidates="one_per_image"`` reproduces the authors' code: one caption per
image (the first caption of each image) is kept, so an image query ranks n_images captions and
only those captions are text queries.

*Undefined queries.* τ-b has no value when all K relevance degrees (or all K scores) are equal,
or K < 2. Such queries are skipped; ``cs{K}_{d}_nq`` reports how many queries were averaged (a
result with no defined query is 0.0 with ``_nq`` = 0).

**Kendall τ (BCLS Table VI).** BCLS Eq. 2 defines τ = (C − D) / (N(N − 1)/2) (τ-a) and reports it
"calculated based on continuous pseudo labels" on the test set, I→T and T→I, without saying over
which candidates. We compute it per query over *all* candidates of the test set and average over
queries, in both directions (``variant="a"``, the paper's formula; ``variant="b"`` gives τ-b over
all candidates, i.e. CS@N). τ-a is defined for any list of ≥ 2 candidates (constant relevance
gives 0); with many tied relevance values its magnitude stays below 1 (ties count in N(N − 1)/2).

The per-query τ uses scipy's O(n log n) discordant-pair counter (see :mod:`.kendall`); one pass
gives CS@K for every K and τ over the whole list (they share the ranking).
"""

from __future__ import annotations

import numpy as np

from ._blocks import DIRECTIONS, RankedRelevance, check_image_of_caption, check_ks, check_matrix, check_sim
from ._engine import Plan, reduce, run, strip_name
from .kendall import prefix_stats, tau_from_stats
from .registry import get, register

CS_KS = (100, 200, 1000)
CANDIDATES = ("all", "one_per_image")
TAU_VARIANTS = ("a", "b", None)


def one_caption_per_image(image_of_caption) -> np.ndarray:
    """The ladder code's candidates: one caption per image.

    Args:
        image_of_caption: (n_captions,) image index of every caption.

    Returns:
        Sorted column indices of the first caption of every image that has one.
    """
    img = np.asarray(image_of_caption)
    _, first = np.unique(img, return_index=True)
    return np.sort(first)


def _check_options(cs_ks, cs_candidates, tau_variant, kendall_backend) -> dict:
    if cs_candidates not in CANDIDATES:
        raise ValueError(f"cs_candidates must be one of {list(CANDIDATES)}, got {cs_candidates!r}")
    if tau_variant not in TAU_VARIANTS:
        raise ValueError(f"tau_variant must be 'a', 'b' or None, got {tau_variant!r}")
    return dict(
        cs_ks=check_ks(cs_ks, "cs_ks") if cs_ks else (),
        cs_candidates=cs_candidates,
        tau_variant=tau_variant,
        kendall_backend=kendall_backend,
    )


def _passes(**opts) -> list:
    """CS@K over the authors' candidates (one caption per image) is a second pass; τ keeps all candidates."""
    if opts["cs_candidates"] == "all":
        return [(None, opts)]
    out = [(None, {**opts, "cs_ks": ()})]
    if opts["cs_ks"]:
        out.append((one_caption_per_image, {**opts, "tau_variant": None}))
    return out


@register(
    "coherence",
    "relevance",
    options={"cs_ks": CS_KS, "cs_candidates": "all", "tau_variant": "a", "kendall_backend": "fast"},
    check=_check_options,
    passes=_passes,
)
def _coherence_metric(rr: RankedRelevance, cs_ks, tau_variant, kendall_backend, cs_candidates="all") -> dict:
    """``cs{K}`` (τ-b over the model's top K) and ``tau`` (τ over all candidates), from one set of
    Kendall counts (they share the ranking and the discordant-pair pass)."""
    out = {}
    if cs_ks or tau_variant:
        ks = list(cs_ks) + ([rr.n] if tau_variant else [])
        st = prefix_stats(
            rr.scores, rr.y_rank(), ks, ties=rr.ranking.ties, y_sorted=rr.rel_asc, backend=kendall_backend
        )
        if cs_ks:
            tb, vb = tau_from_stats(st, "b")
            for j, k in enumerate(cs_ks):
                out[f"cs{k}"] = (tb[:, j], vb[:, j])
        if tau_variant:
            ta, va = tau_from_stats(st, tau_variant)
            out["tau"] = (ta[:, -1], va[:, -1])
    return out


def _plan(rel, directions, chunk, **options) -> Plan:
    m = get("coherence")
    return Plan(rels={"r": rel}, metrics=((m, {**m.options, **options}),), directions=tuple(directions), chunk=chunk)


def _restrict(sim, image_of_caption, rel, candidates: str):
    if candidates not in CANDIDATES:
        raise ValueError(f"candidates must be one of {list(CANDIDATES)}, got {candidates!r}")
    if candidates == "all":
        return sim, image_of_caption, rel
    cols = one_caption_per_image(image_of_caption)
    return sim[:, cols], image_of_caption[cols], rel[:, cols]


def coherent_score(
    sim,
    image_of_caption,
    rel,
    ks=CS_KS,
    directions=DIRECTIONS,
    candidates: str = "all",
    chunk: int | None = None,
    backend: str = "fast",
) -> dict[str, float]:
    """Coherent Score: Kendall τ-b between similarity and relevance over the model's top K (ladder Eq. 13).

    Args:
        sim: (n_images, n_captions) similarities.
        image_of_caption: (n_captions,) image index of every caption.
        rel: (n_images, n_captions) relevance.
        ks: the cut-offs K.
        directions: ``"i2t"`` and / or ``"t2i"``.
        candidates: ``"all"`` or ``"one_per_image"`` (the ladder code's candidates).
        chunk: queries per block.
        backend: ``"fast"`` or ``"scipy"`` (:mod:`.kendall`).

    Returns:
        ``{"cs100_i2t": …, "cs100_i2t_nq": …, …}``: the mean over defined queries, in [−1, 1], and their number.
    """
    sim = check_sim(sim)
    img = check_image_of_caption(image_of_caption, *sim.shape)
    rel = check_matrix(rel, sim.shape, "rel")
    ks = check_ks(ks)
    sim, img, rel = _restrict(sim, img, rel, candidates)
    plan = _plan(rel, directions, chunk, cs_ks=ks, tau_variant=None, kendall_backend=backend)
    return strip_name(reduce(run(sim, img, plan)), "r")


def kendall_tau(
    sim,
    image_of_caption,
    rel,
    variant: str = "a",
    directions=DIRECTIONS,
    chunk: int | None = None,
    backend: str = "fast",
) -> dict[str, float]:
    """Kendall τ between similarity and relevance over all candidates of each query (BCLS Eq. 2, Table VI).

    Args:
        sim, image_of_caption, rel: as for :func:`coherent_score`.
        variant: ``"a"`` (BCLS Eq. 2) or ``"b"`` (τ-b).
        directions: ``"i2t"`` and / or ``"t2i"``.
        chunk: queries per block.
        backend: ``"fast"`` or ``"scipy"`` (:mod:`.kendall`).

    Returns:
        ``{"tau_i2t": …, "tau_i2t_nq": …, …}``: the mean over defined queries and their number.
    """
    if variant not in ("a", "b"):
        raise ValueError(f"variant must be 'a' (BCLS Eq. 2) or 'b' (τ-b), got {variant!r}")
    sim = check_sim(sim)
    img = check_image_of_caption(image_of_caption, *sim.shape)
    rel = check_matrix(rel, sim.shape, "rel")
    plan = _plan(rel, directions, chunk, cs_ks=(), tau_variant=variant, kendall_backend=backend)
    return strip_name(reduce(run(sim, img, plan)), "r")
