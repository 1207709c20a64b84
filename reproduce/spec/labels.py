"""One label map for every table and figure: metric key → readable label, arm → display name.

Metric keys are the flat record of :func:`coherent_itr.metrics.evaluate` (its module docstring
lists them) plus the study's own columns (seeds, timing, training history ``val_…``). A key is
parsed by one grammar (:data:`_PATTERNS`) into a :class:`MetricInfo` — name, yardstick, unit,
whether higher is better and the number *kind* that :func:`fmt_number` formats by — so a new
metric without a pattern here fails ``tests/reproduce/spec/test_labels.py`` instead of showing up raw.

    >>> label("cs100_i2t_true")
    'CS@100 image→text (true relevance) [τ-b, −1…1] ↑'
    >>> label("rsum")
    'RSUM (sum of R@1,5,10 both directions, %) ↑'
    >>> fmt_number(6000.0, "count"), fmt_number(459.08, "rsum")
    ('6000', '459.1')

:func:`readable` renames a DataFrame's columns by the map and formats its numbers for Markdown
(``mean ± std`` when a ``<key>_std`` column sits beside ``<key>``), :func:`markdown` prints that;
:func:`glossary` spells out the
abbreviations once per notebook (:func:`reproduce.spec.notebook_keys.raw_metric_keys_in` lists the raw keys a
notebook's outputs still show); :func:`key` builds a metric key (``key("cs", "i2t", "true", k=100)``) and
refuses one the record does not have, so a typo is an error rather than a dropped column.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from reproduce.spec.tables import markdown_table

DIRECTIONS = {"i2t": "image→text", "t2i": "text→image"}

# Relevance / positive-set / human-source names of the record (coherent_itr.evaluation) → meaning.
YARDSTICKS = {
    "sbert": "Sentence-BERT pseudo labels",
    "cider": "CIDEr-D pseudo labels",
    "pseudo": "pseudo labels",
    "true": "true relevance",
    "expert": "expert judgements",
    "crowd": "CrowdFlower judgements",
    "binary": "binary ground truth",
}
# Human sources (agreement keys ``{src}_{stat}_{pairs}``) and what the agreement is computed of.
HUMAN_SOURCES = {"expert": "expert scores", "crowd": "CrowdFlower votes"}
AGREEMENT_OF = {
    "sbert": "Sentence-BERT relevance",
    "cider": "CIDEr-D relevance",
    "binary": "binary ground truth",
    "true": "true relevance",
}
PAIRS = {"all": "all judged pairs", "nongt": "judged non-GT pairs"}

# Number kinds understood by fmt_number (and what each prints).
KINDS = ("percent", "rsum", "unit", "correlation", "rank", "count", "seconds", "ratio", "int", "text")


@dataclass(frozen=True)
class MetricInfo:
    """What a column holds: ``name`` (e.g. "CS@100 image→text"), the ``yardstick`` it is measured
    against (or None), ``unit`` shown in brackets (or None), ``higher_is_better`` (None: neither),
    and ``kind`` for :func:`fmt_number`."""

    key: str
    name: str
    kind: str
    yardstick: str | None = None
    unit: str | None = None
    higher_is_better: bool | None = None

    @property
    def label(self) -> str:
        s = self.name + (f" ({self.yardstick})" if self.yardstick else "")
        s += f" [{self.unit}]" if self.unit else ""
        if self.higher_is_better is not None:
            s += " ↑" if self.higher_is_better else " ↓"
        return s


_D = "(?P<d>i2t|t2i)"
_R = "(?P<r>" + "|".join(YARDSTICKS) + ")"
_SRC = "(?P<src>" + "|".join(HUMAN_SOURCES) + ")"
_OF = "(?:(?P<of>" + "|".join(AGREEMENT_OF) + ")_)?"


def _k(m, default="whole list") -> str:
    return m["k"] if m["k"] else default


def _dir(m) -> str:
    """The direction a key's match names, in words (``i2t`` → "image→text")."""
    return DIRECTIONS[m["d"]]


def _graded(m, name: str, kind: str, unit: str | None = None, positives: bool = False) -> dict:
    """The :class:`MetricInfo` fields of a metric measured against the yardstick the key's match names (``m["r"]``;
    ``positives``: the yardstick picks the positives), higher is better."""
    yardstick = ("positives: " if positives else "") + YARDSTICKS[m["r"]]
    return dict(name=name, yardstick=yardstick, unit=unit, kind=kind, higher_is_better=True)


# (pattern, builder(match) -> dict of MetricInfo fields). Order matters only for overlapping patterns.
_PATTERNS: list[tuple[str, object]] = [
    (r"rsum", lambda m: dict(name="RSUM (sum of R@1,5,10 both directions, %)", kind="rsum", higher_is_better=True)),
    (
        rf"{_D}_r(?P<k>\d+)",
        lambda m: dict(name=f"R@{m['k']} {_dir(m)}", unit="%", kind="percent", higher_is_better=True),
    ),
    (
        rf"{_D}_medr",
        lambda m: dict(name=f"median rank of the ground truth, {_dir(m)}", kind="rank", higher_is_better=False),
    ),
    (
        rf"{_D}_meanr",
        lambda m: dict(name=f"mean rank of the ground truth, {_dir(m)}", kind="rank", higher_is_better=False),
    ),
    (
        r"i2t_map",
        lambda m: dict(
            name="mAP image→text (its 5 captions as positives)", unit="0…1", kind="unit", higher_is_better=True
        ),
    ),
    (rf"cs(?P<k>\d+)_{_D}_{_R}", lambda m: _graded(m, f"CS@{m['k']} {_dir(m)}", "correlation", "τ-b, −1…1")),
    (rf"tau_{_D}_{_R}", lambda m: _graded(m, f"Kendall τ over all candidates, {_dir(m)}", "correlation", "−1…1")),
    (
        rf"ndcg(?P<k>\d*)_{_D}_{_R}",
        lambda m: _graded(m, (f"NDCG@{m['k']}" if m["k"] else "NDCG (whole list)") + f" {_dir(m)}", "unit", "0…1"),
    ),
    (
        rf"ncs(?P<k>\d+)(?P<ngt>ngt)?_{_D}_{_R}",
        lambda m: _graded(
            m, f"NCS@{m['k']} {_dir(m)}" + (", ground truth removed" if m["ngt"] else ""), "percent", "%"
        ),
    ),
    (
        rf"nsum(?P<ngt>ngt)?_{_R}",
        lambda m: _graded(
            m,
            "Nsum" + (", ground truth removed," if m["ngt"] else "") + " (sum of NCS@1,5,10 both directions, %)",
            "rsum",
        ),
    ),
    (
        rf"sr(?P<k>\d+)m(?P<m>\d+)_{_D}_{_R}",
        lambda m: _graded(m, f"Semantic Recall@{m['k']} (|G̃|={m['m']}) {_dir(m)}", "percent", "%"),
    ),
    (
        rf"srhit(?P<k>\d+)m(?P<m>\d+)_{_D}_{_R}",
        lambda m: _graded(m, f"hit rate of G̃ (|G̃|={m['m']}) in the top {m['k']}, {_dir(m)}", "percent", "%"),
    ),
    (
        rf"(?P<what>mapr|rprec|r1|ap)_{_D}_{_R}",
        lambda m: _graded(
            m,
            {"mapr": "mAP@R", "rprec": "R-Precision", "r1": "R@1", "ap": "AP"}[m["what"]] + f" {_dir(m)}",
            "percent",
            "%",
            positives=True,
        ),
    ),
    (
        rf"{_SRC}_{_OF}(?P<stat>pearson|kendall)_(?P<pairs>all|nongt)",
        lambda m: dict(
            name=("Pearson r" if m["stat"] == "pearson" else "Kendall τ-b")
            + " of "
            + (AGREEMENT_OF[m["of"]] if m["of"] else "the model's similarity")
            + " with "
            + HUMAN_SOURCES[m["src"]],
            yardstick=PAIRS[m["pairs"]],
            unit="−1…1",
            kind="correlation",
            higher_is_better=True,
        ),
    ),
    (
        rf"{_SRC}_{_OF}n_(?P<pairs>all|nongt)",
        lambda m: dict(name=f"number of {PAIRS[m['pairs']]} ({HUMAN_SOURCES[m['src']]})", kind="count"),
    ),
    (r"n_folds", lambda m: dict(name="number of 1K-image test folds averaged", kind="count")),
]
_COMPILED = [(re.compile(p + r"\Z"), b) for p, b in _PATTERNS]

# The study's own columns (reproduce.protocol.study.Study.results / histories, report.summary).
STUDY_COLUMNS = {
    "paper": MetricInfo("paper", "paper", "text"),
    "group": MetricInfo("group", "group of arms", "text"),
    "arm": MetricInfo("arm", "arm", "text"),
    "loss": MetricInfo("loss", "loss", "text"),
    "seed": MetricInfo("seed", "seed", "int"),
    "n_seeds": MetricInfo("n_seeds", "seeds", "count"),
    "best_epoch": MetricInfo("best_epoch", "selected epoch (best validation RSUM)", "int"),
    "epochs_run": MetricInfo("epochs_run", "epochs run", "int"),
    "epoch": MetricInfo("epoch", "epoch", "int"),
    "lr": MetricInfo("lr", "learning rate", "ratio"),
    "train_loss": MetricInfo(
        "train_loss", "training loss (mean over the epoch's batches)", "ratio", higher_is_better=False
    ),
    "epoch_time_s": MetricInfo("epoch_time_s", "training time of the epoch", "seconds", unit="s"),
    "time_total_s": MetricInfo("time_total_s", "run time, total", "seconds", unit="s"),
    "time_train_s": MetricInfo("time_train_s", "training time", "seconds", unit="s"),
    "time_train_s_per_epoch": MetricInfo("time_train_s_per_epoch", "training time per epoch", "seconds", unit="s"),
    "time_test_encode_s": MetricInfo("time_test_encode_s", "test encoding time", "seconds", unit="s"),
    "time_test_eval_s": MetricInfo("time_test_eval_s", "test evaluation time", "seconds", unit="s"),
    "val_pos_sim": MetricInfo(
        "val_pos_sim", "validation: mean similarity of the positive pairs", "correlation", unit="cosine"
    ),
    "val_hardneg_sim": MetricInfo(
        "val_hardneg_sim", "validation: mean similarity of the hardest negative", "correlation", unit="cosine"
    ),
    # training-batch diagnostics of sampled steps (coherent_itr.gradients; Unified Eqs. 11–12, 17–18, Fig. 4)
    "pos_sim": MetricInfo(
        "pos_sim", "training batches: mean similarity of the positive pairs", "correlation", unit="cosine"
    ),
    "hardneg_sim": MetricInfo(
        "hardneg_sim", "training batches: mean similarity of the hardest negative", "correlation", unit="cosine"
    ),
    "grad_anchor": MetricInfo(
        "grad_anchor", "tangent gradient norm of the anchor ‖P_v ∂L/∂v_i‖", "ratio", unit="loss units"
    ),
    "grad_hardneg": MetricInfo(
        "grad_hardneg", "tangent gradient on the hardest negative |∂L/∂s_iĵ|·sin θ", "ratio", unit="loss units"
    ),
    "grad_negatives": MetricInfo(
        "grad_negatives", "tangent gradient on all negatives Σ_j |∂L/∂s_ij|·sin θ", "ratio", unit="loss units"
    ),
}


def info(key: str) -> MetricInfo:
    """The :class:`MetricInfo` of a column key; ``KeyError`` naming the key if it has no label."""
    if key in STUDY_COLUMNS:
        return STUDY_COLUMNS[key]
    if key.endswith("_nq"):
        base = info(key[:-3])
        return MetricInfo(key, f"number of queries averaged for {base.name}", "count", base.yardstick)
    if key.endswith("_std"):
        base = info(key[:-4])
        return MetricInfo(key, f"std over seeds of {base.name}", base.kind, base.yardstick, base.unit)
    if key.startswith("val_") and key[4:] and key[4:] not in STUDY_COLUMNS:
        base = info(key[4:])
        return MetricInfo(key, f"validation {base.name}", base.kind, base.yardstick, base.unit, base.higher_is_better)
    for rx, build in _COMPILED:
        m = rx.match(key)
        if m:
            return MetricInfo(key, **build(m))
    raise KeyError(
        f"no label for column {key!r}: add a pattern to reproduce/spec/labels.py (_PATTERNS or STUDY_COLUMNS)"
    )


_FAMILY_KEY = {
    "r": "{d}_r{k}",
    "medr": "{d}_medr",
    "meanr": "{d}_meanr",
    "cs": "cs{k}_{d}_{y}",
    "tau": "tau_{d}_{y}",
    "ndcg": "ndcg{k}_{d}_{y}",
    "ncs": "ncs{k}{ngt}_{d}_{y}",
    "nsum": "nsum{ngt}_{y}",
    "sr": "sr{k}m{m}_{d}_{y}",
    "srhit": "srhit{k}m{m}_{d}_{y}",
    "mapr": "mapr_{d}_{y}",
    "rprec": "rprec_{d}_{y}",
    "r1": "r1_{d}_{y}",
}


def key(
    family: str,
    d: str | None = None,
    yardstick: str | None = None,
    k: int | None = None,
    m: int | None = None,
    ngt: bool = False,
) -> str:
    """Build a metric key instead of writing an f-string, e.g. ``key("cs", "i2t", "true", k=100)`` →
    ``"cs100_i2t_true"``; a family, direction or yardstick that the record does not have is an error
    here, not a silently missing column."""
    if family not in _FAMILY_KEY:
        raise KeyError(f"unknown metric family {family!r}; families: {sorted(_FAMILY_KEY)}")
    out = _FAMILY_KEY[family].format(d=d, y=yardstick, k="" if k is None else k, m=m, ngt="ngt" if ngt else "")
    if not has_label(out):
        raise KeyError(
            f"key({family!r}, d={d!r}, yardstick={yardstick!r}, k={k!r}, m={m!r}, ngt={ngt}) gives "
            f"{out!r}, which is not a metric of the record (directions {list(DIRECTIONS)}, yardsticks "
            f"{list(YARDSTICKS)})"
        )
    return out


def has_label(key: str) -> bool:
    try:
        info(key)
    except KeyError:
        return False
    return True


def is_metric_key(token: str) -> bool:
    """True if ``token`` is a raw metric key of the evaluation record (not a study column such as ``seed``)."""
    return token not in STUDY_COLUMNS and has_label(token)


def label(key: str) -> str:
    """The readable label of ``key``: name (yardstick) [unit] and ↑ / ↓ when higher / lower is better."""
    return info(key).label


_TOKEN = re.compile(r"[A-Za-z0-9_]+")


def in_text(text: str) -> str:
    """``text`` with every raw metric key in it replaced by its label (e.g. ``"mean val_rsum, epochs 1–2"``
    → ``"mean RSUM (validation) … , epochs 1–2"``); other words are kept as they are."""
    return _TOKEN.sub(lambda m: label(m.group(0)) if is_metric_key(m.group(0)) else m.group(0), text)


def kind_of(key: str) -> str:
    return info(key).kind


# --------------------------------------------------------------------------------------------------
# Arms and abbreviations
# --------------------------------------------------------------------------------------------------
SAMPLING = {"RS": "random negative (RS)", "HN": "hardest negative (HN)", "SN": "soft = furthest negative (SN)"}

# Spelled out once per notebook by glossary(); sources in parentheses.
ABBREVIATIONS = {
    "VSE++": "visual-semantic embedding with hard negatives (Faghri et al. 2018): the shared backbone and its "
    "loss, Triplet-HN",
    "Triplet-HN": "triplet ranking loss with the hardest negative in the batch (max of hinges, margin 0.2), "
    "summed over the batch (VSE++)",
    "Triplet (all negatives)": "the triplet hinge summed over every negative of the batch instead of the hardest",
    "Triplet (mean)": "Triplet-HN averaged over the batch instead of summed — the pairwise term of the listwise "
    "paper (its code averages it)",
    "Triplet-SN": "triplet loss with soft negative mining: a log-sum-exp (scale γ) over all negatives replaces the "
    "max (BCLS Eqs. 14–15)",
    "SW-HS": "sliding-window sampling and hard-sample mining of the Kendall loss (BCLS Eqs. 17–20)",
    "BCLS": "binary and continuous label supervision: Triplet-SN + Kendall SW-HS (Li et al.)",
    "Ladder": "ladder loss with relevance levels (CVSE++, Wang et al.); adaptive: levels from K-Means + "
    "silhouette between L_MIN and L_MAX",
    "SAM": "semantic adaptive margin: a margin from CIDEr-D with temperature τ (Biten et al. Eq. 7)",
    "RS / HN / SN": "SAM's negative sampling (Sec. 5.4): random negative (RS), hardest = most similar negative "
    "(HN), soft = least similar negative (SN); keep = the VSE++ triplet is kept beside SAM",
    "S-NDCG": "Smooth-NDCG, a differentiable NDCG with temperature τ (listwise paper)",
    "VLC": "InfoNCE / vision-language contrastive loss, the Unified loss with m = 0",
    "Unified": "the Unified loss with margin m and scale γ (Li et al.): Triplet-HN as γ → ∞, VLC at m = 0",
    "R@K, RSUM": "binary Recall@K (% of queries with the ground truth in the top K); RSUM sums R@1,5,10 of both "
    "directions (max 600)",
    "CS@K": "Coherent Score: Kendall τ-b between the model's top-K ranking and the relevance (ladder Eq. 13)",
    "τ": "Kendall τ over all candidates (BCLS Eq. 2)",
    "NDCG@K": "normalised discounted cumulative gain, gains 2^r − 1",
    "NCS@K": "normalised cumulative semantic score (SAM Table 3); 'ground truth removed': SAM's N variant",
    "mAP@R, R-P": "mAP@R and R-Precision against a set of semantic positives (ECCV Caption)",
    "GT": "ground truth: a caption written for that image",
    "i2t / t2i": "image→text (an image queries captions) / text→image",
}


def arm_label(arm: str) -> str:
    """The display name of an arm: abbreviations of SAM grid arms spelled out, others unchanged."""
    m = re.fullmatch(r"τ=(?P<tau>[\d.]+) (?P<s>RS|HN|SN) keep=(?P<keep>True|False)", arm)
    if m:
        return f"SAM τ={m['tau']}, {SAMPLING[m['s']]}, " + ("triplet kept" if m["keep"] == "True" else "SAM only")
    return arm


def glossary(terms=None) -> str:
    """Markdown list spelling out ``terms`` (default: all of :data:`ABBREVIATIONS`)."""
    terms = list(ABBREVIATIONS) if terms is None else list(terms)
    unknown = [t for t in terms if t not in ABBREVIATIONS]
    if unknown:
        raise KeyError(f"no glossary entry for {unknown}; known: {list(ABBREVIATIONS)}")
    return "\n".join(f"- **{t}** — {ABBREVIATIONS[t]}" for t in terms)


# --------------------------------------------------------------------------------------------------
# Numbers
# --------------------------------------------------------------------------------------------------
_DECIMALS = {"percent": 1, "rsum": 1, "unit": 3, "correlation": 3, "rank": 1, "seconds": 1, "count": 1, "int": 1}


def fmt_number(value, kind: str = "ratio") -> str:
    """``value`` as text for reading, never in scientific notation.

    ``percent`` / ``rsum``: one decimal; ``unit`` (0…1) and ``correlation``: three; ``rank`` and
    ``seconds``: one decimal, or none when the value is a whole number; ``count`` / ``int``: a whole
    number (a mean of counts that is not whole: one decimal); ``ratio``: 4 significant digits in
    positional notation.
    NaN / None → "–". Strings pass through; a number of kind ``text`` prints as a ``ratio``."""
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r} is not one of {KINDS}")
    if value is None or isinstance(value, str):
        return "–" if value is None else value
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    v = float(value)
    if math.isnan(v):
        return "–"
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    if kind in ("count", "int", "rank", "seconds") and v == round(v):
        return str(int(round(v)))
    if kind in _DECIMALS:
        return f"{v:.{_DECIMALS[kind]}f}"
    if v == 0:
        return "0"
    digits = max(0, 3 - int(math.floor(math.log10(abs(v)))))  # 4 significant digits, positional
    s = f"{v:.{digits}f}"
    return s.rstrip("0").rstrip(".") if "." in s else s


def _column_kind(col: str, series: pd.Series) -> str:
    if has_label(col):
        return kind_of(col)
    if pd.api.types.is_integer_dtype(series):
        return "int"
    return "ratio" if pd.api.types.is_numeric_dtype(series) else "text"


def readable(df: pd.DataFrame, arms: bool = True) -> pd.DataFrame:
    """A copy of ``df`` for Markdown: columns renamed by the label map, numbers formatted by their kind
    (:func:`fmt_number`), a ``<key>_std`` column merged into ``<key>`` as ``mean ± std``; with
    ``arms``, arm names in an ``arm`` column or index spelled out by :func:`arm_label`. Columns without
    a label keep their name."""
    out = {}
    for col in df.columns:
        c = str(col)
        if c.endswith("_std") and c[:-4] in df.columns:
            continue
        kind = _column_kind(c, df[col])
        vals = [
            fmt_number(v, kind)
            if kind != "text"
            else ("–" if v is None or (isinstance(v, float) and math.isnan(v)) else v)
            for v in df[col]
        ]
        if f"{c}_std" in df.columns:
            vals = [
                v if (s is None or (isinstance(s, float) and math.isnan(s))) else f"{v} ± {fmt_number(s, kind)}"
                for v, s in zip(vals, df[f"{c}_std"])
            ]
        if c == "arm" and arms:
            vals = [arm_label(v) if isinstance(v, str) else v for v in vals]
        out[label(c) if has_label(c) else in_text(c)] = vals
    res = pd.DataFrame(out, index=df.index)
    if arms and df.index.name == "arm":
        res.index = [arm_label(a) if isinstance(a, str) else a for a in df.index]
        res.index.name = label("arm")
    return res


def markdown(df: pd.DataFrame, arms: bool = True) -> str:
    """:func:`readable` as a Markdown table, the formatted text kept as is
    (:func:`reproduce.present.report.markdown_table`:
    cells escaped, at most 9 columns per table, short headers with a legend)."""
    return markdown_table(readable(df, arms))


__all__ = [
    "ABBREVIATIONS",
    "DIRECTIONS",
    "MetricInfo",
    "YARDSTICKS",
    "arm_label",
    "fmt_number",
    "glossary",
    "has_label",
    "in_text",
    "info",
    "is_metric_key",
    "key",
    "kind_of",
    "label",
    "markdown",
    "readable",
]
