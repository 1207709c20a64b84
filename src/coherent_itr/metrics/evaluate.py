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

Which metrics run, and their options: :mod:`.registry` (``metrics.available()`` lists the names,
in record order; ``include`` / ``exclude`` pick some; every other keyword is an option of a
registered metric, e.g. ``cs_ks``). Adding a metric is one ``@register`` function — nothing here.

Every undefined per-query value (constant relevance for τ-b, no relevance for NDCG/NCS, no
positive for mAP@R …) is skipped and counted in ``_nq``; a key with no defined query is 0.0 —
never NaN. Tie rule, candidate sets and variants: see :mod:`._blocks`, :mod:`.coherence`,
:mod:`.semantic`, :mod:`.human`.
"""

from __future__ import annotations

import numpy as np

from . import registry
from ._blocks import SparsePositives, check_image_of_caption, check_matrix, check_sim
from ._engine import GT, Plan, reduce, run
from .coherence import CS_KS  # noqa: F401 - the defaults, importable from here
from .human import EXPERT_POSITIVE_THRESHOLD, HumanJudgements, as_judgements, positive_pairs
from .registry import Problem
from .retrieval import KS  # noqa: F401
from .semantic import NCS_KS, NDCG_KS, SR_KS, SR_MS  # noqa: F401


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
    true_positive_threshold: float | None = None,
    human_positives_include_gt: bool = False,
    fold_size: int | None = None,
    chunk: int | None = None,
    include=None,
    exclude=(),
    **options,
) -> dict[str, float]:
    """All metrics of ``sim`` as one flat record (keys: the module docstring).

    Args:
        sim: (n_images, n_captions) similarities.
        image_of_caption: (n_captions,) image index of every caption.
        rel: pseudo-label relevance (rows images, columns captions) — one matrix (named ``pseudo``)
            or a mapping name → matrix (e.g. ``{"sbert": …, "cider": …}``). NDCG and NCS need
            relevance ≥ 0: pass cosine pseudo labels as (1 + s)/2.
        true_rel: the synthetic world's true relevance (named ``true``).
        human: judged pairs — a :class:`HumanJudgements`, an (image_idx, caption_idx, score) tuple or
            DataFrame (taken as expert scores), or a mapping name → any of these, e.g.
            ``{"expert": split.extras["expert"], "crowd": split.extras["crowd"]}`` for Flickr8k.
            Sources with a positive threshold (expert: ``EXPERT_POSITIVE_THRESHOLD``) also give
            mAP@R / R-P / R@1 against their judged positives.
        positives: extra positive sets, name → boolean matrix or (i2t matrix, t2i matrix), e.g. ECCV
            Caption positives from :func:`.eccv.positive_matrices`.
        true_positive_threshold: if set, ``true_rel ≥`` it is a positive set named ``true``.
        human_positives_include_gt: count the ground-truth pairs as positives of every human source.
        fold_size: COCO-1K style — with ≥ 2 folds, every metric is the mean over consecutive folds of
            ``fold_size`` images and their captions (``_nq`` and pair counts are summed; images after
            the last full fold are left out, as in ``fold_averaged_retrieval_metrics``); ``n_folds``
            says how many. With fewer than 2 folds the whole set is one fold.
        chunk: queries per block (default: about one million matrix entries per block).
        include, exclude: names of registered metrics to compute (default: all of them).
        **options: the options of the registered metrics (``metrics.registry.options()``): ``ks``
            (binary R@K); ``cs_ks``, ``cs_candidates`` (``"all"`` or ``"one_per_image"``, the ladder
            code, see :mod:`.coherence`), ``tau_variant`` (``"a"`` BCLS Eq. 2, ``"b"``, or None to skip
            τ over all candidates), ``kendall_backend`` (``"fast"`` / ``"scipy"``, :mod:`.kendall`);
            ``ndcg_ks``; ``ncs_ks``, ``ncs_remove_gt``, ``ncs_restrict_to_ideal``; ``sr_ks``, ``sr_ms``,
            ``sr_remove_gt``. An empty K list switches that metric off.

    Returns:
        ``{key: float}`` in registry order; every undefined per-query value is skipped and counted in
        the key's ``_nq``, and a key with no defined query is 0.0. Per-query values behind a key:
        :func:`coherent_itr.metrics.per_query`.

    Raises:
        ValueError: inputs of the wrong shape or values, an unknown metric name, clashing names.
        TypeError: an option no registered metric has.

    Example::

        >>> import numpy as np
        >>> from coherent_itr import metrics
        >>> sim = np.array([[0.9, 0.1, 0.3, 0.2], [0.2, 0.8, 0.7, 0.1]])   # 2 images × 4 captions
        >>> rec = metrics.evaluate(sim, [0, 0, 1, 1], include=["retrieval"], ks=(1,))
        >>> rec["i2t_r1"], rec["t2i_r1"], rec["rsum"]
        (50.0, 50.0, 100.0)
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
    known = registry.options()
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise TypeError(
            f"evaluate() got unknown option(s) {unknown}; the registered metrics' options are {sorted(known)}"
        )
    uses = [(m, m.normalise(options)) for m in registry.select(include, exclude)]
    whole = Problem(sim, img, rels, humans, pos_sets)
    for m, o in uses:
        if m.validate is not None:
            m.validate(whole, **o)
    n_img = sim.shape[0]
    n_folds = n_img // fold_size if fold_size else 1
    if n_folds < 2:
        out = _evaluate_one(whole, uses, human_positives_include_gt, chunk)
        if fold_size:
            out["n_folds"] = 1.0
        return out
    per_fold = []
    for f in range(n_folds):
        images = np.arange(f * fold_size, (f + 1) * fold_size)
        caps = np.flatnonzero((img >= images[0]) & (img <= images[-1]))
        sub = np.ix_(images, caps)
        fold = Problem(
            sim[sub],
            img[caps] - images[0],
            {k: r[sub] for k, r in rels.items()},
            [h.restrict(images, caps) for h in humans],
            {k: tuple(None if p is None else p[sub] for p in pair) for k, pair in pos_sets.items()},
        )
        per_fold.append(_evaluate_one(fold, uses, human_positives_include_gt, chunk))
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


def _evaluate_one(problem: Problem, uses, human_positives_include_gt: bool, chunk) -> dict[str, float]:
    """Every selected metric of one fold, in registry order (the per-query ones in one shared pass)."""
    sim, img = problem.sim, problem.image_of_caption
    positives = {GT: (True, None), **problem.positives}
    for h in problem.humans:
        h.check_shape(sim.shape)
        if h.positive_threshold is not None:
            if h.name in positives:
                raise ValueError(f"human source {h.name!r} clashes with a positive-set name")
            rows, cols = positive_pairs(h, sim.shape)
            if human_positives_include_gt:
                rows, cols = np.r_[rows, img], np.r_[cols, np.arange(len(img))]
            p = SparsePositives(rows, cols, sim.shape)
            positives[h.name] = (p, p)
    problem = Problem(sim, img, problem.rels, problem.humans, positives)
    out: dict[str, float] = {}
    per_query_done = False
    for m, o in uses:
        if m.kind == "matrix":
            out.update(m.fn(problem, **o))
        elif m.kind == "derived":
            out.update(m.fn(problem, dict(out), **o))
        elif not per_query_done:
            out.update(_per_query(problem, [(u, uo) for u, uo in uses if u.kind in registry.PER_QUERY], chunk))
            per_query_done = True
    return out


def _per_query(problem: Problem, uses, chunk) -> dict[str, float]:
    """The per-query metrics: one pass over all candidates, then one pass per candidate subset a
    metric asks for (``Metric.passes``: e.g. CS@K over one caption per image), relevance only."""
    main, extra = [], {}
    for m, o in uses:
        for columns, opts in m.passes(**o) if m.passes else [(None, o)]:
            if columns is None:
                main.append((m, opts))
            else:
                extra.setdefault(columns, []).append((m, opts))
    sim, img, rels = problem.sim, problem.image_of_caption, problem.rels
    res = reduce(run(sim, img, Plan(rels=rels, positives=problem.positives, metrics=tuple(main), chunk=chunk)))
    for columns, ms in extra.items():
        if not rels:
            continue
        cols = columns(img)
        sub = Plan(rels={k: r[:, cols] for k, r in rels.items()}, metrics=tuple(ms), chunk=chunk)
        res.update(reduce(run(sim[:, cols], img[cols], sub)))
    return res


__all__ = ["evaluate", "EXPERT_POSITIVE_THRESHOLD"]
