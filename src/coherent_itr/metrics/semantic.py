"""Semantic retrieval metrics: NDCG@K, NCS@K, Semantic Recall@K, and mAP@R / R-P / R@1 / AP
against any set of positives.

Each ``*_block`` function scores a block of queries (see :mod:`._blocks`) and returns, per
query, the value and whether it is defined; the public functions at the bottom run them over
all queries in chunks and average the defined ones.

Definitions (n candidates per query, the model's ranking under the package's tie rule):

* **NDCG@K** (Listwise Eqs. 4–6): DCG@K = Σ_{i≤K} (2^{r_i} − 1) / log₂(1 + i) over the model's
  ranking; IDCG@K the same over the relevance sorted decreasingly; NDCG@K = DCG@K / IDCG@K, in
  [0, 1]. ``K=None`` means the whole list. Undefined (skipped) when IDCG@K = 0. Relevance must be
  ≥ 0 (map a cosine s to (1 + s)/2 first, as the listwise paper does).
* **NCS@K** (SAM Sec. 3.3, Eqs. 3 and 5): 100 · Σ_{j ∈ Q_K} N_ij / Σ_{l ∈ ideal top-K} N_il,
  with Q_K the model's top K and N the relevance passed in (φ: SAM evaluates with SPICE, which
  needs Stanford CoreNLP; CIDEr-D or the synthetic world's true relevance stand in). This is the
  paper's prose ("φ of the retrieved samples divided by the maximum φ at cut-off K") and the
  authors' code. ``restrict_to_ideal=True`` takes Eq. 5 literally: the numerator only counts
  j ∈ G̃_i = the ideal top-K. ``remove_gt=True`` removes the query's ground-truth items from both
  lists first (SAM Tables 4–5, "N"); ``False`` keeps them (SAM Table 3). Undefined when the
  ideal sum is 0.
* **Semantic Recall@K** (SAM Eq. 4): 100 · |G̃_i ∩ Q_K| / |G̃_i|, with G̃_i the m most relevant
  candidates (ground truth removed by default, as in SAM Fig. 3); keys ``sr{K}m{m}``. The
  ``srhit{K}m{m}`` keys give the R^V-style hit rate of SAM Fig. 3's "Recall" (is any item of
  G̃_i in the top K), which rises with m while Semantic Recall falls (claim S5).
  Ties in relevance at the m-th place: G̃_i is taken as a uniformly random choice among the tied
  candidates, and the metric is its exact expectation (membership weight = free slots / tied
  candidates; the hit rate uses the hypergeometric probability), so no arbitrary tie-break
  enters. The same rule defines G̃_i for ``restrict_to_ideal``.
* **mAP@R, R-Precision, R@1** (ECCV Caption; BCLS Table VII): with P the positives of a query
  and R = |P|: mAP@R = (1/R) Σ_{r≤R} 1[item_r ∈ P] · P@r; R-P = P@R; R@1 = 1[item_1 ∈ P];
  as percentages. **AP** (ladder Table XI, image→text with the 5 captions as positives):
  (1/R) Σ_{k: item_k ∈ P} P@k over the whole list, as a fraction. Undefined when P is empty
  (such queries are skipped: e.g. queries with no human-judged positive).
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln

from ._blocks import (
    RankedRelevance,
    Ranking,
    check_image_of_caption,
    check_ks,
    check_matrix,
    check_ndcg_ks,
    check_sim,
    take,
)
from ._engine import Plan, reduce, run, strip_name
from .registry import GT, get, register

NDCG_KS = (10, 100, None)
NCS_KS = (1, 5, 10)
SR_KS = (5,)
SR_MS = (5, 10, 20)


def ndcg_block(rr: RankedRelevance, ks) -> dict:
    """{K: (NDCG@K per query, defined)}; K=None is the whole list."""
    n = rr.n
    kk = [n if k is None else min(int(k), n) for k in ks]
    disc = 1.0 / np.log2(np.arange(2, n + 2))
    kmax = max([k for k in kk if k < n], default=0)
    if kmax:
        dcg = np.cumsum((np.exp2(rr.rel[:, :kmax], dtype=np.float64) - 1.0) * disc[:kmax], axis=1)
        idcg = np.cumsum((np.exp2(rr.rel_desc[:, :kmax], dtype=np.float64) - 1.0) * disc[:kmax], axis=1)
    if n in kk:
        dcg_n = (np.exp2(rr.rel, dtype=np.float64) - 1.0) @ disc
        idcg_n = (np.exp2(rr.rel_asc, dtype=np.float64) - 1.0) @ disc[::-1]
    out = {}
    for k, key in zip(kk, ks):
        d, i = (dcg_n, idcg_n) if k == n else (dcg[:, k - 1], idcg[:, k - 1])
        valid = i > 0
        out[key] = (np.where(valid, d / np.where(valid, i, 1.0), 0.0), valid)
    return out


class _Eligible:
    """Which candidates count (all, or all but the query's ground truth), over the first L
    positions of the model ranking and of the ideal ranking, L long enough to hold the first
    ``kmax`` eligible candidates of every row."""

    def __init__(self, rr: RankedRelevance, remove_gt: bool, kmax: int) -> None:
        self.rr, self.remove_gt = rr, remove_gt
        bsz = rr.rel.shape[0]
        self.n_gt = np.bincount(rr.gt_rows, minlength=bsz) if remove_gt else np.zeros(bsz, dtype=np.int64)
        self.L = min(rr.n, kmax + int(self.n_gt.max(initial=0)))
        if remove_gt:
            self.row = ~rr.gt_head(self.L)
            self.desc = rr.ideal_head_without_gt(self.L)
        else:
            self.row = self.desc = np.ones((bsz, self.L), dtype=bool)
        self.count = rr.n - self.n_gt

    @staticmethod
    def first(mask: np.ndarray, k: int) -> np.ndarray:
        """The first k True positions of each row of ``mask`` (all of them if fewer)."""
        return mask & (np.cumsum(mask, axis=1) <= k)

    def top_m(self, m: int):
        """Expected membership, over the first L ranked candidates, in G̃ = the m most relevant
        eligible candidates (ties at the m-th value shared uniformly). Returns
        (weights (B, L), m_eff, slots, n_tied, is_tied (B, L))."""
        rr = self.rr
        bsz = rr.rel.shape[0]
        m_eff = np.minimum(m, self.count)
        pos = np.argmax(np.cumsum(self.desc, axis=1) >= np.maximum(m_eff, 1)[:, None], axis=1)
        thr = rr.rel_desc[np.arange(bsz), pos]
        above = np.count_nonzero(rr.rel > thr[:, None], axis=1)
        n_tied = np.count_nonzero(rr.rel == thr[:, None], axis=1)
        if self.remove_gt and rr.gt_rows.size:
            t = thr[rr.gt_rows]
            above -= np.bincount(rr.gt_rows, weights=rr.gt_vals > t, minlength=bsz).astype(np.int64)
            n_tied -= np.bincount(rr.gt_rows, weights=rr.gt_vals == t, minlength=bsz).astype(np.int64)
        slots = m_eff - above
        head = rr.rel[:, : self.L]
        is_tied = self.row & (head == thr[:, None])
        w = (self.row & (head > thr[:, None])) + is_tied * (slots / np.maximum(n_tied, 1))[:, None]
        w[m_eff == 0] = 0.0
        return w, m_eff, slots, n_tied, is_tied


def ncs_block(rr: RankedRelevance, ks, remove_gt: bool, restrict_to_ideal: bool = False) -> dict:
    """{K: (NCS@K per query in percent, defined)} (SAM Eq. 5; see the module docstring)."""
    el = _Eligible(rr, remove_gt, max(ks))
    head = rr.rel[:, : el.L].astype(np.float64)
    head_desc = rr.rel_desc[:, : el.L].astype(np.float64)
    out = {}
    for k in ks:
        q = el.first(el.row, k)
        wq = q * el.top_m(k)[0] if restrict_to_ideal else q
        num = (head * wq).sum(axis=1)
        den = (head_desc * el.first(el.desc, k)).sum(axis=1)
        valid = den > 0
        out[k] = (np.where(valid, 100.0 * num / np.where(valid, den, 1.0), 0.0), valid)
    return out


def sr_block(rr: RankedRelevance, ks, ms, remove_gt: bool = True) -> dict:
    """{(kind, K, m): (value per query in percent, defined)} for kind "fraction" (SAM Eq. 4)
    and "hit" (is any member of G̃ in the top K), as expectations over ties (module docstring)."""
    el = _Eligible(rr, remove_gt, max(max(ks), max(ms)))
    out = {}
    for m in ms:
        w, m_eff, slots, n_tied, is_tied = el.top_m(m)
        valid = m_eff > 0
        for k in ks:
            q = el.first(el.row, k)
            frac = (w * q).sum(axis=1) / np.maximum(m_eff, 1)
            out[("fraction", k, m)] = (np.where(valid, 100.0 * frac, 0.0), valid)
            sure = (q & (w >= 1.0)).any(axis=1)  # a certain member of G̃ was retrieved
            # otherwise P(none of the q_t retrieved tied candidates is among the `slots` members
            # drawn uniformly from the n_tied tied ones) = C(n_tied − q_t, slots) / C(n_tied, slots)
            q_t = (q & is_tied).sum(axis=1)
            a = n_tied - q_t
            p0 = np.ones(len(valid))
            some = (q_t > 0) & (slots > 0)
            p0[some & (a < slots)] = 0.0
            ok = some & (a >= slots)
            if ok.any():
                aa, nn, ss = a[ok], n_tied[ok], slots[ok]
                p0[ok] = np.exp(gammaln(aa + 1) - gammaln(aa - ss + 1) - gammaln(nn + 1) + gammaln(nn - ss + 1))
            hit = np.where(sure, 1.0, 1.0 - p0)
            out[("hit", k, m)] = (np.where(valid, 100.0 * hit, 0.0), valid)
    return out


def positive_block(ranking: Ranking, pos: np.ndarray, with_ap: bool = False) -> dict:
    """{"mapr", "rprec", "r1" (percent), "ap" (fraction, if asked)}: (per query, defined)."""
    r = pos.sum(axis=1)
    valid = r > 0
    rmax = max(1, int(r.max()) if r.size else 1)
    hits = take(pos, ranking.order(pos)[:, :rmax])
    cum = np.cumsum(hits, axis=1)
    ranks = np.arange(1, rmax + 1)
    within = ranks[None, :] <= r[:, None]
    r1 = np.maximum(r, 1)
    mapr = (hits * (cum / ranks) * within).sum(axis=1) / r1
    rprec = cum[np.arange(len(r)), np.clip(r - 1, 0, rmax - 1)] / r1
    out = {
        "mapr": (np.where(valid, 100.0 * mapr, 0.0), valid),
        "rprec": (np.where(valid, 100.0 * rprec, 0.0), valid),
        "r1": (np.where(valid, 100.0 * hits[:, 0], 0.0), valid),
    }
    if with_ap:
        out["ap"] = (_average_precision(ranking.scores, pos, r), valid)
    return out


def ap_block(ranking: Ranking, pos: np.ndarray) -> dict:
    """{"ap": (AP over the whole list per query, as a fraction; defined)}."""
    r = pos.sum(axis=1)
    return {"ap": (_average_precision(ranking.scores, pos, r), r > 0)}


def _average_precision(x: np.ndarray, pos: np.ndarray, r: np.ndarray) -> np.ndarray:
    """AP over the whole ranking without sorting it: with the positives' scores sorted
    decreasingly s_(1) ≥ s_(2) ≥ …, the k-th positive sits (ties pessimistic) at rank
    ρ_k = k + #{negatives scoring ≥ s_(k)}, and AP = (1/R) Σ_k k / ρ_k."""
    bsz = x.shape[0]
    rmax = int(r.max(initial=0))
    if rmax == 0:
        return np.zeros(bsz)
    rows, cols = np.nonzero(pos)
    vals = x[rows, cols]
    o = np.lexsort((-vals, rows))  # by row, then score decreasing
    rows, vals = rows[o], vals[o]
    first = np.searchsorted(rows, np.arange(bsz))
    ps = np.full((bsz, rmax), -np.inf)
    ps[rows, np.arange(len(rows)) - first[rows]] = vals
    ap = np.zeros(bsz)
    for k in range(rmax):
        sk = ps[:, k]
        has = k < r
        n_ge = (x >= sk[:, None]).sum(axis=1)
        n_pos_ge = (ps >= sk[:, None]).sum(axis=1)
        rho = (k + 1) + (n_ge - n_pos_ge)
        ap += np.where(has, (k + 1) / np.maximum(rho, 1), 0.0)
    return ap / np.maximum(r, 1)


# ---------------------------------------------------------------- registered metrics of evaluate()
def _check_nonnegative_rels(problem, metric: str, ks) -> None:
    if ks:
        for name, r in problem.rels.items():
            check_nonnegative(r, f"relevance {name!r}", metric)


def _opt_ks(name):
    return lambda ks: check_ks(ks, name) if ks else ()


@register(
    "ndcg",
    "relevance",
    options={"ndcg_ks": NDCG_KS},
    check=lambda ndcg_ks: {"ndcg_ks": check_ndcg_ks(ndcg_ks)},
    validate=lambda problem, ndcg_ks: _check_nonnegative_rels(problem, "NDCG/NCS", ndcg_ks),
)
def _ndcg_metric(rr: RankedRelevance, ndcg_ks) -> dict:
    """``ndcg{K}`` (``ndcg`` for the whole list)."""
    if not ndcg_ks:
        return {}
    return {f"ndcg{'' if k is None else k}": v for k, v in ndcg_block(rr, ndcg_ks).items()}


@register(
    "ncs",
    "relevance",
    options={"ncs_ks": NCS_KS, "ncs_remove_gt": (False, True), "ncs_restrict_to_ideal": False},
    check=lambda ncs_ks, ncs_remove_gt, ncs_restrict_to_ideal: {
        "ncs_ks": _opt_ks("ncs_ks")(ncs_ks),
        "ncs_remove_gt": tuple(bool(x) for x in ncs_remove_gt),
        "ncs_restrict_to_ideal": bool(ncs_restrict_to_ideal),
    },
    validate=lambda problem, ncs_ks, **_: _check_nonnegative_rels(problem, "NDCG/NCS", ncs_ks),
)
def _ncs_metric(rr: RankedRelevance, ncs_ks, ncs_remove_gt, ncs_restrict_to_ideal) -> dict:
    """``ncs{K}`` (ground truth kept) and ``ncs{K}ngt`` (removed)."""
    out = {}
    if ncs_ks:
        for remove in ncs_remove_gt:
            for k, v in ncs_block(rr, ncs_ks, remove, ncs_restrict_to_ideal).items():
                out[f"ncs{k}{'ngt' if remove else ''}"] = v
    return out


@register(
    "semantic_recall",
    "relevance",
    options={"sr_ks": SR_KS, "sr_ms": SR_MS, "sr_remove_gt": True},
    check=lambda sr_ks, sr_ms, sr_remove_gt: {
        "sr_ks": _opt_ks("sr_ks")(sr_ks),
        "sr_ms": _opt_ks("sr_ms")(sr_ms),
        "sr_remove_gt": bool(sr_remove_gt),
    },
)
def _sr_metric(rr: RankedRelevance, sr_ks, sr_ms, sr_remove_gt) -> dict:
    """``sr{K}m{m}`` (Semantic Recall) and ``srhit{K}m{m}`` (hit rate of G̃ in the top K)."""
    if not (sr_ks and sr_ms):
        return {}
    return {
        f"{'sr' if kind == 'fraction' else 'srhit'}{k}m{m}": v
        for (kind, k, m), v in sr_block(rr, sr_ks, sr_ms, sr_remove_gt).items()
    }


@register("map", "positives", targets=lambda name: name == GT, key=lambda stem, d, name: f"{d}_map", count=False)
def _map_metric(ranking: Ranking, pos: np.ndarray) -> dict:
    """``i2t_map``: AP with the image's captions as positives (the ground truth; ladder Table XI)."""
    return ap_block(ranking, pos)


@register("positive_sets", "positives", targets=lambda name: name != GT)
def _positive_set_metric(ranking: Ranking, pos: np.ndarray) -> dict:
    """``mapr``, ``rprec``, ``r1`` against every positive set but the ground truth."""
    return positive_block(ranking, pos)


@register(
    "nsum",
    "derived",
    options={"ncs_ks": NCS_KS},
    check=lambda ncs_ks: {"ncs_ks": _opt_ks("ncs_ks")(ncs_ks)},
)
def _nsum_metric(problem, record, ncs_ks) -> dict:
    """``nsum_{rel}`` / ``nsumngt_{rel}``: Σ of ``ncs{K}`` (``ncs{K}ngt``) over K and both directions."""
    out = {}
    for name in problem.rels:
        if ncs_ks:
            for tag in ("", "ngt"):
                keys = [f"ncs{k}{tag}_{d}_{name}" for k in ncs_ks for d in ("i2t", "t2i")]
                if all(k in record for k in keys):
                    out[f"nsum{tag}_{name}"] = sum(record[k] for k in keys)
    return out


# ---------------------------------------------------------------- public, whole-matrix functions


def check_nonnegative(rel: np.ndarray, name: str, metric: str) -> None:
    lo = float(rel.min()) if rel.size else 0.0
    if lo < 0:
        raise ValueError(
            f"{metric} needs relevance ≥ 0, but {name} has minimum {lo:.4g}; map a cosine "
            f"s in [−1, 1] to (1 + s)/2 first (CS@K and Kendall τ are unchanged by that map)"
        )


def _prepare(sim, image_of_caption, rel, metric):
    sim = check_sim(sim)
    img = check_image_of_caption(image_of_caption, *sim.shape)
    rel = check_matrix(rel, sim.shape, "rel")
    if metric:
        check_nonnegative(rel, "rel", metric)
    return sim, img, rel


def _use(name: str, **options) -> tuple:
    """(registered metric ``name``, its default options updated with ``options``) for a plan."""
    m = get(name)
    return m, {**m.options, **options}


def _run_one(sim, img, rel, use, directions, chunk) -> dict[str, float]:
    plan = Plan(rels={"r": rel}, metrics=(use,), directions=tuple(directions), chunk=chunk)
    return strip_name(reduce(run(sim, img, plan)), "r")


def ndcg(sim, image_of_caption, rel, ks=(10, 100, None), directions=("i2t", "t2i"), chunk=None) -> dict[str, float]:
    """NDCG@K with gains 2^r − 1 (Listwise Eqs. 4–6).

    Args:
        sim: (n_images, n_captions) similarities.
        image_of_caption: (n_captions,) image index of every caption.
        rel: (n_images, n_captions) relevance ≥ 0.
        ks: the cut-offs K (None: the whole list).
        directions: ``"i2t"`` and / or ``"t2i"``.
        chunk: queries per block.

    Returns:
        ``{"ndcg10_i2t": …, "ndcg_i2t" (whole list): …, "…_nq": …}``: means over defined queries, in [0, 1].
    """
    sim, img, rel = _prepare(sim, image_of_caption, rel, "NDCG")
    return _run_one(sim, img, rel, _use("ndcg", ndcg_ks=check_ndcg_ks(ks)), directions, chunk)


def ncs(
    sim,
    image_of_caption,
    rel,
    ks=(1, 5, 10),
    remove_gt: bool = False,
    restrict_to_ideal: bool = False,
    directions=("i2t", "t2i"),
    chunk=None,
) -> dict[str, float]:
    """NCS@K (SAM Eqs. 3 and 5; the module docstring).

    Args:
        sim: (n_images, n_captions) similarities.
        image_of_caption: (n_captions,) image index of every caption.
        rel: (n_images, n_captions) relevance ≥ 0 (SAM's φ).
        ks: the cut-offs K.
        remove_gt: remove each query's ground truth from both lists (SAM Tables 4–5, "N").
        restrict_to_ideal: count only the retrieved items of the ideal top K (Eq. 5 literally).
        directions: ``"i2t"`` and / or ``"t2i"``.
        chunk: queries per block.

    Returns:
        ``{"ncs5_i2t": …, "ncs5_i2t_nq": …}`` with ground truth kept, ``ncs5ngt_…`` removed; percent.
    """
    sim, img, rel = _prepare(sim, image_of_caption, rel, "NCS")
    use = _use("ncs", ncs_ks=check_ks(ks), ncs_remove_gt=(bool(remove_gt),), ncs_restrict_to_ideal=restrict_to_ideal)
    return _run_one(sim, img, rel, use, directions, chunk)


def semantic_recall(
    sim, image_of_caption, rel, ks=(5,), ms=(5,), remove_gt: bool = True, directions=("i2t", "t2i"), chunk=None
) -> dict[str, float]:
    """Semantic Recall@K with |G̃| = m (SAM Eq. 4) and the hit rate of G̃ in the top K (SAM Fig. 3).

    Args:
        sim, image_of_caption, rel: (n_images, n_captions) similarities, (n_captions,) image of every caption,
            (n_images, n_captions) relevance.
        ks: the cut-offs K.
        ms: the sizes m of G̃, the m most relevant candidates.
        remove_gt: remove each query's ground truth first (as SAM Fig. 3).
        directions: ``"i2t"`` and / or ``"t2i"``.
        chunk: queries per block.

    Returns:
        ``{"sr5m10_i2t": …, "srhit5m10_i2t": …, "…_nq": …}`` in percent.
    """
    sim, img, rel = _prepare(sim, image_of_caption, rel, None)
    use = _use("semantic_recall", sr_ks=check_ks(ks), sr_ms=check_ks(ms, "ms"), sr_remove_gt=remove_gt)
    return _run_one(sim, img, rel, use, directions, chunk)


def positive_set_metrics(
    sim, image_of_caption, positives, positives_t2i=None, with_ap: bool = False, directions=("i2t", "t2i"), chunk=None
) -> dict[str, float]:
    """mAP@R, R-Precision and R@1 against a set of positives (ECCV Caption; BCLS Table VII).

    Args:
        sim: (n_images, n_captions) similarities.
        image_of_caption: (n_captions,) image index of every caption.
        positives: boolean (n_images, n_captions) positives, for both directions unless
            ``positives_t2i`` is given (ECCV Caption has separate image→text and text→image sets).
        positives_t2i: boolean positives of the caption queries.
        with_ap: also AP over the whole list (``ap_{d}``, a fraction).
        directions: ``"i2t"`` and / or ``"t2i"``.
        chunk: queries per block.

    Returns:
        ``{"mapr_i2t", "rprec_i2t", "r1_i2t", …}`` in percent and their ``_nq``; queries with no
        positive are skipped.
    """
    sim = check_sim(sim)
    img = check_image_of_caption(image_of_caption, *sim.shape)
    p_i2t = check_matrix(positives, sim.shape, "positives", dtype=bool)
    p_t2i = p_i2t if positives_t2i is None else check_matrix(positives_t2i, sim.shape, "positives_t2i", dtype=bool)
    plan = Plan(
        positives={"p": (p_i2t, p_t2i)},
        metrics=(_use("positive_sets"),),
        ap_for=("p",) if with_ap else (),
        directions=tuple(directions),
        chunk=chunk,
    )
    return strip_name(reduce(run(sim, img, plan)), "p")
