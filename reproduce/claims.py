"""Every claim of ``notes/claims.md`` declared ONCE: its primary contrast, its paper's effect, its notebook.

A claim is decided per data set by ONE primary row (issue 15): arm A vs arm B (names as in
:mod:`reproduce.experiments`) on one metric key of the test records, a direction (A − B > 0) or an
equivalence (|A − B| < tolerance), or an identity. Every other row a notebook writes for the
claim is ``secondary`` (robustness: other metrics, other yardsticks) and never decides it.
No contrast (arms + metric) is the primary row of two claims (tested).

``measure="arms"`` — the effect is a paired difference of two arms' test metrics (or of means of
arms, for a peak: ``arm_b=("α=0", "α=0.4")``), computable from the run cache;
``measure="notebook"`` — a quantity that is not an arm contrast (complexity slope, label agreement,
approximation error, identity, curves): its per-seed (per-fold, per-batch) effects come from the
notebook's claim file. Until the notebooks compute rows *by claim id*, every primary row is read
from the notebook's file; ``legacy`` says how to recognise it there (metric and arms text, and a
statement fragment where those are not unique); ``sign=-1`` flips a row stated the other way round.

The papers' reported effects live in ``reproduce/data/paper_effects.csv`` (read by
:func:`paper_effects`), with table/figure, backbone and data set.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

PAPER_EFFECTS_CSV = Path(__file__).resolve().parent / "data" / "paper_effects.csv"
DATASETS = ("synthetic", "flickr8k")
# the relevance a loss was NOT trained on: synthetic world → true relevance r*, Flickr8k → expert judgements
YARD = {"synthetic": "true", "flickr8k": "expert"}


@dataclass(frozen=True)
class Contrast:
    statement: str
    metric: object  # record key, tuple of keys (their mean) or {dataset: key}
    unit: str
    kind: str = "direction"  # direction | equivalence | identity
    paper: str = ""  # experiments.py paper key of the arms
    arm_a: object = ""  # arm name, or tuple of arm names (their mean)
    arm_b: object = ""
    tolerance: float | None = None
    measure: str = "arms"  # "arms" | "notebook"
    legacy: dict = field(default_factory=dict)  # metric / arms / statement (fragment) / sign, per data set allowed
    ratio: bool = True  # our effect / paper's effect is meaningful (same zero and unit)

    def metric_for(self, dataset: str):
        return self.metric.get(dataset) if isinstance(self.metric, dict) else self.metric

    def metric_label(self, dataset: str) -> str:
        """``rsum``, or ``mean(tau_i2t_sbert, tau_t2i_sbert)`` for a tuple of record keys."""
        m = self.metric_for(dataset)
        return f"mean({', '.join(m)})" if isinstance(m, tuple) else str(m)

    def arms_label(self) -> str:
        def name(a):
            return f"mean of {', '.join(a)}" if isinstance(a, tuple) else str(a)

        if not self.arm_a:
            return ""
        return f"{name(self.arm_a)} − {name(self.arm_b)}"

    def legacy_for(self, dataset: str) -> dict:
        return {k: (v.get(dataset) if isinstance(v, dict) else v) for k, v in self.legacy.items()}


@dataclass(frozen=True)
class Claim:
    id: str
    paper: str
    statement: str
    source: str
    notebook: str
    primary: Contrast
    datasets: tuple = DATASETS


def _yard(fmt: str) -> dict:
    return {d: fmt.format(y=y) for d, y in YARD.items()}


def _c(statement, metric, unit, paper="", a="", b="", legacy_metric=None, legacy_arms=None, **kw) -> Contrast:
    legacy = dict(kw.pop("legacy", {}))
    legacy.setdefault("metric", legacy_metric if legacy_metric is not None else metric)
    if legacy_arms is not None:
        legacy.setdefault("arms", legacy_arms)
    return Contrast(statement, metric, unit, paper=paper, arm_a=a, arm_b=b, legacy=legacy, **kw)


RSUM = "RSUM points"
X_BCLS, X_VSE = "BCLS (Triplet-SN + Kendall SW-HS)", "VSE++ (Triplet-HN)"

CLAIMS: dict[str, Claim] = {
    c.id: c
    for c in [
        # --- BCLS -------------------------------------------------------------------------------------
        Claim(
            "B1",
            "BCLS",
            "Triplet-SN alone beats Triplet-HN on RSUM and converges faster",
            "Table VIII, Fig. 4",
            "01_bcls",
            _c(
                "Triplet-SN beats Triplet-HN on test RSUM",
                "rsum",
                RSUM,
                "bcls",
                "Triplet-SN",
                "Triplet-HN",
                legacy_arms="Triplet-SN vs Triplet-HN",
            ),
        ),
        Claim(
            "B2",
            "BCLS",
            "Triplet-SN + Kendall SW-HS (BCLS) beats Triplet-SN alone on RSUM",
            "Table VIII",
            "01_bcls",
            _c(
                "BCLS beats Triplet-SN on test RSUM",
                "rsum",
                RSUM,
                "bcls",
                "BCLS",
                "Triplet-SN",
                legacy_arms="BCLS vs Triplet-SN",
            ),
        ),
        Claim(
            "B3",
            "BCLS",
            "Kendall SW-HS alone is far worse on RSUM than any arm with a binary-label term",
            "Table VIII",
            "01_bcls",
            _c(
                "Kendall SW-HS alone is worse on test RSUM than the weakest binary-label arm (Triplet-HN)",
                "rsum",
                RSUM,
                "bcls",
                "Triplet-HN",
                "Kendall SW-HS alone",
                legacy_arms="Triplet-HN vs Kendall SW-HS alone",
            ),
        ),
        Claim(
            "B4",
            "BCLS",
            "BCLS has a much higher Kendall τ (pseudo labels, test set) than VSE++, ladder and SAM",
            "Table VI",
            "01_bcls",
            _c(
                "BCLS has a higher Kendall τ on the S-BERT pseudo labels than VSE++ (mean of I→T and T→I)",
                ("tau_i2t_sbert", "tau_t2i_sbert"),
                "Kendall τ",
                "overview",
                X_BCLS,
                X_VSE,
                legacy_metric="tau (sbert), mean of I→T and T→I",
                legacy_arms=f"{X_BCLS} vs {X_VSE}",
            ),
        ),
        Claim(
            "B5",
            "BCLS",
            "α sweep: RSUM and τ peak near α = std of intra-image caption similarity",
            "Fig. 5a,b",
            "01_bcls",
            _c(
                "RSUM at α = 0.2 (nearest the measured std) exceeds the mean over the sweep's other α",
                "rsum",
                RSUM,
                "bcls",
                "α=0.2",
                ("α=0", "α=0.4"),
                legacy_arms="α=0.2 vs mean of α ∈ {0, 0.4}",
            ),
        ),
        Claim(
            "B6",
            "BCLS",
            "β sweep: smaller β is better; report the cost of each β",
            "Fig. 5c,d",
            "01_bcls",
            _c(
                "RSUM at β = 0.05 exceeds RSUM at β = 0.4",
                "rsum",
                RSUM,
                "bcls",
                "β=0.05",
                "β=0.4",
                legacy_arms="β=0.05 vs β=0.4",
            ),
        ),
        Claim(
            "B7",
            "BCLS",
            "SW-HS costs O(M·N²) vs O(N³) for the full Kendall loss",
            "Sec. III-D",
            "01_bcls",
            _c(
                "log–log slope of loss time vs batch size N: full Kendall minus SW-HS",
                "slope_difference",
                "log–log slope",
                measure="notebook",
                legacy_metric="log-log slope of ms vs N",
                legacy_arms="kendall vs kendall_sw_hs (β=0.1)",
            ),
        ),
        Claim(
            "B8",
            "BCLS",
            "BCLS improves semantic retrieval over Triplet-HN (relevance not its training label)",
            "Tables VII, IX",
            "01_bcls",
            _c(
                "BCLS beats Triplet-HN on mAP@R against relevance it was not trained on (mean of i2t and t2i)",
                {d: (f"mapr_i2t_{y}", f"mapr_t2i_{y}") for d, y in YARD.items()},
                "% (mAP@R)",
                "bcls",
                "BCLS",
                "Triplet-HN",
                legacy_metric=_yard("mAP@R ({y}), mean of i2t and t2i"),
                legacy_arms="BCLS vs Triplet-HN",
            ),
        ),
        Claim(
            "B9",
            "BCLS",
            "S-BERT pseudo labels agree with human relevance better than CIDEr (Pearson)",
            "Table II",
            "01_bcls",
            _c(
                "Pearson r with independent relevance, S-BERT minus CIDEr-D, all pairs",
                "pearson_difference",
                "Pearson r",
                measure="notebook",
                legacy_metric=_yard("Pearson(provider, {y}), all pairs"),
                legacy_arms="sbert vs cider",
            ),
        ),
        # --- Ladder -----------------------------------------------------------------------------------
        Claim(
            "L1",
            "Ladder",
            "Ladder loss raises CS@100 and CS@1000 over VSE++ with comparable R@K",
            "Tables I, III",
            "02_ladder",
            _c(
                "Ladder (manual) raises CS@1000 i2t (Sentence-BERT relevance) over VSE++",
                "cs1000_i2t_sbert",
                "CS@1000",
                "ladder",
                "Ladder (manual)",
                "VSE++",
                legacy_arms="Ladder (manual) − VSE++",
            ),
        ),
        Claim(
            "L2",
            "Ladder",
            "β₂ sweep: CS improves with β₂, R@K drops near 0.5",
            "Tables IV, V",
            "02_ladder",
            _c(
                "manual ladder: CS@100 i2t rises from β₂ = 0 to 0.5",
                "cs100_i2t_sbert",
                "CS@100",
                "ladder",
                "manual β₂=0.5",
                "manual β₂=0",
                legacy_arms="manual β₂=0.5 − manual β₂=0",
            ),
        ),
        Claim(
            "L3",
            "Ladder",
            "L sweep: L = 2 suffices for CS@100, L = 3 helps CS@200",
            "Tables VI, VII",
            "02_ladder",
            _c(
                "L = 3 raises CS@200 i2t over L = 2",
                "cs200_i2t_sbert",
                "CS@200",
                "ladder",
                "L=3",
                "L=2",
                legacy_arms="L=3 − L=2",
            ),
        ),
        Claim(
            "L4",
            "Ladder",
            "(L_MIN, L_MAX) sweep: adaptive beats fixed; (2,4) is best",
            "Tables VIII, IX",
            "02_ladder",
            _c(
                "adaptive (2,4) beats fixed (2,2) on CS@100 i2t",
                "cs100_i2t_sbert",
                "CS@100",
                "ladder",
                "(2,4)",
                "(2,2)",
                legacy_arms="(2,4) − (2,2)",
            ),
        ),
        Claim(
            "L5",
            "Ladder",
            "Relevance degrees within a batch vary widely",
            "Fig. 6",
            "02_ladder",
            _c(
                "rows of a batch differ in how many candidates reach θ beyond sampling noise (std / binomial std − 1)",
                "row_dispersion",
                "ratio − 1",
                measure="notebook",
                legacy_metric="std over rows of n≥θ / binomial std − 1",
                legacy_arms="20 train batches of 128",
            ),
        ),
        Claim(
            "L6",
            "Ladder",
            "Ladder loss raises image→text mAP (5 positives per image)",
            "Table XI",
            "02_ladder",
            _c(
                "Ladder (manual) raises image→text mAP over VSE++",
                "i2t_map",
                "mAP (0–1)",
                "ladder",
                "Ladder (manual)",
                "VSE++",
                legacy_arms="Ladder (manual) − VSE++",
            ),
        ),
        # --- SAM --------------------------------------------------------------------------------------
        Claim(
            "S1",
            "SAM",
            "With 10% / 25% of the training data, adding SAM gives a large gain in RSUM and NCS",
            "Table 2",
            "03_sam",
            _c(
                "with 10% of the training data, + SAM beats Triplet-HN on RSUM",
                "rsum",
                RSUM,
                "sam",
                "10% data, + SAM",
                "10% data, Triplet-HN",
                legacy_arms="10% data, + SAM vs 10% data, Triplet-HN",
            ),
        ),
        Claim(
            "S2",
            "SAM",
            "With all the data, SAM gives a small gain in RSUM and NCS",
            "Table 3",
            "03_sam",
            _c(
                "with all the training data, + SAM beats Triplet-HN on RSUM",
                "rsum",
                RSUM,
                "sam",
                "100% data, + SAM",
                "100% data, Triplet-HN",
                legacy_arms="100% data, + SAM vs 100% data, Triplet-HN",
            ),
        ),
        Claim(
            "S3",
            "SAM",
            "τ × sampling × keep-triplet: SN is best on average; keeping the triplet helps",
            "Tables 4, 5",
            "03_sam",
            _c(
                "SN sampling beats HN on RSUM, mean over the τ × keep-triplet cells",
                "rsum",
                RSUM,
                measure="notebook",
                legacy_arms="SAM SN vs HN, mean over 4 cells",
            ),
        ),
        Claim(
            "S4",
            "SAM",
            "NCS correlates with human relevance better than binary recall",
            "Table 1",
            "03_sam",
            _c(
                "CIDEr-D relevance (NCS) minus the binary GT indicator: Pearson r with independent relevance, "
                "all pairs",
                "pearson_difference",
                "Pearson r",
                measure="notebook",
                legacy={
                    "metric": {
                        "synthetic": "Pearson r difference vs true relevance r*",
                        "flickr8k": "Pearson r difference vs expert judgements",
                    },
                    "statement": {
                        "synthetic": "(every pair, all pairs)",
                        "flickr8k": "(expert-judged pairs, all pairs)",
                    },
                },
            ),
        ),
        Claim(
            "S5",
            "SAM",
            "As the number m of relevant items grows, R@5 rises while Semantic Recall falls",
            "Fig. 3",
            "03_sam",
            _c(
                "Semantic Recall@5 (t2i, G̃ by CIDEr-D) falls from m = 5 to m = 20 for VSE++",
                "sr5m5_minus_sr5m20",
                "Semantic Recall points",
                measure="notebook",
                legacy_metric="sr5m5−sr5m20 t2i cider",
                legacy_arms="100% data, Triplet-HN",
            ),
        ),
        # --- Listwise ---------------------------------------------------------------------------------
        Claim(
            "N1",
            "Listwise",
            "Triplet + S-NDCG beats Triplet, which beats S-NDCG alone, on RSUM",
            "Tables V, VI",
            "04_listwise",
            _c(
                "Triplet + S-NDCG beats Triplet on RSUM",
                "rsum",
                RSUM,
                "listwise",
                "Triplet + S-NDCG",
                "Triplet (mean)",
                legacy_arms="Triplet + S-NDCG vs Triplet (mean)",
            ),
        ),
        Claim(
            "N2",
            "Listwise",
            "The same ordering holds on semantic retrieval",
            "Table VII",
            "04_listwise",
            _c(
                "Triplet + S-NDCG beats Triplet on mAP@R against relevance it was not trained on (mean of i2t, t2i)",
                {d: (f"mapr_i2t_{y}", f"mapr_t2i_{y}") for d, y in YARD.items()},
                "% (mAP@R)",
                "listwise",
                "Triplet + S-NDCG",
                "Triplet (mean)",
                legacy_metric=_yard("mapr (i2t+t2i)/2 vs {y}, %"),
                legacy_arms="Triplet + S-NDCG vs Triplet (mean)",
            ),
        ),
        Claim(
            "N3",
            "Listwise",
            "NDCG-hat tracks the true batch NDCG; the error falls below 0.01 for τ ≤ 1e-2",
            "Figs. 6, 7",
            "04_listwise",
            _c(
                "0.01 minus the NDCG approximation error at τ = 1e-2 (per test batch)",
                "approximation_margin",
                "0.01 − |NDCG-hat − NDCG|",
                measure="notebook",
                ratio=False,
                legacy_metric="0.01 − |NDCG-hat − NDCG| per batch",
            ),
        ),
        Claim(
            "N4",
            "Listwise",
            "τ sweep: 1e-1 hurts; performance is flat for τ ≤ 1e-2",
            "Figs. 8, 9",
            "04_listwise",
            _c(
                "τ = 1e-1 hurts RSUM compared with τ = 1e-2",
                "rsum",
                RSUM,
                "listwise",
                "τ=0.01",
                "τ=0.1",
                legacy_arms="τ=0.01 vs τ=0.1",
            ),
        ),
        Claim(
            "N5",
            "Listwise",
            "Adding the listwise term costs ≈ 5% more training time and nothing at test time",
            "Table VIII",
            "04_listwise",
            _c(
                "the listwise term adds at most 10% to a training epoch (effect = 0.10 − overhead)",
                "overhead_margin",
                "0.10 − relative overhead",
                measure="notebook",
                ratio=False,
                legacy_metric="0.10 − relative train s/epoch overhead",
            ),
        ),
        Claim(
            "N6",
            "Listwise",
            "RSC relevance ranks semantic positives far better than binary annotations",
            "Table I",
            "04_listwise",
            _c(
                "RSC (paired) minus binary annotation: mAP@R of ranking by the relevance itself (mean of i2t, t2i)",
                "mapr_difference",
                "% (mAP@R)",
                measure="notebook",
                legacy_metric="mapr (i2t+t2i)/2, %, random tie-break",
                legacy_arms="RSC (paired) vs binary annotation",
            ),
        ),
        Claim(
            "N7",
            "Listwise",
            "With S-NDCG the loss converges faster",
            "Fig. 5",
            "04_listwise",
            _c(
                "Triplet + S-NDCG has a higher mean validation RSUM over the first half of training than Triplet",
                "early_val_rsum",
                "validation RSUM points",
                measure="notebook",
                legacy_metric="mean val RSUM, epochs 1–1",
                legacy_arms="Triplet + S-NDCG vs Triplet (mean)",
            ),
        ),
        # --- Unified ----------------------------------------------------------------------------------
        Claim(
            "U1",
            "Unified",
            "Unified loss beats Triplet-HN and VLC on RSUM",
            "Tables 1, 2",
            "05_unified",
            _c(
                "Unified (m = 0.2, γ = 60) beats Triplet-HN on RSUM",
                "rsum",
                RSUM,
                "unified",
                "Unified",
                "Triplet-HN",
                legacy_metric="rsum (test, %)",
                legacy_arms="Unified vs Triplet-HN",
            ),
        ),
        Claim(
            "U2",
            "Unified",
            "Triplet-HN suffers vanishing gradients early; Unified and VLC do not",
            "Fig. 4, Sec. 3.3",
            "05_unified",
            _c(
                "highest validation hardest-negative cosine over the epochs, Triplet-HN minus Unified",
                "max_val_hardneg_sim",
                "cosine",
                measure="notebook",
                legacy_metric="max over epochs of val_hardneg_sim",
                legacy_arms="Triplet-HN vs Unified",
            ),
        ),
        Claim(
            "U3",
            "Unified",
            "Unified converges faster than Triplet-HN",
            "Fig. 3",
            "05_unified",
            _c(
                "Unified has a higher mean validation RSUM over the first half of training than Triplet-HN",
                "early_val_rsum",
                "validation RSUM points",
                measure="notebook",
                legacy_metric="mean val_rsum, epochs 1–1 (%)",
                legacy_arms="Unified vs Triplet-HN",
            ),
        ),
        Claim(
            "U4",
            "Unified",
            "m sweep at γ = 60: m = 0.2 best; every m > 0 beats VLC",
            "Fig. 5a",
            "05_unified",
            _c(
                "m = 0.2 beats m = 0.4 on RSUM (γ = 60)",
                "rsum",
                RSUM,
                "unified",
                "m=0.2",
                "m=0.4",
                legacy_metric="rsum (test, %)",
                legacy_arms="m=0.2 vs m=0.4",
            ),
        ),
        Claim(
            "U5",
            "Unified",
            "γ sweep at m = 0.2: rises then falls",
            "Fig. 5b",
            "05_unified",
            _c(
                "RSUM rises with γ: γ = 60 beats γ = 20",
                "rsum",
                RSUM,
                "unified",
                "γ=60",
                "γ=20",
                legacy_metric="rsum (test, %)",
                legacy_arms="γ=60 vs γ=20",
            ),
        ),
        Claim(
            "U6",
            "Unified",
            "Identities between the losses (Eqs. 6–7, 11, 16)",
            "Eqs. 6–7, 11, 16",
            "05_unified",
            _c(
                "γ·Unified(m = 0) = VLC (values and gradients)",
                "relative_deviation",
                "relative deviation",
                kind="identity",
                tolerance=1e-10,
                measure="notebook",
                ratio=False,
                legacy={"metric": "relative deviation", "statement": "γ·Unified(m=0) = VLC"},
            ),
        ),
        # --- Across papers ----------------------------------------------------------------------------
        Claim(
            "X1",
            "Across papers",
            "One fair table: every loss family on the same backbone, data, epochs and seeds",
            "question X1",
            "00_overview",
            _c(
                "hardest-negative mining (VSE++) beats the triplet loss over all negatives on RSUM — the premise every "
                "paper builds on",
                "rsum",
                RSUM,
                "overview",
                X_VSE,
                "Triplet (all negatives)",
                legacy={"arms": f"Triplet (all negatives) vs {X_VSE}", "sign": -1},
            ),
        ),
        Claim(
            "X2",
            "Across papers",
            "Do continuous-label losses improve coherence against relevance that is not the training pseudo label?",
            "question X2",
            "00_overview",
            _c(
                "BCLS raises coherence over VSE++ against relevance it was not trained on",
                {"synthetic": "cs1000_i2t_true", "flickr8k": "expert_kendall_nongt"},
                "CS@1000 / Kendall τ",
                "overview",
                X_BCLS,
                X_VSE,
                legacy_arms=f"{X_BCLS} vs {X_VSE}",
            ),
        ),
        Claim(
            "X3",
            "Across papers",
            "Cost per training step of every loss relative to Triplet-HN",
            "question X3",
            "00_overview",
            _c(
                "BCLS adds at most 15% to a training epoch of VSE++ (effect = 0.15 − overhead)",
                "overhead_margin",
                "0.15 − relative overhead",
                measure="notebook",
                ratio=False,
                legacy_metric="train s/epoch ratio",
                legacy_arms=f"{X_BCLS} vs {X_VSE}",
            ),
        ),
    ]
}

# Arms identical in expectation (issue 15): their per-seed differences enter the noise floor.
# A pair whose two arms resolve to the same config shares one run (difference exactly 0) and is skipped.
NULL_PAIRS = [
    ("ladder", "manual β₂=0", "VSE++"),  # ladder with β₂ = 0 is the triplet loss (U6 identity)
    ("ladder", "auto(2,2) β₂=0", "VSE++"),
    ("ladder", "(1,1)", "VSE++"),  # one adaptive level: the triplet loss
    ("unified", "γ=∞ (Triplet-HN)", "Triplet-HN"),
]


def claim(cid: str) -> Claim:
    if cid not in CLAIMS:
        raise KeyError(f"unknown claim id {cid!r}; the registry has {', '.join(CLAIMS)}")
    return CLAIMS[cid]


def claim_ids() -> list[str]:
    return list(CLAIMS)


@functools.lru_cache(maxsize=1)
def _paper_effects_table(path: str = str(PAPER_EFFECTS_CSV)) -> pd.DataFrame:
    df = pd.read_csv(path, dtype={"id": str})
    missing = sorted(set(CLAIMS) - set(df["id"]))
    if missing or df["id"].duplicated().any():
        raise ValueError(
            f"{path}: every claim id needs exactly one row; missing {missing}, "
            f"duplicated {sorted(df.loc[df['id'].duplicated(), 'id'])}"
        )
    return df.set_index("id")


def paper_effects() -> pd.DataFrame:
    """The papers' reported effects, one row per claim id (``reproduce/data/paper_effects.csv``):
    ``paper_effect`` (NaN where the paper gives only a figure), ``unit``, ``source``, ``backbone``,
    ``dataset``, ``computation``."""
    return _paper_effects_table().copy()


def matches_primary(c: Claim, row: dict, dataset: str) -> bool:
    """Whether a notebook row (a dict of a claim file) is the claim's primary row on ``dataset``."""
    if row.get("id") != c.id:
        return False
    leg = c.primary.legacy_for(dataset)
    for key in ("metric", "arms"):
        want = leg.get(key)
        if want is not None and str(row.get(key, "")) != want:
            return False
    frag = leg.get("statement")
    return frag is None or frag in str(row.get("statement", ""))


def contrast_key(c: Claim, dataset: str) -> tuple:
    """What makes a primary contrast unique: arms (order matters) and metric, or the notebook row."""
    p = c.primary
    if p.measure == "arms":
        return ("arms", p.paper, p.arm_a, p.arm_b, str(p.metric_for(dataset)))
    return ("notebook", c.id, tuple(sorted(p.legacy_for(dataset).items())))


@functools.lru_cache(maxsize=None)
def primary_arm_names(paper: str) -> frozenset:
    """Names of the arms that enter a primary contrast of ``paper`` (a profile gives them every seed)."""
    out = set()
    for c in CLAIMS.values():
        p = c.primary
        if p.measure == "arms" and p.paper == paper:
            for arm in (p.arm_a, p.arm_b):
                out.update(arm if isinstance(arm, tuple) else (arm,))
    return frozenset(out)
