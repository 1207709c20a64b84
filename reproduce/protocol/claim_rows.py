"""A claim's primary row computed from the runs, by claim id (what the notebooks call next round).

    from reproduce.protocol.claim_rows import primary_row, per_query_of, collapsed_arms
    df = st.results("bcls")
    ioc = st.splits().test.image_of_caption
    pq = {arm: per_query_of(st, "bcls", arm, ioc) for arm in ("Triplet-SN", "Triplet-HN")}
    row = primary_row("B1", "synthetic", df, per_query=pq, image_of_caption=ioc)  # → a claim-file row, role "primary"

The contrast (arms, metric, direction) comes from :mod:`reproduce.spec.claims`; the notebook never
retypes it. A list of arms enters as their mean, or (``versus = "each"``) as the smallest difference
over its arms, with a co-primary metric in the same minimum (:func:`_contrast_effects`). The curve
helpers (:func:`curve_mean`, :func:`after_warmup_window`) measure the notebook primaries about training
curves after the warm-up, over the same epochs for every arm compared.

For RSUM with per-query data the row carries the test images' own variance (``query_var``, from the seeds ×
test images table; ``test_images`` says over how many), which the ledger adds to the seed variance
(:mod:`reproduce.protocol.ledger`). A row written this way is the claim's primary row in
:func:`reproduce.driver.ledger_files.collect` (``role == "primary"``), whatever other rows match.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from coherent_itr import health
from coherent_itr.per_query import per_query_recall

from reproduce.spec import claims as registry
from reproduce.protocol.claim_files import NOTEBOOK_COLUMNS, verdict
from reproduce.protocol.ledger import paired_estimate
from reproduce.protocol.tuning import TuningIncomplete


def _metric_per_seed(df: pd.DataFrame, arm, metric) -> pd.Series:
    names = arm if isinstance(arm, tuple) else (arm,)
    cols = list(metric) if isinstance(metric, tuple) else [metric]
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise KeyError(f"metric column(s) {missing} not in the results; have {sorted(df.columns)}")
    parts = []
    for n in names:
        sub = df[df["arm"] == n]
        if not len(sub):
            raise KeyError(f"arm {n!r} has no runs in the results (arms: {sorted(df['arm'].unique())})")
        parts.append(sub.set_index("seed")[cols].mean(axis=1))
    return pd.concat(parts, axis=1).dropna().mean(axis=1)


def _contrast_effects(results: pd.DataFrame, p, dataset: str) -> tuple[list[float], str, list[int], list[str]]:
    """Per-seed effects of an arm contrast, a note naming what was compared, their seeds and the arms compared.

    ``versus="mean"``: A − mean(B) (one arm B is its own mean). ``versus="each"``: per seed the smallest
    A − B over the arms B of the list that the results have (an intersection–union test: the effect is
    > 0 in expectation only if A beats every B). A co-primary metric enters the same minimum, multiplied
    by ``co_scale``. Seeds are those every compared arm has."""
    metrics = [(p.metric_for(dataset), 1.0)]
    if p.co_metric is not None:
        metrics.append((p.co_metric_for(dataset), p.co_scale))
    if p.versus == "each":
        present = set(results["arm"])
        others = [b for b in p.arm_b if b in present]
        if not others:
            raise KeyError(f"none of the arms {list(p.arm_b)} has runs in the results (arms: {sorted(present)})")
    else:
        others = [p.arm_b]
    diffs = []
    for m, scale in metrics:
        a = _metric_per_seed(results, p.arm_a, m)
        for b in others:
            diffs.append(scale * (a - _metric_per_seed(results, b, m)))
    table = pd.concat(diffs, axis=1).dropna().sort_index()
    effects = [float(x) for x in table.min(axis=1)] if len(diffs) > 1 else [float(x) for x in table.iloc[:, 0]]
    seeds = [int(s) for s in table.index]
    arms = [n for arm in (p.arm_a, *others) for n in (arm if isinstance(arm, tuple) else (arm,))]
    if len(diffs) == 1:
        return effects, "", seeds, arms
    where = "each of " + ", ".join(others) if p.versus == "each" else str(p.arm_b)
    co = f" and {p.co_scale:g} × the co-primary {p.co_metric_for(dataset)}" if p.co_metric is not None else ""
    return (
        effects,
        f"effect per seed = the smallest difference: {p.arm_a} − {where}, on {metric_text(metrics[0][0])}{co}",
        seeds,
        arms,
    )


#: a run whose validation or test RSUM is below this share of the median of its arm's other seeds is failed
FAIL_FRACTION = 0.5
#: the fewest other seeds of the arm that give that median; with fewer, only the collapse rule applies
FAIL_MIN_OTHERS = 2
#: the per-run numbers the relative rule reads: ``Study.results``' column → its name in a reason
FAIL_NUMBERS = {"selected_val_rsum": "validation RSUM", "rsum": "test RSUM"}


def _flag(value) -> bool:
    """A ``collapsed`` cell as a bool (NaN, None: False)."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    try:
        return bool(value) and not (isinstance(value, float) and np.isnan(value))
    except (TypeError, ValueError):
        return False


def run_failures(results: pd.DataFrame) -> pd.DataFrame:
    """Per (arm, seed) run of ``results`` (``Study.results``), whether it failed and why — the failure definition of
    ``docs/protocol.md`` (training protocol, item 3): (a) collapsed (the ``collapsed`` column:
    :func:`coherent_itr.health.is_collapsed`), or (b) its validation RSUM at the selected checkpoint
    (``selected_val_rsum``) or its test RSUM (``rsum``) below :data:`FAIL_FRACTION` × the median of the same number
    over the same arm's other seeds (at least :data:`FAIL_MIN_OTHERS` of them). Columns ``arm, seed, failed, why``;
    empty when ``results`` has neither a health column nor an RSUM."""
    have = [c for c in FAIL_NUMBERS if c in results.columns]
    if "collapsed" not in results.columns and not have:
        return pd.DataFrame(columns=["arm", "seed", "failed", "why"])
    runs = results.drop_duplicates(["arm", "seed"]).reset_index(drop=True)
    out = []
    for arm, g in runs.groupby("arm", sort=False):
        for i, r in g.iterrows():
            why = []
            if "collapsed" in g.columns and _flag(r["collapsed"]):
                why.append(f"collapsed ({r.get('collapse_reason') or 'its health record'})")
            others = g.drop(index=i)
            for col in have:
                vals = pd.to_numeric(others[col], errors="coerce").dropna()
                own = pd.to_numeric(pd.Series([r[col]]), errors="coerce").iloc[0]
                if len(vals) < FAIL_MIN_OTHERS or not np.isfinite(own):
                    continue
                med = float(vals.median())
                if own < FAIL_FRACTION * med:
                    why.append(
                        f"{FAIL_NUMBERS[col]} {own:.1f} < {FAIL_FRACTION:g} × {med:.1f}, the median of its "
                        f"{len(vals)} other seeds"
                    )
            out.append({"arm": arm, "seed": int(r["seed"]), "failed": bool(why), "why": "; ".join(why)})
    return pd.DataFrame(out, columns=["arm", "seed", "failed", "why"])


def failed_seeds(results: pd.DataFrame, arms: list[str], seeds: list[int], predicted_to_fail: str = "") -> tuple:
    """``(failed, text)``: the seeds of ``seeds`` on which an arm of ``arms`` failed (:func:`run_failures`, the
    failure definition of ``docs/protocol.md``), and each arm's failure rate in words ("Triplet-HN failed 2 of 29
    seeds (3, 17)"; "0 of 5 seeds" when no arm failed); ``(None, "")`` when ``results`` has no health column (the
    runs' health unknown: nothing is claimed). The arm the claim predicts to fail is not counted: its failure is the
    predicted outcome."""
    if "collapsed" not in results.columns:
        return None, ""
    runs = run_failures(results)
    seeds = [int(s) for s in seeds]
    failed, parts = set(), []
    for arm in dict.fromkeys(a for a in arms if a != predicted_to_fail):
        sub = runs[(runs["arm"] == arm) & runs["seed"].isin(seeds)]
        bad = sorted(int(s) for s in sub.loc[sub["failed"].astype(bool), "seed"])
        if bad:
            failed |= set(bad)
            parts.append(f"{arm} failed {len(bad)} of {len(sub)} seeds ({', '.join(map(str, bad))})")
    return sorted(failed), "; ".join(parts) if parts else f"0 of {len(seeds)} seeds"


def failure_cells(results: pd.DataFrame, arms: list[str], seeds: list[int], predicted_to_fail: str = "") -> dict:
    """The claim-file cells ``seeds``, ``failed_seeds`` and ``failures`` of a row measured on ``arms`` over ``seeds``
    (:func:`failed_seeds`); ``{}`` when ``results`` says nothing about the runs' health."""
    failed, text = failed_seeds(results, arms, seeds, predicted_to_fail)
    if failed is None:
        return {}
    return {"seeds": ";".join(map(str, seeds)), "failed_seeds": ";".join(map(str, failed)), "failures": text}


#: the failures cell of a notebook-measured primary row that names no trained arm (a timing, a relevance source)
NO_TRAINED_ARM = "not applicable: the contrast names no trained arm"


def named_arms(arms_text: str, names) -> list[str]:
    """The arms of ``names`` that a row's ``arms`` text names: each part of it (split at " vs " and " − ") that is an
    arm name, or starts with one and a space or comma ("Triplet + S-NDCG test embeddings, τ = 0.001" → "Triplet +
    S-NDCG"; the longest such name); in the text's order, each once."""
    names = sorted({str(n) for n in names}, key=len, reverse=True)
    out = []
    for part in re.split(r" vs | − ", str(arms_text or "")):
        part = part.strip()
        hit = next((n for n in names if part == n or part.startswith((n + " ", n + ","))), None)
        if hit is not None and hit not in out:
            out.append(hit)
    return out


def notebook_failure_cells(results: pd.DataFrame, arms_text: str, n_effects: int) -> dict:
    """The failure cells of a notebook-measured primary row whose notebook passed none: the failed seeds
    (:func:`failure_cells`) of the arms its ``arms`` text names (:func:`named_arms`), over the seeds all of them
    have; ``seeds`` only when there are as many as the row's ``n_effects`` per-seed effects (a row over test
    batches has no seed per effect: its failure rate is reported, its verdict without failures is not computed).
    A row that names no arm of ``results``: :data:`NO_TRAINED_ARM`."""
    names = named_arms(arms_text, results["arm"].unique()) if "arm" in results.columns else []
    if not names:
        return {"failed_seeds": "", "failures": f"{NO_TRAINED_ARM} ({arms_text})"}
    seeds = sorted(set.intersection(*(set(results.loc[results["arm"] == a, "seed"].astype(int)) for a in names)))
    cells = failure_cells(results, names, seeds)
    if cells and len(seeds) != n_effects:
        cells.pop("seeds")
    return cells


def metric_text(m) -> str:
    return f"mean({', '.join(m)})" if isinstance(m, tuple) else str(m)


def primary_row(
    cid: str, dataset: str, results: pd.DataFrame, per_query: dict | None = None, image_of_caption=None
) -> dict:
    """The claim's primary row on ``dataset`` from ``Study.results(paper)`` (one row per arm and seed).

    ``per_query`` — ``{arm name: {seed: per_query_recall(...)}}`` (:func:`per_query_of`) for both arms of an RSUM
    contrast, with the test split's ``image_of_caption``; with them the row's uncertainty includes the test images'
    own variance (:func:`reproduce.protocol.ledger.paired_estimate`), on the seeds both arms have (an arm may
    have more: ``power_seeds.toml``)."""
    c = registry.claim(cid)
    p = c.primary
    if p.measure != "arms":
        raise ValueError(
            f"{cid}: its primary contrast is measured in the notebook ({p.statement!r}), "
            "not as a difference of two arms"
        )
    metric = p.metric_for(dataset)
    effects, compared, seeds, arms = _contrast_effects(results, p, dataset)
    failed, failures = failed_seeds(results, arms, seeds, p.predicted_to_fail)
    query_var, images = 0.0, 0
    if (
        per_query
        and metric == "rsum"
        and not isinstance(p.arm_a, tuple)
        and not isinstance(p.arm_b, tuple)
        and p.arm_a in per_query
        and p.arm_b in per_query
    ):
        if image_of_caption is None:
            raise ValueError(f"{cid}: per-query data need the test split's image_of_caption (the test-set unit)")
        est = paired_estimate(*_common_seeds(per_query[p.arm_a], per_query[p.arm_b]), image_of_caption)
        if not np.allclose(est.effect, np.mean(effects), atol=1e-6 * max(1.0, abs(est.effect))):
            raise ValueError(
                f"{cid}: RSUM from the stored embeddings ({est.effect:.4f}) differs from the test "
                f"records ({np.mean(effects):.4f}); the per-query data are not those of these runs"
            )
        query_var, images = est.query_var, int(np.max(image_of_caption)) + 1
    v, m, lo, hi = verdict(p.kind, effects, p.tolerance)
    leg = p.legacy_for(dataset)
    row = {
        "id": cid,
        "paper": c.paper,
        "source": c.source,
        "statement": p.statement,
        "metric": p.metric_label(dataset) if p.co_metric is not None else leg.get("metric") or p.metric_label(dataset),
        "dataset": dataset,
        "arms": leg.get("arms") or p.arms_label(),
        "n_seeds": len(effects),
        "effect": m,
        "ci_low": lo,
        "ci_high": hi,
        "tolerance": p.tolerance,
        "kind": p.kind,
        "verdict": v,
        "notebook": c.notebook,
        "note": compared,
        "seed_effects": ";".join(repr(float(x)) for x in effects),
    }
    if leg.get("sign") == -1:  # the legacy text is stated the other way round: keep the registry's arms
        row["arms"] = p.arms_label()
        row["metric"] = p.metric_label(dataset)
    missing = set(NOTEBOOK_COLUMNS) - set(row)
    if missing:
        raise AssertionError(f"primary_row lacks claim-file columns {sorted(missing)}")
    return {
        **row,
        "role": "primary",
        "query_var": query_var,
        "test_images": images,
        "seeds": ";".join(map(str, seeds)),
        **({} if failed is None else {"failed_seeds": ";".join(map(str, failed)), "failures": failures}),
    }


# --- curve contrasts (notebook-measured primaries: "converges faster", "similarities approach 1") ----------
def warmup_epochs(hist: pd.DataFrame) -> int:
    """The longest warm-up (epochs on all negatives, ``warmup`` True in the training log) of any run in
    ``hist``; 0 when the log has no ``warmup`` column. One number for every arm compared, so both arms
    are measured over the same epochs."""
    if "warmup" not in hist.columns or hist.empty:
        return 0
    warm = hist[hist["warmup"].astype(bool)]
    return int(warm.groupby(["arm", "seed"])["epoch"].max().max()) if len(warm) else 0


def after_warmup_window(hist: pd.DataFrame, early: bool = False) -> tuple[int, int]:
    """Epochs ``(first, last)`` after the warm-up that every run in ``hist`` reached: first = the longest
    warm-up + 1, last = the shortest run's last epoch; ``early``: the first half of those epochs (at
    least one). ``first > last`` when no run trained past its warm-up."""
    first = warmup_epochs(hist) + 1
    last = int(hist.groupby(["arm", "seed"])["epoch"].max().min()) if len(hist) else 0
    if early and last >= first:
        last = first + max(1, (last - first + 1) // 2) - 1
    return first, last


def curve_mean(hist: pd.DataFrame, value, early: bool = False) -> tuple[pd.DataFrame, tuple[int, int]]:
    """Per (arm, seed) the mean over the epochs of :func:`after_warmup_window` of ``value`` (a column of
    ``hist``, or a function of the frame returning a Series) — the area under the curve per epoch after
    the warm-up, the same window for every arm. Returns the frame ``arm, seed, value`` and the window."""
    first, last = after_warmup_window(hist, early)
    sub = hist[(hist["epoch"] >= first) & (hist["epoch"] <= last)]
    vals = sub[value] if isinstance(value, str) else value(sub)
    out = sub.assign(value=vals).groupby(["arm", "seed"], as_index=False)["value"].mean()
    return out, (first, last)


def window_text(window: tuple[int, int]) -> str:
    first, last = window
    return f"epoch {first}" if first == last else f"epochs {first}–{last}"


def both_cosines(frame: pd.DataFrame) -> pd.Series:
    """min(validation positive cosine, validation hardest-negative cosine): near 1 only when BOTH are."""
    return frame[["val_pos_sim", "val_hardneg_sim"]].min(axis=1)


def _common_seeds(a: dict, b: dict) -> tuple[list, list]:
    """Two arms' per-query data (``{seed: …}`` each) on the seeds both have, in seed order."""
    if not (isinstance(a, dict) and isinstance(b, dict)):
        raise TypeError(f"per-query data must be {{seed: per_query_recall(...)}} per arm, got {type(a).__name__}")
    seeds = sorted(set(a) & set(b))
    return [a[s] for s in seeds], [b[s] for s in seeds]


def per_query_of(study, paper: str, arm: str, image_of_caption=None) -> dict[int, dict]:
    """``{seed: per_query_recall(...)}`` of one arm, in seed order (:func:`~coherent_itr.per_query.
    per_query_recall`), from the runs' stored test embeddings (``RunResult.arrays['test_img'|'test_cap']``), or from
    the per-query hits a run imported without its embeddings carries (``'pq_i2t'|'pq_t2i'``:
    :mod:`reproduce.driver.run_archive`). ``image_of_caption``: the test split's, if the caller has it (else it is
    loaded when a run needs it)."""
    ioc = image_of_caption
    out = []
    for a, cfg, res in study._runs(paper, None):
        if a.name != arm:
            continue
        arrays = res.arrays
        if "test_img" not in arrays and {"pq_i2t", "pq_t2i"} <= set(arrays):
            out.append((cfg.seed, {d: arrays[f"pq_{d}"].astype(np.float64) * 100.0 for d in ("i2t", "t2i")}))
            continue
        if "test_img" not in arrays or "test_cap" not in arrays:
            raise KeyError(f"run of {arm!r} seed {cfg.seed} has no stored test embeddings")
        if ioc is None:
            ioc = study.splits().test.image_of_caption
        out.append((cfg.seed, per_query_recall(arrays["test_img"], arrays["test_cap"], ioc)))
    return dict(sorted(out, key=lambda t: t[0]))


def collapsed_arms(study, is_collapsed=None, papers=None) -> dict:
    """``{(data set, arm name): reason}`` for every arm of a primary contrast with a collapsed run
    (any seed), by ``coherent_itr.health.is_collapsed(record) -> (bool, reason)``; cached runs
    only (``papers``: only those papers' contrasts). Pass the result to
    :func:`reproduce.driver.ledger_files.collect`."""
    if is_collapsed is None:
        is_collapsed = health.is_collapsed
    out = {}
    for c in registry.CLAIMS.values():
        p = c.primary
        if p.measure != "arms" or (papers is not None and p.paper not in papers):
            continue
        names = {n for arm in (p.arm_a, p.arm_b) for n in (arm if isinstance(arm, tuple) else (arm,))}
        for arm in study.arms(p.paper):
            if arm.name not in names or (study.data, arm.name) in out:
                continue
            try:  # the tuned configs when the profile tunes; never trains (an untuned paper: health unknown)
                cfgs = study.configs(arm, train_missing=False)
            except TuningIncomplete:
                continue
            for cfg in cfgs:
                res = study.cache.load(cfg)
                if res is None:
                    continue
                bad, reason = is_collapsed(res.record)
                if bad:
                    out[(study.data, arm.name)] = f"seed {cfg.seed}: {reason}"
                    break
    return out
