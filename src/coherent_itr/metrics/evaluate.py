"""``evaluate``: every metric of the study in one chunked pass, as ONE flat record of named floats.

Keys (``d`` ∈ {i2t, t2i}; ``rel`` = ``pseudo`` / ``true`` or the names of a ``rel`` mapping;
``pos`` = a positive-set name: human sources with a threshold, ``true`` if
``true_positive_threshold`` is set, and the names in ``positives``):

==========================  ===========================================================  ========
key                         metric                                                        unit
==========================  ===========================================================  ========
``{d}_r{K}``, ``rsum``      binary Recall@K (VSE++), sum of the six recalls               percent
``{d}_medr``, ``{d}_meanr`` median / mean rank of the ground truth (1-based)              rank
``i2t_map``                 image→text AP with the 5 captions as positives (ladder XI)    fraction
``cs{K}_{d}_{rel}``         Coherent Score, τ-b over the model's top K (ladder Eq. 13)    [−1, 1]
``tau_{d}_{rel}``           Kendall τ over all candidates (BCLS Eq. 2, Table VI)          [−1, 1]
``ndcg{K}_{d}_{rel}``       NDCG@K, gains 2^r − 1 (``ndcg_…``: whole list)                [0, 1]
``ncs{K}_{d}_{rel}``        NCS@K with the ground truth kept (SAM Table 3)                percent
``ncs{K}ngt_{d}_{rel}``     NCS@K with the ground truth removed (SAM Tables 4–5, "N")     percent
``nsum_{rel}``              Σ of ``ncs{K}`` over K and both directions (SAM "Nsum")        percent
``nsumngt_{rel}``           the same without ground truth (SAM "Nsum(N)")                 percent
``sr{K}m{m}_{d}_{rel}``     Semantic Recall@K, |G̃| = m, ground truth removed (SAM Eq. 4)   percent
``srhit{K}m{m}_{d}_{rel}``  hit rate of G̃ in the top K (SAM Fig. 3 "Recall")              percent
``mapr_{d}_{pos}``          mAP@R against a positive set (ECCV Caption)                   percent
``rprec_{d}_{pos}``, ``r1_{d}_{pos}``  R-Precision, R@1 against it                        percent
``{src}_pearson_all`` …     agreement of the similarity with human source ``src`` over    [−1, 1]
                            all / non-GT judged pairs (Pearson, Kendall τ-b; ``_n_…``)
``…_nq``                    number of queries averaged for the key before it              count
==========================  ===========================================================  ========

Every undefined per-query value (constant relevance for τ-b, no relevance for NDCG/NCS, no
positive for mAP@R …) is skipped and counted in ``_nq``; a key with no defined query is 0.0 —
never NaN. Tie rule, candidate sets and variants: see :mod:`._blocks`, :mod:`.coherence`,
:mod:`.semantic`, :mod:`.human`.
"""

from __future__ import annotations

import numpy as np

from ._blocks import SparsePositives, check_image_of_caption, check_ks, check_matrix, check_ndcg_ks, check_sim
from ._engine import GT, Plan, reduce, run
from .coherence import CANDIDATES, CS_KS, one_caption_per_image
from .human import EXPERT_POSITIVE_THRESHOLD, HumanJudgements, agreement, as_judgements, positive_pairs
from .retrieval import KS, retrieval_metrics
from .semantic import check_nonnegative

NDCG_KS = (10, 100, None)
NCS_KS = (1, 5, 10)
SR_KS = (5,)
SR_MS = (5, 10, 20)


def _relevances(rel, true_rel, shape) -> dict[str, np.ndarray]:
    out = {}
    if isinstance(rel, dict):
        for k, v in rel.items():
            out[str(k)] = check_matrix(v, shape, f"rel[{k!r}]")
    elif rel is not None:
        out["pseudo"] = check_matrix(rel, shape, "rel")
    if true_rel is not None:
        if "true" in out:
            raise ValueError("rel has an entry named 'true' and true_rel is given; rename one")
        out["true"] = check_matrix(true_rel, shape, "true_rel")
    return out


def _humans(human) -> list[HumanJudgements]:
    """None, one source (taken as expert scores), or a mapping source name → judgements."""
    if human is None:
        return []
    if isinstance(human, dict) and not {"image_idx", "caption_idx", "score"} <= set(human):
        return [as_judgements(v, str(k)) for k, v in human.items()]
    return [as_judgements(human, human.name if isinstance(human, HumanJudgements) else "expert")]


def evaluate(
    sim,
    image_of_caption,
    rel=None,
    true_rel=None,
    human=None,
    *,
    positives=None,
    ks=KS,
    cs_ks=CS_KS,
    cs_candidates: str = "all",
    tau_variant: str | None = "a",
    ndcg_ks=NDCG_KS,
    ncs_ks=NCS_KS,
    sr_ks=SR_KS,
    sr_ms=SR_MS,
    true_positive_threshold: float | None = None,
    human_positives_include_gt: bool = False,
    fold_size: int | None = None,
    chunk: int | None = None,
    kendall_backend: str = "fast",
) -> dict[str, float]:
    """All metrics of ``sim`` (n_images × n_captions) as one flat dict (see the module docstring).

    * ``rel``: pseudo-label relevance (rows images, columns captions) — one matrix (named
      ``pseudo``) or a mapping name → matrix (e.g. ``{"sbert": …, "cider": …}``).
    * ``true_rel``: the synthetic world's true relevance (named ``true``).
      NDCG and NCS need relevance ≥ 0: pass cosine pseudo labels as (1 + s)/2.
    * ``human``: judged pairs — a :class:`HumanJudgements`, an (image_idx, caption_idx, score)
      tuple or DataFrame (taken as expert scores), or a mapping name → any of these, e.g.
      ``{"expert": split.extras["expert"], "crowd": split.extras["crowd"]}`` for Flickr8k.
      Sources with a positive threshold (expert: ``EXPERT_POSITIVE_THRESHOLD``) also give
      mAP@R / R-P / R@1 against their judged positives.
    * ``positives``: extra positive sets, name → boolean matrix or (i2t matrix, t2i matrix),
      e.g. ECCV Caption positives from :func:`.eccv.positive_matrices`.
    * ``true_positive_threshold``: if set, ``true_rel ≥`` it is a positive set named ``true``.
    * ``cs_candidates``: ``"all"`` or ``"one_per_image"`` (ladder code), see :mod:`.coherence`.
    * ``tau_variant``: ``"a"`` (BCLS Eq. 2), ``"b"``, or None to skip τ over all candidates.
    * ``fold_size``: COCO-1K style — with ≥ 2 folds, every metric is the mean over consecutive
      folds of ``fold_size`` images and their captions (``_nq`` and pair counts are summed;
      images after the last full fold are left out, as in ``fold_averaged_retrieval_metrics``);
      ``n_folds`` says how many. With fewer than 2 folds the whole set is one fold.
    * ``chunk``: queries per block (default: about one million matrix entries per block);
      ``kendall_backend``: ``"fast"`` or ``"scipy"`` (see :mod:`.kendall`).
    """
    sim = check_sim(sim)
    img = check_image_of_caption(image_of_caption, *sim.shape)
    rels = _relevances(rel, true_rel, sim.shape)
    humans = _humans(human)
    pos_sets = _positive_sets(positives, sim.shape)
    if true_positive_threshold is not None:
        if "true" not in rels:
            raise ValueError("true_positive_threshold needs true_rel")
        p = rels["true"] >= true_positive_threshold
        pos_sets["true"] = (p, p)
    if cs_candidates not in CANDIDATES:
        raise ValueError(f"cs_candidates must be one of {list(CANDIDATES)}, got {cs_candidates!r}")
    if tau_variant not in ("a", "b", None):
        raise ValueError(f"tau_variant must be 'a', 'b' or None, got {tau_variant!r}")
    opts = dict(
        ks=check_ks(ks),
        cs_ks=check_ks(cs_ks, "cs_ks") if cs_ks else (),
        cs_candidates=cs_candidates,
        tau_variant=tau_variant,
        ndcg_ks=check_ndcg_ks(ndcg_ks),
        ncs_ks=check_ks(ncs_ks, "ncs_ks") if ncs_ks else (),
        sr_ks=check_ks(sr_ks, "sr_ks") if sr_ks else (),
        sr_ms=check_ks(sr_ms, "sr_ms") if sr_ms else (),
        human_positives_include_gt=human_positives_include_gt,
        chunk=chunk,
        kendall_backend=kendall_backend,
    )
    if opts["ndcg_ks"] or opts["ncs_ks"]:
        for name, r in rels.items():
            check_nonnegative(r, f"relevance {name!r}", "NDCG/NCS")
    n_img = sim.shape[0]
    n_folds = n_img // fold_size if fold_size else 1
    if n_folds < 2:
        out = _evaluate_one(sim, img, rels, humans, pos_sets, **opts)
        if fold_size:
            out["n_folds"] = 1.0
        return out
    per_fold = []
    for f in range(n_folds):
        images = np.arange(f * fold_size, (f + 1) * fold_size)
        caps = np.flatnonzero((img >= images[0]) & (img <= images[-1]))
        sub = np.ix_(images, caps)
        per_fold.append(
            _evaluate_one(
                sim[sub],
                img[caps] - images[0],
                {k: r[sub] for k, r in rels.items()},
                [h.restrict(images, caps) for h in humans],
                {k: tuple(None if p is None else p[sub] for p in pair) for k, pair in pos_sets.items()},
                **opts,
            )
        )
    out = {}
    for k in per_fold[0]:
        vals = [p[k] for p in per_fold]
        summed = k.endswith("_nq") or "_n_" in k
        out[k] = float(np.sum(vals) if summed else np.mean(vals))
    out["n_folds"] = float(n_folds)
    return out


def _positive_sets(positives, shape) -> dict[str, tuple]:
    out = {}
    for name, p in (positives or {}).items():
        if name in (GT, "true"):
            raise ValueError(f"positive-set name {name!r} is reserved")
        pair = p if isinstance(p, tuple) else (p, p)
        if len(pair) != 2:
            raise ValueError(f"positives[{name!r}] must be a boolean matrix or an (i2t, t2i) pair of them")
        out[name] = tuple(
            None if q is None else check_matrix(q, shape, f"positives[{name!r}]", dtype=bool) for q in pair
        )
    return out


def _evaluate_one(
    sim,
    img,
    rels,
    humans,
    pos_sets,
    *,
    ks,
    cs_ks,
    cs_candidates,
    tau_variant,
    ndcg_ks,
    ncs_ks,
    sr_ks,
    sr_ms,
    human_positives_include_gt,
    chunk,
    kendall_backend,
) -> dict[str, float]:
    out = retrieval_metrics(sim, img, ks)
    positives = {GT: (True, None), **pos_sets}
    for h in humans:
        h.check_shape(sim.shape)
        if h.positive_threshold is not None:
            if h.name in positives:
                raise ValueError(f"human source {h.name!r} clashes with a positive-set name")
            rows, cols = positive_pairs(h, sim.shape)
            if human_positives_include_gt:
                rows, cols = np.r_[rows, img], np.r_[cols, np.arange(len(img))]
            p = SparsePositives(rows, cols, sim.shape)
            positives[h.name] = (p, p)
    plan = Plan(
        rels=rels,
        positives=positives,
        ap_for=(GT,),
        cs_ks=cs_ks if cs_candidates == "all" else (),
        tau_variant=tau_variant,
        ndcg_ks=ndcg_ks,
        ncs_ks=ncs_ks,
        sr_ks=sr_ks,
        sr_ms=sr_ms,
        kendall_backend=kendall_backend,
        chunk=chunk,
    )
    res = reduce(run(sim, img, plan))
    out["i2t_map"] = res.pop(f"ap_i2t_{GT}")
    for k in [k for k in res if k.endswith(f"_i2t_{GT}") or k.endswith(f"_i2t_{GT}_nq")]:
        del res[k]  # mAP@R/R-P/R@1 against the 5 captions: not a table metric (binary R@K covers it)
    if cs_ks and cs_candidates == "one_per_image" and rels:
        cols = one_caption_per_image(img)
        sub = Plan(
            rels={k: r[:, cols] for k, r in rels.items()}, cs_ks=cs_ks, kendall_backend=kendall_backend, chunk=chunk
        )
        res.update(reduce(run(sim[:, cols], img[cols], sub)))
    out.update(res)
    for name in rels:
        if ncs_ks:
            for tag in ("", "ngt"):
                out[f"nsum{tag}_{name}"] = sum(out[f"ncs{k}{tag}_{d}_{name}"] for k in ncs_ks for d in ("i2t", "t2i"))
    for h in humans:
        out.update({f"{h.name}_{k}": v for k, v in agreement(sim, h, img).items()})
    return out


__all__ = ["evaluate", "EXPERT_POSITIVE_THRESHOLD"]
