"""SAM Table 1 — does the relevance a metric credits agree with the yardstick? Per fold of test images, per pair
(:func:`agreement_folds`: the binary ground truth and each relevance provider against the true relevance or the human
judgements) and per query (:func:`per_query_agreement`: the per-query metrics of the study's runs against the quality
of their top 5), with the check that the per-query NCS@5 averages to the runs' records (:func:`ncs_identity`). What
notebook 03_sam shows of Table 1; the rest of the notebook is :mod:`reproduce.present.analyses.sam`'s.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from coherent_itr import metrics
from coherent_itr.metrics import HumanJudgements, provider_agreement

from reproduce.present import report
from reproduce.present.rankings import Ranking, as_ranking


RELEVANCE = {  # Table 1's columns: provider key → what a metric credits a pair with
    "binary": "binary ground truth (R@K)",
    "cider": "CIDEr-D relevance (NCS φ)",
    "sbert": "Sentence-BERT relevance",
    "spice": "SPICE relevance (paper only)",
}
N_FOLDS = 5
PER_QUERY = ("binary R^V@5", "R@5 (Eq. 1)", "NCS@5 (CIDEr-D)")
ARMS_100 = {"VSE++ (Triplet-HN)": "100% data, Triplet-HN", "VSE++ + SAM": "100% data, + SAM"}


# --- Table 1: does the relevance a metric credits agree with the yardstick? ---------------------------------
def folds(n_images: int, n_folds: int = N_FOLDS) -> np.ndarray:
    """The fold of every test image: ``n_folds`` contiguous, (nearly) equal blocks (S4's replicates)."""
    return np.arange(n_images) * n_folds // n_images


def gt_matrix(image_of_caption, n_images: int) -> np.ndarray:
    """The binary ground truth (n_images × n_captions): True where the caption was written for the image."""
    ioc = np.asarray(image_of_caption)
    g = np.zeros((n_images, len(ioc)), dtype=bool)
    g[ioc, np.arange(len(ioc))] = True
    return g


def _judgement_sets(fold_rows, yard_rel, hum, gt, rng) -> dict:
    out = {}
    if hum is None:
        ii, jj = np.meshgrid(fold_rows, np.arange(gt.shape[1]), indexing="ij")
        ii, jj = ii.ravel(), jj.ravel()
        out["every pair"] = HumanJudgements(ii, jj, yard_rel[ii, jj], "true")
        g = gt[ii, jj]
        n_non = int(round(g.sum() * (44 - 25) / 25))  # Criss-Crossed: 25k of 44k judged pairs are GT
        pick = np.r_[np.flatnonzero(g), rng.choice(np.flatnonzero(~g), n_non, replace=False)]
        out["CxC-like mix (57% GT)"] = HumanJudgements(ii[pick], jj[pick], yard_rel[ii[pick], jj[pick]], "true")
        return out
    for src in ("expert", "crowd"):
        if src in hum:
            h = hum[src]
            img = np.asarray(h["image_idx"])
            keep = np.isin(img, fold_rows)
            out[f"{src}-judged pairs"] = HumanJudgements(
                img[keep], np.asarray(h["caption_idx"])[keep], np.asarray(h["score"], dtype=float)[keep], src
            )
    return out


def agreement_folds(
    image_of_caption, n_images: int, providers: dict, yard_rel=None, hum=None, n_folds: int = N_FOLDS, seed: int = 0
) -> pd.DataFrame:
    """SAM Table 1 per fold of test images: Pearson r between the yardstick and the relevance each metric
    credits a pair with — the binary GT indicator (binary recall) and each provider (``{"cider": φ, …}``).

    Synthetic (``hum`` None): the true relevance ``yard_rel`` over every pair and over a Criss-Crossed-like
    mix (all GT pairs + random non-GT pairs, 57% GT; its non-GT subset is left out: a subsample of the
    "every pair" one). Flickr8k: the expert / CrowdFlower scores of ``hum`` over their judged pairs.
    Rows: fold, pair set, subset (all / non-GT pairs), relevance (provider key), pearson, n_pairs."""
    ioc = np.asarray(image_of_caption)
    gt, fold_of = gt_matrix(ioc, n_images), folds(n_images, n_folds)
    rng, rows = np.random.default_rng(seed), []
    for fold in range(n_folds):
        for set_name, J in _judgement_sets(np.flatnonzero(fold_of == fold), yard_rel, hum, gt, rng).items():
            agr = provider_agreement(providers, J, ioc, include_binary=True)
            for prov in ("binary", *providers):
                for tag, subset in (("all", "all pairs"), ("nongt", "non-GT pairs")):
                    if set_name.startswith("CxC") and tag == "nongt":
                        continue
                    rows.append(
                        {
                            "fold": fold,
                            "pair set": set_name,
                            "subset": subset,
                            "relevance": prov,
                            "pearson": agr[f"{J.name}_{prov}_pearson_{tag}"],
                            "n_pairs": agr[f"{J.name}_{prov}_n_{tag}"],
                        }
                    )
    return pd.DataFrame(rows)


def agreement_wide(long: pd.DataFrame) -> pd.DataFrame:
    """:func:`agreement_folds` as one row per (fold, "pair set · subset") with one Pearson r column per
    relevance and the number of pairs (SAM Table 1's layout, per fold)."""
    d = long.assign(row=long["pair set"] + " · " + long["subset"])
    wide = d.pivot_table(index=["fold", "row"], columns="relevance", values="pearson", sort=False)
    wide.columns.name = None
    n = d.groupby(["fold", "row"], sort=False)["n_pairs"].first().rename("pairs per fold")
    return wide.join(n).reset_index()


def agreement_table(wide: pd.DataFrame, blocks: dict, ours_label: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """SAM Table 1 analogue: Pearson r per relevance, mean ± std over folds, and the pairs per fold (an
    integer), above the paper's rows (:func:`reproduce.spec.paper_numbers.table`). Returns (numbers, readable)."""
    rels = [c for c in RELEVANCE if c in wide.columns]
    summ = report.summary(wide, rels, by="row")
    pairs = wide.groupby("row", sort=False)["pairs per fold"].mean().round().astype(int)
    shown = report.pretty(summ, rels, digits=3).assign(**{"pairs per fold": pairs.astype(str)})
    paper = {k: v.reindex(columns=[*rels, "spice"]) for k, v in blocks.items()}
    table = report.side_by_side(shown.assign(spice="–"), paper, ours_label)
    numbers = pd.concat({ours_label: summ.join(pairs), **paper}, names=["source", "row"])
    return numbers, table.reindex(columns=[*rels, "spice", "pairs per fold"]).fillna("–")


# --- Table 1, model-based variant: per query ----------------------------------------------------------------
def ncs_per_query(sim, image_of_caption, rel, k: int = 5, direction: str = "i2t") -> np.ndarray:
    """NCS@k of every query (SAM Eq. 5 with the ground truth kept, percent; NaN where the ideal sum is 0):
    :func:`coherent_itr.metrics.per_query`, the values whose mean is :func:`coherent_itr.metrics.ncs` / the
    ``ncs{k}_{d}_…`` record key (same ranking and tie rule)."""
    values = metrics.per_query(
        sim,
        image_of_caption,
        "ncs",
        rel,
        directions=(direction,),
        ncs_ks=(int(k),),
        ncs_remove_gt=(False,),
        ncs_restrict_to_ideal=False,
    )
    return values[f"ncs{k}_{direction}"]


def per_query_metrics(sim, image_of_caption, phi, quality_rel, captions_per_image: int) -> pd.DataFrame:
    """Per image query (SAM Table 1, model-based reading): the mean yardstick relevance of the model's top-5
    captions (``quality``) beside the per-query metrics that could report it — binary R^V@5 (a GT caption in
    the top 5), R@5 of Eq. 1 (share of the GT captions in the top 5) and NCS@5 with φ (:func:`ncs_per_query`).
    Every column ranks ties by the library's one rule (:func:`coherent_itr.metrics.ranked_top`: less relevant first,
    relevance being what the column measures — the yardstick for ``quality``, the GT flag for the recalls, φ for
    NCS@5), so a tie at place 5 never flatters one column and not another. ``sim``: the similarity matrix, or a
    :class:`~reproduce.present.rankings.Ranking` that kept more than each image query's top 5 (every column is then
    computed on its :meth:`~reproduce.present.rankings.Ranking.scores`)."""
    scores = as_ranking(sim).scores(5)
    rows = np.arange(scores.shape[0])[:, None]
    quality_rel, gt = np.asarray(quality_rel), gt_matrix(image_of_caption, scores.shape[0])
    hits = gt[rows, metrics.ranked_top(scores, 5, key=gt.astype(np.float64))]
    return pd.DataFrame(
        {
            "quality": quality_rel[rows, metrics.ranked_top(scores, 5, key=quality_rel)].mean(axis=1),
            "binary R^V@5": hits.any(axis=1).astype(float),
            "R@5 (Eq. 1)": hits.sum(axis=1) / captions_per_image,
            "NCS@5 (CIDEr-D)": ncs_per_query(scores, image_of_caption, phi, 5, "i2t"),
        }
    )


def fold_pearson(pq: pd.DataFrame, fold_of_query: np.ndarray) -> pd.DataFrame:
    """Pearson r across the queries of each fold between each per-query metric and ``quality``
    (0 when either side is constant in the fold, as SAM Table 1 reports an undefined r)."""
    out = []
    for fold in np.unique(fold_of_query):
        q = pq[fold_of_query == fold]
        for m in PER_QUERY:
            ok = np.ptp(q[m]) > 0 and np.ptp(q["quality"]) > 0
            out.append(
                {"fold": int(fold), "metric": m, "pearson": float(np.corrcoef(q[m], q["quality"])[0, 1]) if ok else 0.0}
            )
    return pd.DataFrame(out)


def per_query_agreement(study, paper: str, arms: dict, split, phi, quality_rel, n_folds: int = N_FOLDS):
    """SAM Table 1, model-based variant, for the runs (every seed, tuned configs) of ``arms``
    (``{model label: arm name}``): per (model, seed, fold, metric) the Pearson r of :func:`fold_pearson`, and a
    check frame (model, seed, mean per-query NCS@5 — equal to the run's ``ncs5_i2t_cider`` record)."""
    by_name = {a.name: a for a in study.arms(paper)}
    fold_of = folds(split.n_images, n_folds)
    rows, check = [], []
    for label, arm in arms.items():
        for cfg in study.configs(by_name[arm]):
            ranking = Ranking.of_run(study.cache.get_or_train(cfg, progress=False))
            pq = per_query_metrics(ranking, split.image_of_caption, phi, quality_rel, split.captions_per_image)
            rows.append(fold_pearson(pq, fold_of).assign(model=label, seed=cfg.seed))
            check.append({"model": label, "seed": cfg.seed, "mean per-query NCS@5": pq["NCS@5 (CIDEr-D)"].mean()})
    return pd.concat(rows, ignore_index=True), pd.DataFrame(check)


def per_query_table(pq: pd.DataFrame) -> pd.DataFrame:
    """SAM Table 1, model-based variant: per model and per-query metric, the Pearson r with the quality of the
    top 5 averaged over seeds per fold, then mean and std over folds (columns ``<metric>`` / ``<metric>_std``)."""
    fold = pq.groupby(["model", "metric", "fold"], sort=False)["pearson"].mean().reset_index()
    agg = fold.groupby(["model", "metric"], sort=False)["pearson"].agg(["mean", "std"]).unstack("metric")
    out = agg["mean"].join(agg["std"].add_suffix("_std"))
    return out[[c for m in PER_QUERY for c in (m, f"{m}_std")]]


def ncs_identity(check: pd.DataFrame, results: pd.DataFrame, arms: dict = ARMS_100, tol: float = 1e-6) -> float:
    """Largest |mean per-query NCS@5 − the run's ``ncs5_i2t_cider``| over the runs of
    :func:`per_query_agreement` (SAM Eq. 5): the per-query values are the library's; raises above ``tol``."""
    rec = results.set_index(["arm", "seed"])["ncs5_i2t_cider"]
    dev = [abs(r["mean per-query NCS@5"] - rec[(arms[r["model"]], r["seed"])]) for r in check.to_dict("records")]
    worst = float(max(dev)) if dev else 0.0
    if worst > tol:
        raise AssertionError(f"per-query NCS@5 does not average to the test record (max |Δ| = {worst:.3g})")
    return worst
