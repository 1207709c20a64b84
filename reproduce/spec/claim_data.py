"""The claims as data: the types the study reads and the loader of ``reproduce/data/claims.toml``.

A claim is decided per data set by ONE primary contrast: arm A vs arm B (names as in
:mod:`reproduce.spec.experiments`) on a metric key of the test records, a direction (A − B > 0), an
equivalence (|A − B| < tolerance) or an identity; or a quantity the notebook measures
(``measure = "notebook"``: a complexity slope, a label agreement, a curve statistic). Every other row
a notebook writes for the claim is secondary and never decides it.

The file has one ``[[claim]]`` table per claim (``id``, ``paper``, ``statement``, ``source``,
``notebook``), its ``[claim.primary]`` contrast and its ``[claim.paper_effect]`` (the number the
paper reports, with table, backbone and data set); ``[[null_pair]]`` tables name arms identical in
expectation (their per-seed differences enter the noise floor). :func:`load` checks every field — an
unknown key, a kind, a measure, a data set, an arm name or a metric key that does not exist — and
names the claim, the field and what was expected.

Primary contrast fields (``[claim.primary]``):

* ``statement``, ``unit``; ``metric`` — a record key, a list of keys (their mean) or a table per data
  set; ``kind`` — ``direction`` | ``equivalence`` | ``identity``; ``tolerance``;
* ``measure`` — ``arms`` (a paired difference of two arms' test metrics, computed from the runs by
  :func:`reproduce.protocol.claim_rows.primary_row`) or ``notebook``;
* ``arms_of`` — the :mod:`reproduce.spec.experiments` paper key of the arms; ``arm_a``; ``arm_b`` — an arm
  or a list of arms; ``versus`` — how a list enters: ``mean`` (A beats the mean of the list) or
  ``each`` (A beats every arm of the list: the per-seed effect is the smallest A − B over the list,
  an intersection–union test; arms a profile does not run are left out);
* ``arm_groups`` (measure ``notebook`` only, with ``arms_of``) — the arm groups the notebook's quantity
  is computed from: like the arms of an arm contrast, every arm of them gets every seed of a profile
  (S3 rests on SAM's whole τ × sampling × keep-triplet grid);
* ``co_metric``, ``co_scale`` — a co-primary metric: the per-seed effect is the smaller of the metric's
  difference and ``co_scale`` × the co-metric's difference (both must hold);
* ``predicted_to_fail`` — an arm the claim predicts to fail: its collapse is the predicted outcome,
  so the row is decided on its numbers rather than set aside as not testable;
* ``paper_says`` — the paper's sentence the contrast tests; ``rationale`` — why the contrast is
  computed this way where a choice was made;
* ``legacy`` — how to recognise the primary among a notebook's claim-file rows (``metric``, ``arms``,
  a ``statement`` fragment, ``sign = -1`` for a row stated the other way round), per data set allowed;
* ``ratio`` — whether our effect / the paper's is meaningful (same zero and unit).

Example::

    >>> from reproduce.spec.claim_data import load, CLAIMS_TOML
    >>> claims = load(CLAIMS_TOML)
    >>> claims["B1"].primary.arms_label()
    'Triplet-SN − Triplet-HN'
"""

from __future__ import annotations

import functools
import math
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

CLAIMS_TOML = Path(__file__).resolve().parents[1] / "data" / "claims.toml"
DATASETS = ("synthetic", "flickr8k")
KINDS = ("direction", "equivalence", "identity")
MEASURES = ("arms", "notebook")
VERSUS = ("mean", "each")
EFFECT_COLUMNS = ("paper_effect", "unit", "source", "backbone", "dataset", "computation")

_TOP_KEYS = {"datasets", "yardstick", "null_pair", "claim"}
_CLAIM_KEYS = {"id", "paper", "statement", "source", "notebook", "primary", "paper_effect"}
_CLAIM_REQUIRED = ("id", "paper", "statement", "source", "notebook", "primary", "paper_effect")
_PRIMARY_KEYS = {
    "statement",
    "metric",
    "unit",
    "kind",
    "tolerance",
    "measure",
    "arms_of",
    "arm_groups",
    "arm_a",
    "arm_b",
    "versus",
    "co_metric",
    "co_scale",
    "predicted_to_fail",
    "paper_says",
    "rationale",
    "legacy",
    "ratio",
}
_PRIMARY_REQUIRED = ("statement", "metric", "unit")
_LEGACY_KEYS = {"metric", "arms", "statement", "sign"}
_EFFECT_KEYS = {"value", "unit", "source", "backbone", "dataset", "computation"}
_EFFECT_REQUIRED = ("unit", "source", "backbone", "dataset", "computation")
_NULL_PAIR_KEYS = {"arms_of", "arm_a", "arm_b", "why"}


class ClaimDataError(ValueError):
    """A field of the claims file that is missing, misspelt or not of the expected kind."""


@dataclass(frozen=True)
class Contrast:
    statement: str
    metric: object  # record key, tuple of keys (their mean) or {dataset: key}
    unit: str
    kind: str = "direction"  # direction | equivalence | identity
    paper: str = ""  # experiments.py paper key of the arms (``arms_of`` in the file)
    arm_a: object = ""  # arm name, or tuple of arm names (their mean)
    arm_b: object = ""
    tolerance: float | None = None
    measure: str = "arms"  # "arms" | "notebook"
    arm_groups: tuple = ()  # measure "notebook": the arm groups (of ``paper``) its quantity is computed from
    legacy: dict = field(default_factory=dict)  # metric / arms / statement (fragment) / sign, per data set allowed
    ratio: bool = True  # our effect / paper's effect is meaningful (same zero and unit)
    versus: str = "mean"  # a tuple arm_b: its mean ("mean") or every arm of it ("each")
    co_metric: object = None  # a co-primary metric (record key, tuple or {dataset: key}); None: none
    co_scale: float = 1.0  # the co-metric's difference is multiplied by this before the minimum
    predicted_to_fail: str = ""  # an arm whose collapse is the claim's predicted outcome
    paper_says: str = ""  # the paper's sentence the contrast tests
    rationale: str = ""  # why the contrast is computed this way

    def metric_for(self, dataset: str):
        return self.metric.get(dataset) if isinstance(self.metric, dict) else self.metric

    def co_metric_for(self, dataset: str):
        return self.co_metric.get(dataset) if isinstance(self.co_metric, dict) else self.co_metric

    def metric_label(self, dataset: str) -> str:
        """``rsum``, ``mean(tau_i2t_sbert, tau_t2i_sbert)`` for a tuple of record keys, and with a
        co-primary metric ``min(rsum, 100·mean(…))``."""

        def one(m):
            return f"mean({', '.join(m)})" if isinstance(m, tuple) else str(m)

        base = one(self.metric_for(dataset))
        if self.co_metric is None:
            return base
        return f"min({base}, {self.co_scale:g}·{one(self.co_metric_for(dataset))})"

    def arms_label(self) -> str:
        def name(a, how="mean"):
            if not isinstance(a, tuple):
                return str(a)
            return f"{'each of' if how == 'each' else 'mean of'} {', '.join(a)}"

        if not self.arm_a:
            return ""
        return f"{name(self.arm_a)} − {name(self.arm_b, self.versus)}"

    def legacy_for(self, dataset: str) -> dict:
        return {k: (v.get(dataset) if isinstance(v, dict) else v) for k, v in self.legacy.items()}

    def arm_names(self) -> set:
        """Every arm name the contrast reads (both sides, tuples unpacked)."""
        return {n for arm in (self.arm_a, self.arm_b) if arm for n in (arm if isinstance(arm, tuple) else (arm,))}

    def matches(
        self,
        dataset: str | None = None,
        *,
        row: Mapping | None = None,
        arm_a=None,
        arm_b=None,
        metric=None,
        versus: str = "mean",
    ) -> bool:
        """Whether a contrast is this primary on ``dataset`` (needed for a ``row`` or a ``metric``).

        ``row`` — a notebook claim-file row (``metric``, ``arms`` and ``statement`` texts): matched by the
        ``legacy`` texts (the caller has selected the claim id). Otherwise ``arm_a − arm_b`` on ``metric``
        (a key or a tuple of keys averaged; None: any metric) for an arm contrast: a tuple of arms is a
        set (their mean, or each of them under ``versus="each"``), so order within it does not matter."""
        if dataset is None and (row is not None or metric is not None):
            raise ValueError("Contrast.matches: give the data set to match a row or a metric")
        if row is not None:
            leg = self.legacy_for(dataset)
            for key in ("metric", "arms"):
                want = leg.get(key)
                if want is not None and str(row.get(key, "")) != want:
                    return False
            frag = leg.get("statement")
            return frag is None or frag in str(row.get("statement", ""))
        if self.measure != "arms":
            return False

        def arms(a):
            return frozenset(a) if isinstance(a, (tuple, list, set, frozenset)) else frozenset([a])

        def keys(m):
            return frozenset(m) if isinstance(m, (tuple, list)) else frozenset([m])

        many = isinstance(self.arm_b, tuple)
        if arms(arm_a) != arms(self.arm_a) or arms(arm_b) != arms(self.arm_b) or (many and versus != self.versus):
            return False
        return metric is None or keys(metric) == keys(self.metric_for(dataset))


@dataclass(frozen=True)
class Claim:
    id: str
    paper: str
    statement: str
    source: str
    notebook: str
    primary: Contrast
    datasets: tuple = DATASETS
    paper_effect: dict = field(default_factory=dict, compare=False)  # value (NaN: none) and where it comes from


@dataclass(frozen=True)
class ClaimFile:
    """What :func:`load` returns: the claims in file order, the null pairs, the yardstick per data set."""

    claims: dict
    null_pairs: list
    yardstick: dict
    datasets: tuple

    def __getitem__(self, cid: str) -> Claim:
        return self.claims[cid]


def _fail(path, where: str, key: str, value, expected: str):
    raise ClaimDataError(f"{path}: {where}, field {key!r} = {value!r}: expected {expected}")


def _check_keys(path, where: str, table: Mapping, allowed: set, required=()) -> None:
    if not isinstance(table, Mapping):
        raise ClaimDataError(f"{path}: {where}: expected a table, got {table!r}")
    for k in table:
        if k not in allowed:
            raise ClaimDataError(f"{path}: {where}: unknown field {k!r}; expected one of {sorted(allowed)}")
    for k in required:
        if k not in table:
            raise ClaimDataError(f"{path}: {where}: missing field {k!r}")


def _text(path, where, key, value, allow_empty=False) -> str:
    if not isinstance(value, str) or not (value.strip() or allow_empty):
        _fail(path, where, key, value, "a non-empty string")
    return value


def _metric(path, where, key, value, datasets, is_metric: Callable | None, measure: str):
    """A record key / list of keys / {dataset: either} → str / tuple / dict (keys checked for an arm contrast)."""

    def one(v, at):
        if isinstance(v, list):
            if not v or not all(isinstance(x, str) and x for x in v):
                _fail(path, where, at, v, "a non-empty list of metric keys")
            out = tuple(v)
        elif isinstance(v, str) and v:
            out = v
        else:
            _fail(path, where, at, v, "a metric key, a list of keys or a table per data set")
        if is_metric is not None and measure == "arms":
            for k in out if isinstance(out, tuple) else (out,):
                if not is_metric(k):
                    _fail(path, where, at, k, "a metric key of the evaluation record (reproduce.spec.labels)")
        return out

    if isinstance(value, Mapping):
        bad = [d for d in value if d not in datasets]
        if bad or not value:
            _fail(path, where, key, dict(value), f"a table keyed by data sets {list(datasets)}")
        return {d: one(v, f"{key}.{d}") for d, v in value.items()}
    return one(value, key)


def _arm(path, where, key, value, arms_of, arm_names: Mapping | None, allow_list: bool):
    if isinstance(value, list):
        if not allow_list or len(value) < 2 or not all(isinstance(x, str) and x for x in value):
            _fail(path, where, key, value, "an arm name" + (" or a list of ≥ 2 arm names" if allow_list else ""))
        names, out = value, tuple(value)
    elif isinstance(value, str) and value:
        names, out = [value], value
    else:
        _fail(path, where, key, value, "an arm name" + (" or a list of arm names" if allow_list else ""))
    if arm_names is not None:
        known = arm_names.get(arms_of)
        if known is None:
            _fail(path, where, "arms_of", arms_of, f"a paper key of reproduce.spec.experiments: {sorted(arm_names)}")
        for n in names:
            if n not in known:
                _fail(path, where, key, n, f"an arm of {arms_of!r} in reproduce.spec.experiments: {sorted(known)}")
    return out


def _legacy(path, where, table, datasets, metric) -> dict:
    _check_keys(path, f"{where}.legacy", table, _LEGACY_KEYS)
    out = {}
    for k, v in table.items():
        if k == "sign":
            if v not in (1, -1):
                _fail(path, f"{where}.legacy", k, v, "1 or -1")
            out[k] = v
        elif isinstance(v, Mapping):
            bad = [d for d in v if d not in datasets]
            if bad or not all(isinstance(x, str) for x in v.values()):
                _fail(path, f"{where}.legacy", k, dict(v), f"a text, or a table of texts keyed by {list(datasets)}")
            out[k] = dict(v)
        else:
            out[k] = _text(path, f"{where}.legacy", k, v)
    out.setdefault("metric", metric)
    return dict(sorted(out.items(), key=lambda kv: ("metric", "arms", "statement", "sign").index(kv[0])))


def _primary(path, where, t, datasets, arm_names, is_metric) -> Contrast:
    _check_keys(path, where, t, _PRIMARY_KEYS, _PRIMARY_REQUIRED)
    measure = t.get("measure", "arms")
    if measure not in MEASURES:
        _fail(path, where, "measure", measure, f"one of {MEASURES}")
    kind = t.get("kind", "direction")
    if kind not in KINDS:
        _fail(path, where, "kind", kind, f"one of {KINDS}")
    tol = t.get("tolerance")
    if tol is not None and (isinstance(tol, bool) or not isinstance(tol, (int, float)) or not tol > 0):
        _fail(path, where, "tolerance", tol, "a positive number")
    if kind in ("identity", "equivalence") and tol is None:
        _fail(path, where, "tolerance", tol, f"a positive number (kind {kind!r} needs one)")
    metric = _metric(path, where, "metric", t["metric"], datasets, is_metric, measure)
    versus = t.get("versus", "mean")
    if versus not in VERSUS:
        _fail(path, where, "versus", versus, f"one of {VERSUS}")
    arm_keys = [k for k in ("arms_of", "arm_a", "arm_b") if k in t]
    paper = arm_a = arm_b = ""
    if measure == "arms":
        if len(arm_keys) != 3:
            missing = sorted({"arms_of", "arm_a", "arm_b"} - set(arm_keys))
            raise ClaimDataError(f"{path}: {where}: measure 'arms' needs fields {missing}")
        paper = _text(path, where, "arms_of", t["arms_of"])
        arm_a = _arm(path, where, "arm_a", t["arm_a"], paper, arm_names, allow_list=False)
        arm_b = _arm(path, where, "arm_b", t["arm_b"], paper, arm_names, allow_list=True)
    elif "arm_a" in t or "arm_b" in t:
        raise ClaimDataError(f"{path}: {where}: arm fields {arm_keys} belong to measure 'arms', not {measure!r}")
    groups = t.get("arm_groups", [])
    if measure == "arms" and "arm_groups" in t:
        _fail(path, where, "arm_groups", groups, "no arm groups for measure 'arms' (its arms are arm_a, arm_b)")
    if measure != "arms":
        if not isinstance(groups, list) or not all(isinstance(g, str) and g for g in groups):
            _fail(path, where, "arm_groups", groups, "a list of arm group names")
        if ("arms_of" in t) != bool(groups):
            raise ClaimDataError(
                f"{path}: {where}: a notebook measure names the arms it reads with both 'arms_of' and "
                f"'arm_groups' (a non-empty list), or neither"
            )
        if groups:
            paper = _text(path, where, "arms_of", t["arms_of"])
            if arm_names is not None and paper not in arm_names:
                _fail(path, where, "arms_of", paper, f"a paper key of reproduce.spec.experiments: {sorted(arm_names)}")
    if versus == "each" and not isinstance(arm_b, tuple):
        _fail(path, where, "versus", versus, "'mean' unless arm_b is a list of arms")
    co = t.get("co_metric")
    if co is not None:
        if measure != "arms":
            _fail(path, where, "co_metric", co, "no co-metric for a notebook measure")
        co = _metric(path, where, "co_metric", co, datasets, is_metric, measure)
    scale = t.get("co_scale", 1.0)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not scale > 0:
        _fail(path, where, "co_scale", scale, "a positive number")
    fails = t.get("predicted_to_fail", "")
    if fails and fails not in ({arm_a} | (set(arm_b) if isinstance(arm_b, tuple) else {arm_b})):
        _fail(path, where, "predicted_to_fail", fails, f"one of the contrast's arms ({arm_a!r}, {arm_b!r})")
    ratio = t.get("ratio", True)
    if not isinstance(ratio, bool):
        _fail(path, where, "ratio", ratio, "true or false")
    return Contrast(
        statement=_text(path, where, "statement", t["statement"]),
        metric=metric,
        unit=_text(path, where, "unit", t["unit"]),
        kind=kind,
        paper=paper,
        arm_a=arm_a,
        arm_b=arm_b,
        tolerance=float(tol) if tol is not None else None,
        measure=measure,
        arm_groups=tuple(groups),
        legacy=_legacy(path, where, t.get("legacy", {}), datasets, metric),
        ratio=ratio,
        versus=versus,
        co_metric=co,
        co_scale=float(scale),
        predicted_to_fail=fails,
        paper_says=_text(path, where, "paper_says", t.get("paper_says", ""), allow_empty=True),
        rationale=_text(path, where, "rationale", t.get("rationale", ""), allow_empty=True),
    )


def _paper_effect(path, where, t) -> dict:
    _check_keys(path, where, t, _EFFECT_KEYS, _EFFECT_REQUIRED)
    v = t.get("value", math.nan)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        _fail(path, where, "value", v, "a number (leave it out where the paper gives none)")
    out = {"paper_effect": float(v)}
    for k in _EFFECT_REQUIRED:
        out[k] = _text(path, where, k, t[k])
    return out


def load(
    path: str | Path = CLAIMS_TOML,
    arm_names: Mapping[str, set] | None = None,
    is_metric: Callable[[str], bool] | None = None,
) -> ClaimFile:
    """Read and check the claims file.

    Args:
        path: the TOML file.
        arm_names: ``{experiments paper key: arm names}``; when given, every arm a contrast or a null
            pair names must be there.
        is_metric: when given, every metric key of an arm contrast must satisfy it.

    Returns:
        A :class:`ClaimFile` (claims in file order).

    Raises:
        ClaimDataError: naming the file, the claim id and field, the value and what was expected."""
    path = Path(path)
    with path.open("rb") as fh:
        try:
            doc = tomllib.load(fh)
        except tomllib.TOMLDecodeError as e:
            raise ClaimDataError(f"{path}: not valid TOML: {e}") from e
    _check_keys(path, "top level", doc, _TOP_KEYS, ("datasets", "yardstick", "claim"))
    datasets = doc["datasets"]
    if not isinstance(datasets, list) or not datasets or not all(isinstance(d, str) and d for d in datasets):
        _fail(path, "top level", "datasets", datasets, "a non-empty list of data set names")
    datasets = tuple(datasets)
    yard = doc["yardstick"]
    if not isinstance(yard, Mapping) or set(yard) != set(datasets):
        _fail(path, "top level", "yardstick", yard, f"a table with one relevance name per data set {list(datasets)}")
    claims: dict[str, Claim] = {}
    for i, t in enumerate(doc["claim"]):
        cid = t.get("id") if isinstance(t, Mapping) else None
        where = f"claim {cid}" if isinstance(cid, str) else f"claim #{i + 1}"
        _check_keys(path, where, t, _CLAIM_KEYS, _CLAIM_REQUIRED)
        _text(path, where, "id", cid)
        if cid in claims:
            raise ClaimDataError(f"{path}: {where}: the id {cid!r} is declared twice")
        claims[cid] = Claim(
            id=cid,
            paper=_text(path, where, "paper", t["paper"]),
            statement=_text(path, where, "statement", t["statement"]),
            source=_text(path, where, "source", t["source"]),
            notebook=_text(path, where, "notebook", t["notebook"]),
            primary=_primary(path, f"{where}, primary", t["primary"], datasets, arm_names, is_metric),
            datasets=datasets,
            paper_effect=_paper_effect(path, f"{where}, paper_effect", t["paper_effect"]),
        )
    pairs = []
    for i, t in enumerate(doc.get("null_pair", [])):
        where = f"null_pair #{i + 1}"
        _check_keys(path, where, t, _NULL_PAIR_KEYS, ("arms_of", "arm_a", "arm_b", "why"))
        paper = _text(path, where, "arms_of", t["arms_of"])
        a = _arm(path, where, "arm_a", t["arm_a"], paper, arm_names, allow_list=False)
        b = _arm(path, where, "arm_b", t["arm_b"], paper, arm_names, allow_list=False)
        _text(path, where, "why", t["why"])
        pairs.append((paper, a, b))
    return ClaimFile(claims=claims, null_pairs=pairs, yardstick=dict(yard), datasets=datasets)


@functools.lru_cache(maxsize=None)
def primary_arm_names(paper: str, path: str = str(CLAIMS_TOML)) -> frozenset:
    """Names of the arms that enter a primary contrast of ``paper`` (a profile gives them every seed)."""
    out = set()
    for c in load(path).claims.values():
        if c.primary.measure == "arms" and c.primary.paper == paper:
            out |= c.primary.arm_names()
    return frozenset(out)


@functools.lru_cache(maxsize=None)
def primary_arm_groups(paper: str, path: str = str(CLAIMS_TOML)) -> frozenset:
    """Arm groups of ``paper`` that a notebook-measured primary is computed from (``arm_groups``): a
    profile gives every arm of them every seed, as it does the arms of :func:`primary_arm_names`."""
    return frozenset(g for c in load(path).claims.values() if c.primary.paper == paper for g in c.primary.arm_groups)
