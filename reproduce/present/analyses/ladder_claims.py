"""The rows of claims L1–L6 that 02_ladder writes (:func:`claim_rows`) and their grouping by yardstick
(:func:`by_yardstick`), from the frames and batch statistics of :mod:`reproduce.present.analyses.ladder`.
"""

from __future__ import annotations

import pandas as pd

from reproduce.spec import labels
from reproduce.spec import claims as registry
from reproduce.spec.tables import fmt_num
from reproduce.protocol.study import paired_effect
from reproduce.present.analyses.ladder import CIRCULAR, DIRS, fixed_bounds, present, yard_key


# --- claims L1–L6 ----------------------------------------------------------------------------------------
def claim_rows(frames: dict, yard: str, yard_name: str, dataset: str, f6: dict) -> list[dict]:
    """Keyword arguments of :meth:`reproduce.present.page.Page.claim` for every notebook row of L1–L6 (effects per seed,
    oriented so the claim predicts > 0), except the registry primaries (added by claim id in ``finish``):

    * L1 (Tables I/III): the manual ladder over VSE++ on CS@100 / CS@1000 both directions, against
      Sentence-BERT (circular) and the independent yardstick; RSUM within ±5 % of VSE++'s (equivalence);
    * L2 (Tables IV/V): β₂ = 0 → 0.5 raises CS@100 i2t, lowers RSUM (manual and adaptive (2, 2));
    * L3 (Tables VI/VII): L = 2 over L = 1 on CS@100, L = 3 over L = 2 on CS@200 (i2t);
    * L4 (Tables VIII/IX): (2, 4) over every fixed (k, k) on CS@100 i2t and RSUM;
    * L5 (Fig. 6, per batch): overdispersion − 1 of n≥θ over rows (the registry's primary, ``role="primary"``)
      and the share of rows with a non-modal adaptive level count − 0.10;
    * L6 (Table XI): the adaptive ladder over VSE++ on image→text mAP.

    ``frames``: ``Study.results`` per group (table1, beta2, levels, lminmax); ``f6``: :func:`fig6_batches`."""
    t1, tb, tl, tm = (frames[g] for g in ("table1", "beta2", "levels", "lminmax"))
    return [
        *_l1_rows(t1, yard, yard_name, dataset),
        *_l2_rows(tb, yard, yard_name, dataset),
        *_l3_rows(tl, yard, yard_name, dataset),
        *_l4_rows(tm, yard, yard_name, dataset),
        *_l5_rows(f6, dataset),
        *_l6_rows(t1, dataset),
    ]


_VSE, _MANUAL, _ADAPTIVE = "VSE++", "Ladder (manual)", "Ladder (adaptive)"


def _contrast(dataset: str, cid: str, source, statement, metric, df, a, b, note="", **kw) -> list[dict]:
    """The notebook row of the per-seed contrast ``a − b`` of ``metric`` in ``df`` (paired by seed), or none when
    that contrast is the registry's primary of ``cid`` on ``dataset`` (``Page.finish`` adds it by claim id)."""
    if registry.claim(cid).primary.matches(dataset, arm_a=a, arm_b=b, metric=metric):
        return []
    effects = paired_effect(df, metric, a, b)
    return [
        dict(
            cid=cid,
            source=source,
            statement=statement,
            metric=metric,
            arms=f"{a} − {b}",
            effects=effects,
            note=note,
            **kw,
        )
    ]


def _l1_rows(t1: pd.DataFrame, yard: str, yard_name: str, dataset: str) -> list[dict]:
    """L1 (Tables I/III): the manual ladder over VSE++ on CS@100 / CS@1000 both directions against Sentence-BERT
    and against the independent yardstick; RSUM within ±5 % of VSE++'s (equivalence)."""
    src = "Tables I, III"
    rows = []
    for k in (100, 1000):
        for d in DIRS:
            statement = f"Ladder (manual) raises CS@{k} {d} over VSE++ (Sentence-BERT)"
            rows += _contrast(dataset, "L1", src, statement, f"cs{k}_{d}_sbert", t1, _MANUAL, _VSE, CIRCULAR)
    for m in present(t1.columns, [yard_key(t1.columns, k, d, yard) for k in (100, 1000) for d in DIRS]):
        statement = f"Ladder (manual) raises coherence ({m}) over VSE++ against {yard_name}"
        note = "independent yardstick: the row a practitioner should read"
        rows += _contrast(dataset, "L1", src, statement, m, t1, _MANUAL, _VSE, note)
    tol = 0.05 * float(t1[t1.arm == _VSE]["rsum"].mean())
    rows += _contrast(
        dataset,
        "L1",
        src,
        "Ladder (manual) keeps R@K comparable to VSE++ (RSUM within ±5% of VSE++'s)",
        "rsum",
        t1,
        _MANUAL,
        _VSE,
        f"equivalence: tolerance = 5% of the VSE++ mean RSUM = {tol:.2f} RSUM points",
        kind="equivalence",
        tolerance=tol,
    )
    return rows


def _l2_rows(tb: pd.DataFrame, yard: str, yard_name: str, dataset: str) -> list[dict]:
    """L2 (Tables IV/V): from β₂ = 0 to 0.5 CS@100 i2t rises (Sentence-BERT and the independent yardstick) and
    RSUM drops, for the manual and the adaptive (2, 2) ladder."""
    src = "Tables IV, V"
    m2 = yard_key(tb.columns, 100, "i2t", yard)
    rows = []
    for sel in ("manual", "auto(2,2)"):
        hi, lo = f"{sel} β₂=0.5", f"{sel} β₂=0"
        statement = f"{sel}: CS@100 i2t rises from β₂ = 0 to 0.5 (Sentence-BERT)"
        rows += _contrast(dataset, "L2", src, statement, "cs100_i2t_sbert", tb, hi, lo, CIRCULAR)
        if m2:
            statement = f"{sel}: coherence ({m2}) rises from β₂ = 0 to 0.5 against {yard_name}"
            rows += _contrast(dataset, "L2", src, statement, m2, tb, hi, lo, "independent yardstick")
        rows += _contrast(dataset, "L2", src, f"{sel}: RSUM drops from β₂ = 0 to 0.5", "rsum", tb, lo, hi)
    return rows


def _l3_rows(tl: pd.DataFrame, yard: str, yard_name: str, dataset: str) -> list[dict]:
    """L3 (Tables VI/VII): L = 2 over L = 1 on CS@100, L = 3 over L = 2 on CS@200 (i2t), against Sentence-BERT and
    the independent yardstick (on Flickr8k the expert agreement, not K-specific)."""
    src = "Tables VI, VII"
    rows = []
    for k, a, b, what in (
        (100, "L=2", "L=1", "L = 2 raises CS@100 over L = 1"),
        (200, "L=3", "L=2", "L = 3 raises CS@200 over L = 2"),
    ):
        rows += _contrast(dataset, "L3", src, f"{what} (i2t, Sentence-BERT)", f"cs{k}_i2t_sbert", tl, a, b, CIRCULAR)
        m = yard_key(tl.columns, k, "i2t", yard)
        if m:
            note = "independent yardstick" + ("" if m.startswith("cs") else "; not K-specific on Flickr8k")
            rows += _contrast(dataset, "L3", src, f"{what} (i2t) against {yard_name} ({m})", m, tl, a, b, note)
    return rows


def _l4_rows(tm: pd.DataFrame, yard: str, yard_name: str, dataset: str) -> list[dict]:
    """L4 (Tables VIII/IX): the adaptive bounds (2, 4) over every fixed (k, k) on CS@100 i2t (Sentence-BERT and the
    independent yardstick) and on RSUM."""
    src = "Tables VIII, IX"
    m4 = yard_key(tm.columns, 100, "i2t", yard)
    rows = []
    for fixed in fixed_bounds(tm.arm.unique()):
        statement = f"(2,4) beats {fixed} on CS@100 i2t (Sentence-BERT)"
        rows += _contrast(dataset, "L4", src, statement, "cs100_i2t_sbert", tm, "(2,4)", fixed, CIRCULAR)
        if m4:
            statement = f"(2,4) beats {fixed} on coherence against {yard_name} ({m4})"
            rows += _contrast(dataset, "L4", src, statement, m4, tm, "(2,4)", fixed, "independent yardstick")
        rows += _contrast(dataset, "L4", src, f"(2,4) beats {fixed} on RSUM", "rsum", tm, "(2,4)", fixed)
    return rows


def _l5_rows(f6: dict, dataset: str) -> list[dict]:
    """L5 (Fig. 6, one effect per training batch of :func:`fig6_batches`): the overdispersion − 1 of n≥θ over the
    rows (the registry's primary, measured here) and the share of rows with a non-modal level count − 0.10."""
    fig6_stats = f6["stats"]
    batches = f"{len(fig6_stats)} train batches of {f6['batch_size']}"
    p5 = registry.claim("L5").primary
    return [
        dict(
            cid="L5",
            source="Fig. 6",
            statement=p5.statement,
            metric=p5.legacy_for(dataset)["metric"],
            arms=batches,
            effects=list(fig6_stats["overdispersion"] - 1.0),
            role="primary",
            note="per batch: std over query rows of the number of candidates with Sentence-BERT relevance "
            "≥ θ, divided by the binomial std expected if every row had the batch's share ≥ θ; effect = "
            "ratio − 1 (> 0: a fixed θ splits rows unevenly, the paper's argument for adaptive levels)",
        ),
        dict(
            cid="L5",
            source="Fig. 6",
            statement="The adaptive ladder (2, 4) picks a non-modal number of levels for > 10% of the rows",
            metric="share of rows ≠ modal level count − 0.10",
            arms=batches,
            effects=list(fig6_stats["rows ≠ modal levels (%)"] / 100 - 0.10),
            note="per batch: share of query rows whose silhouette-chosen number of levels differs from the "
            "batch's most common one, minus 0.10 ('widely' read as: more than one row in ten needs another "
            "ladder)",
        ),
    ]


def _l6_rows(t1: pd.DataFrame, dataset: str) -> list[dict]:
    """L6 (Table XI): the manual and the adaptive ladder over VSE++ on image→text mAP."""
    rows = []
    for arm in (_MANUAL, _ADAPTIVE):
        statement = f"{arm} raises image→text mAP (5 paired captions as positives) over VSE++"
        rows += _contrast(dataset, "L6", "Table XI", statement, "i2t_map", t1, arm, _VSE)
    return rows


def yardstick_class(metric: str) -> str:
    """Which kind of evidence a claim row's metric is: Sentence-BERT (circular), binary ground truth (RSUM, mAP),
    a batch statistic (Fig. 6) or an independent yardstick (true relevance r*, expert judgements)."""
    if str(metric).endswith("_sbert"):
        return "circular (Sentence-BERT)"
    if metric in ("rsum", "i2t_map"):
        return "binary ground truth"
    if labels.has_label(str(metric)):
        return "independent yardstick"
    return "batch statistic"


def by_yardstick(claims: pd.DataFrame) -> pd.DataFrame:
    """The claim rows :meth:`reproduce.present.page.Page.finish` wrote, regrouped per claim by the kind of evidence
    (:func:`yardstick_class`: circular, independent yardstick, binary ground truth, batch statistic), each row
    with its contrast, metric and effect [95% interval] — what to read before any verdict (the verdicts are in
    ``results/claims.md``)."""
    kinds = ["independent yardstick", "circular (Sentence-BERT)", "binary ground truth", "batch statistic"]
    d = claims.assign(evidence=pd.Categorical([yardstick_class(m) for m in claims["metric"]], categories=kinds))
    d["effect [95% interval]"] = [
        f"{fmt_num(e)} [{fmt_num(lo)}, {fmt_num(hi)}]" for e, lo, hi in zip(d["effect"], d["ci_low"], d["ci_high"])
    ]
    d["metric"] = [labels.label(m) if labels.has_label(str(m)) else m for m in d["metric"]]
    out = d.sort_values(["id", "evidence"], kind="stable")[
        ["id", "evidence", "arms", "metric", "effect [95% interval]"]
    ]
    return out.rename(columns={"id": "claim", "arms": "contrast"}).reset_index(drop=True)
