"""The cross-paper questions of ``00_overview`` (X1–X3, ``claims.md`` "Across papers").

* X1 — the main comparison (its primary row: the VSE++ premise, hardest negatives beat all
  negatives): every loss family on the same backbone, data, budget and seeds, every metric;
* X2 — do continuous-label losses (arms whose loss trains on relevance) raise coherence against
  relevance they were *not* trained on (the synthetic world's r*, Flickr8k's expert judgements),
  beside the circular score against their own pseudo label (BCLS Sec. IV-D's caveat);
* X3 — training cost per epoch relative to VSE++ (Triplet-HN).
"""

from __future__ import annotations

import pandas as pd

from reproduce.protocol.study import paired_effect

BASE = "VSE++ (Triplet-HN)"
BINARY = ["i2t_r1", "i2t_r5", "i2t_r10", "t2i_r1", "t2i_r5", "t2i_r10", "rsum"]
PSEUDO = ["cs100_i2t_sbert", "cs1000_i2t_sbert", "tau_i2t_sbert", "ndcg100_i2t_sbert", "ncs5_i2t_cider"]
YARD = [
    "cs100_i2t_{y}",
    "cs1000_i2t_{y}",
    "tau_i2t_{y}",
    "ndcg100_i2t_{y}",
    "ncs5_i2t_{y}",
    "mapr_i2t_{y}",
    "rprec_i2t_{y}",
    "mapr_t2i_{y}",
]
HUMAN = ["expert_kendall_nongt", "expert_pearson_nongt"]


def x1_columns(df: pd.DataFrame, yard: str) -> tuple[list[str], list[str], list[str]]:
    """(binary R@K + RSUM, coherence against the pseudo labels, against the independent yardstick) — the
    metric keys of X1's table that ``df`` (``Study.results("overview")``) has."""
    have = set(df.columns)
    return (
        [c for c in BINARY if c in have],
        [c for c in PSEUDO if c in have],
        [c for c in [*(k.format(y=yard) for k in YARD), *HUMAN] if c in have],
    )


def x2_metrics(df: pd.DataFrame, yard: str) -> tuple[str, str]:
    """(circular, independent) metric keys of X2: CS@1000 image→text against Sentence-BERT, and against
    the yardstick (CS@1000 → Kendall τ → expert Kendall τ-b on non-GT pairs, the first ``df`` has)."""
    for m in (f"cs1000_i2t_{yard}", f"tau_i2t_{yard}", "expert_kendall_nongt"):
        if m in df.columns:
            return "cs1000_i2t_sbert", m
    raise KeyError(f"no independent coherence metric for yardstick {yard!r} in the results")


def continuous_arms(df: pd.DataFrame) -> list[str]:
    """The arms whose loss trains on continuous relevance (``uses_relevance``), in first-seen order."""
    return list(dict.fromkeys(df.loc[df["uses_relevance"].astype(bool), "arm"]))


def x2_table(df: pd.DataFrame, arms: list[str], metric_pseudo: str, metric_true: str, base: str = BASE):
    """Per arm: mean over seeds of the per-seed difference to ``base`` against the pseudo label and
    against the yardstick, and the per-seed effects of the latter (``{arm: [...]}``)."""
    rows, effects = [], {}
    for arm in arms:
        e_pseudo = paired_effect(df, metric_pseudo, arm, base)
        e_true = paired_effect(df, metric_true, arm, base)
        effects[arm] = e_true
        rows.append(
            {
                "arm": arm,
                f"Δ {metric_pseudo}": pd.Series(e_pseudo, dtype=float).mean(),
                f"Δ {metric_true}": pd.Series(e_true, dtype=float).mean(),
            }
        )
    return pd.DataFrame(rows).set_index("arm"), effects


def x3_cost(df: pd.DataFrame, base: str = BASE) -> tuple[pd.DataFrame, dict]:
    """Training seconds per epoch per arm (mean over seeds) and its ratio to ``base``, paired by seed;
    plus per arm the per-seed X3 effects ``0.15 − (ratio − 1)`` (> 0: overhead below 15 %), except for an arm
    that is the base's own runs (ratio exactly 1 on every seed)."""
    base_t = df[df.arm == base].set_index("seed")["time_train_s_per_epoch"]
    rows, effects = [], {}
    for arm in dict.fromkeys(df.arm):
        t = df[df.arm == arm].set_index("seed")["time_train_s_per_epoch"]
        ratio = (t / base_t).dropna()
        rows.append({"arm": arm, "s/epoch": t.mean(), "× VSE++": ratio.mean()})
        # an arm whose runs are the base's own (the warm-up variant the tuning chose for VSE++) times the same
        # runs twice: a ratio of exactly 1 on every seed compares VSE++ with itself, not a claim row
        if arm != base and not (len(ratio) and (ratio == 1.0).all()):
            effects[arm] = [float(x) for x in 0.15 - (ratio - 1.0)]
    return pd.DataFrame(rows).set_index("arm"), effects
