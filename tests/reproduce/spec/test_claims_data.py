"""The claims file and its loader: the loaded claims equal the ones written as code before (git
history), every changed field is a declared contrast fix, and a misspelt field fails at load naming
the claim, the field and what was expected."""

from __future__ import annotations

import dataclasses
import io
import math
import subprocess
import sys
import types

import pandas as pd
import pytest

from reproduce.spec import claims as registry
from reproduce.spec.claim_data import ClaimDataError, Contrast, load
from helpers import ROOT


CODE_COMMIT = "87bd949"  # the last commit with the claims written as Claim(...) calls in reproduce/claims.py

# (claim id, field) pairs the contrast fixes change on purpose; every other field equals the old code's
_SAYS = ("primary.paper_says", "primary.rationale")
_CURVE = ("primary.statement", "primary.metric", "primary.legacy", *_SAYS)  # N7, U2, U3: a new statistic
_EACH = ("primary.statement", "primary.arm_b", "primary.versus", "primary.legacy", *_SAYS)  # vs each other arm
CHANGED_FIELDS = {
    "B3": ("primary.predicted_to_fail", *_SAYS),  # the Kendall-only arm is predicted to fail
    "B5": (*_EACH, "primary.unit", "primary.co_metric", "primary.co_scale"),  # each other α; Kendall τ co-primary
    "N3": ("primary.statement", *_SAYS),  # at τ = 1e-3
    "N4": ("primary.predicted_to_fail", *_SAYS),  # τ = 0.1 is predicted to fail
    "N6": ("primary.legacy",),  # the notebook's row: the expectation over tied orders, not a random tie-break
    "N7": _CURVE,
    "U2": _CURVE,
    "U3": _CURVE,
    "U4": _EACH,  # m = 0.2 vs the best other m
    "U5": _EACH,  # both sides of the γ peak
    "S1": ("primary.paper_says",),
    "S2": ("primary.paper_says",),
    "S3": ("primary.paper_says", "primary.paper", "primary.arm_groups"),  # rests on SAM's grid (every seed)
    "X1": ("statement", "primary.paper_says"),  # named for what it is: the VSE++ premise
}
CHANGED = {(cid, f) for cid, fs in CHANGED_FIELDS.items() for f in fs}
CHANGED_EFFECTS = {  # (claim id, column) of the papers' effects changed on purpose
    *((cid, "backbone") for cid in ("B1", "B2", "B3")),  # Table VIII is VSE++ (ResNet-152)
    *((cid, c) for cid in ("S1", "S2") for c in ("paper_effect", "backbone", "dataset", "computation")),
    *(("S3", c) for c in ("paper_effect", "source", "dataset", "computation")),
    ("X1", "computation"),
}


def _git_show(path: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{CODE_COMMIT}:{path}"], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout


@pytest.fixture(scope="module")
def old():
    """The claims module as it was at :data:`CODE_COMMIT` (its ``CLAIMS``, ``NULL_PAIRS``, paper effects)."""
    src, csv = _git_show("reproduce/claims.py"), _git_show("reproduce/data/paper_effects.csv")
    if src is None or csv is None:
        pytest.skip(f"commit {CODE_COMMIT} is not in this checkout's history")
    mod = types.ModuleType("old_claims_module")
    mod.__file__ = str(ROOT / "reproduce" / "claims.py")
    sys.modules[mod.__name__] = mod
    try:
        exec(compile(src, "old_claims.py", "exec"), mod.__dict__)
    finally:
        del sys.modules[mod.__name__]
    return mod, pd.read_csv(io.StringIO(csv), dtype={"id": str}).set_index("id")


def _fields(obj) -> dict:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


def test_loaded_claims_equal_the_old_code_field_by_field(old):
    mod, _ = old
    assert list(registry.CLAIMS) == list(mod.CLAIMS)
    changed = set()
    for cid, o in mod.CLAIMS.items():
        n = registry.CLAIMS[cid]
        for name, value in _fields(o).items():
            if name == "primary":
                continue
            if getattr(n, name) != value:
                changed.add((cid, name))
        new_p = _fields(n.primary)
        for name, value in _fields(o.primary).items():
            if new_p[name] != value:
                changed.add((cid, f"primary.{name}"))
        defaults = {f.name: f.default for f in dataclasses.fields(Contrast) if f.name not in _fields(o.primary)}
        for name, default in defaults.items():
            if new_p[name] != default:
                changed.add((cid, f"primary.{name}"))
    assert changed == CHANGED
    assert registry.NULL_PAIRS == mod.NULL_PAIRS


def test_paper_effects_equal_the_old_table_except_the_declared_fixes(old):
    _, csv = old
    new = registry.paper_effects()
    assert list(new.index) == list(csv.index) and list(new.columns) == list(csv.columns)
    changed = set()
    for cid in csv.index:
        for col in csv.columns:
            a, b = csv.loc[cid, col], new.loc[cid, col]
            same = (isinstance(a, float) and math.isnan(a) and math.isnan(b)) if col == "paper_effect" else False
            if not same and a != b:
                changed.add((cid, col))
    assert changed == CHANGED_EFFECTS


# --- Contrast.matches ---------------------------------------------------------------------------------------
def test_matches_an_arm_contrast_by_arms_orientation_and_metric():
    b1 = registry.claim("B1").primary
    assert b1.matches("synthetic", arm_a="Triplet-SN", arm_b="Triplet-HN", metric="rsum")
    assert b1.matches(arm_a="Triplet-SN", arm_b="Triplet-HN")  # any metric
    assert not b1.matches("synthetic", arm_a="Triplet-HN", arm_b="Triplet-SN", metric="rsum")  # orientation
    assert not b1.matches("synthetic", arm_a="Triplet-SN", arm_b="Triplet-HN", metric="i2t_r1")
    x_bcls, x_vse = "BCLS (Triplet-SN + Kendall SW-HS)", "VSE++ (Triplet-HN)"
    b4 = registry.claim("B4").primary
    assert b4.matches("flickr8k", arm_a=x_bcls, arm_b=x_vse, metric=("tau_t2i_sbert", "tau_i2t_sbert"))  # a mean
    b8 = registry.claim("B8").primary
    assert b8.matches("flickr8k", arm_a="BCLS", arm_b="Triplet-HN", metric=("mapr_i2t_expert", "mapr_t2i_expert"))
    assert not b8.matches("synthetic", arm_a="BCLS", arm_b="Triplet-HN", metric=("mapr_i2t_expert", "mapr_t2i_expert"))
    assert not registry.claim("B7").primary.matches("synthetic", arm_a="a", arm_b="b", metric="slope_difference")
    with pytest.raises(ValueError, match="give the data set"):
        b1.matches(arm_a="Triplet-SN", arm_b="Triplet-HN", metric="rsum")


def test_matches_a_list_of_arms_as_a_set_and_by_how_it_enters():
    c = Contrast("s", "rsum", "u", paper="bcls", arm_a="α=0.2", arm_b=("α=0", "α=0.4"))
    assert c.matches("synthetic", arm_a="α=0.2", arm_b=("α=0.4", "α=0"), metric="rsum")  # order free
    assert not c.matches("synthetic", arm_a="α=0.2", arm_b=("α=0", "α=0.1", "α=0.4"), metric="rsum")
    assert not c.matches("synthetic", arm_a="α=0.2", arm_b=("α=0", "α=0.4"), metric="rsum", versus="each")
    each = dataclasses.replace(c, versus="each")
    assert each.matches("synthetic", arm_a="α=0.2", arm_b=("α=0", "α=0.4"), versus="each")
    assert not each.matches("synthetic", arm_a="α=0.2", arm_b="α=0")  # one arm of the list is not the contrast


def test_matches_a_notebook_row_by_the_legacy_texts():
    s4 = registry.claim("S4").primary
    row = {"metric": "Pearson r difference vs expert judgements", "statement": "… (expert-judged pairs, all pairs)"}
    assert s4.matches("flickr8k", row=row)
    assert not s4.matches("synthetic", row=row)  # the synthetic legacy metric text differs
    assert not s4.matches("flickr8k", row={**row, "statement": "(expert-judged pairs, non-GT pairs)"})


# --- the loader's checks ------------------------------------------------------------------------------------
GOOD = """
datasets = ["synthetic", "flickr8k"]
[yardstick]
synthetic = "true"
flickr8k = "expert"

[[null_pair]]
arms_of = "p"
arm_a = "A"
arm_b = "B"
why = "same loss"

[[claim]]
id = "Q1"
paper = "P"
statement = "A beats B"
source = "Table 1"
notebook = "00_x"

[claim.primary]
statement = "A beats B on RSUM"
metric = "rsum"
unit = "RSUM points"
arms_of = "p"
arm_a = "A"
arm_b = ["B", "C"]
versus = "each"
predicted_to_fail = "C"

[claim.paper_effect]
value = 1.5
unit = "RSUM points"
source = "Table 1"
backbone = "VSE++"
dataset = "Flickr30K"
computation = "A 2.5 − B 1.0"
"""
ARMS = {"p": {"A", "B", "C"}}


def _load(tmp_path, text):
    path = tmp_path / "claims.toml"
    path.write_text(text, encoding="utf-8")
    return load(path, arm_names=ARMS, is_metric=lambda k: k in {"rsum", "i2t_r1"})


def test_a_good_file_loads(tmp_path):
    f = _load(tmp_path, GOOD)
    c = f["Q1"]
    assert c.primary.arm_b == ("B", "C") and c.primary.versus == "each" and c.primary.legacy == {"metric": "rsum"}
    assert c.paper_effect["paper_effect"] == 1.5 and f.null_pairs == [("p", "A", "B")]
    assert c.primary.arms_label() == "A − each of B, C"


@pytest.mark.parametrize(
    "old, new, message",
    [
        (
            'arm_a = "A"\narm_b = ["B"',
            'arm_a = "Aa"\narm_b = ["B"',
            r"claim Q1, primary, field 'arm_a' = 'Aa': expected an arm of 'p'",
        ),
        ('metric = "rsum"', 'metric = "rsun"', r"claim Q1, primary, field 'metric' = 'rsun': expected a metric key"),
        (
            'unit = "RSUM points"\narms_of',
            'kind = "directoin"\nunit = "RSUM points"\narms_of',
            r"field 'kind' = 'directoin': expected one of",
        ),
        ('versus = "each"', 'versis = "each"', r"claim Q1, primary: unknown field 'versis'"),
        ('versus = "each"', 'versus = "all"', r"field 'versus' = 'all': expected one of \('mean', 'each'\)"),
        ('predicted_to_fail = "C"', 'predicted_to_fail = "D"', r"field 'predicted_to_fail' = 'D': expected one of the"),
        ('notebook = "00_x"\n', "", r"claim Q1: missing field 'notebook'"),
        (
            'metric = "rsum"',
            'metric = { synthetic = "rsum", flickr9k = "rsum" }',
            r"field 'metric' = .*flickr9k.*keyed by data",
        ),
        (
            'arms_of = "p"\narm_a = "A"\narm_b = ["B", "C"]',
            'arms_of = "q"\narm_a = "A"\narm_b = ["B", "C"]',
            r"field 'arms_of' = 'q': expected a paper key",
        ),
        ('arm_b = "B"\nwhy', 'arm_b = "X"\nwhy', r"null_pair #1, field 'arm_b' = 'X'"),
        ("value = 1.5", 'value = "1.5"', r"claim Q1, paper_effect, field 'value' = '1.5': expected a number"),
        (
            '[claim.primary]\nstatement = "A beats B on RSUM"',
            '[claim.primary]\nstatement = "A beats B on RSUM"\nkind = "identity"',
            r"field 'tolerance' = None",
        ),
    ],
)
def test_a_misspelt_field_fails_at_load_naming_claim_and_field(tmp_path, old, new, message):
    assert old in GOOD
    with pytest.raises(ClaimDataError, match=message):
        _load(tmp_path, GOOD.replace(old, new, 1))


def test_a_duplicated_id_and_broken_toml_fail(tmp_path):
    claim = GOOD[GOOD.index("[[claim]]") :]
    with pytest.raises(ClaimDataError, match="the id 'Q1' is declared twice"):
        _load(tmp_path, GOOD + "\n" + claim)
    with pytest.raises(ClaimDataError, match="not valid TOML"):
        _load(tmp_path, GOOD + "\n[[claim]\n")


def test_versus_each_needs_a_list_and_notebook_measures_take_no_arms(tmp_path):
    with pytest.raises(ClaimDataError, match="field 'versus' = 'each': expected 'mean' unless arm_b is a list"):
        _load(tmp_path, GOOD.replace('arm_b = ["B", "C"]', 'arm_b = "B"').replace('predicted_to_fail = "C"', ""))
    text = GOOD.replace('unit = "RSUM points"\narms_of', 'unit = "RSUM points"\nmeasure = "notebook"\narms_of', 1)
    with pytest.raises(ClaimDataError, match="belong to measure 'arms'"):
        _load(tmp_path, text)


@pytest.mark.parametrize(
    "old, new, message",
    [
        (
            'arm_a = "Triplet-SN"',
            'arm_a = "Triplet SN"',
            r"claim B1, primary, field 'arm_a' = 'Triplet SN': expected an arm",
        ),
        ('metric = "cs200_i2t_sbert"', 'metric = "cs200_i2t_sbret"', r"claim L3, primary, field 'metric'"),
    ],
)
def test_the_package_file_is_checked_against_the_study_arms_and_metric_keys(tmp_path, old, new, message):
    from reproduce.spec import labels

    text = registry.CLAIMS_TOML.read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "claims.toml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(ClaimDataError, match=message):
        load(path, arm_names=registry.known_arm_names(), is_metric=labels.is_metric_key)


NOTEBOOK_PRIMARY = """[claim.primary]
statement = "A cell beats B cells on average"
metric = "rsum"
unit = "RSUM points"
measure = "notebook"
"""


def _notebook_claim(extra: str) -> str:
    """GOOD with its primary replaced by a notebook measure plus ``extra`` lines."""
    start, end = GOOD.index("[claim.primary]"), GOOD.index("[claim.paper_effect]")
    return GOOD[:start] + NOTEBOOK_PRIMARY + extra + "\n" + GOOD[end:]


def test_a_notebook_measure_names_the_arm_groups_it_is_computed_from(tmp_path):
    c = _load(tmp_path, _notebook_claim('arms_of = "p"\narm_groups = ["grid"]'))["Q1"]
    assert c.primary.measure == "notebook" and c.primary.paper == "p" and c.primary.arm_groups == ("grid",)
    assert _load(tmp_path, _notebook_claim(""))["Q1"].primary.arm_groups == ()
    for extra, message in [
        ('arms_of = "p"', r"with both 'arms_of' and 'arm_groups' \(a non-empty list\), or neither"),
        ('arm_groups = ["grid"]', r"with both 'arms_of' and 'arm_groups'"),
        ('arms_of = "p"\narm_groups = []', r"with both 'arms_of' and 'arm_groups'"),
        ('arms_of = "p"\narm_groups = "grid"', r"field 'arm_groups' = 'grid': expected a list of arm group names"),
        ('arms_of = "q"\narm_groups = ["grid"]', r"field 'arms_of' = 'q': expected a paper key"),
    ]:
        with pytest.raises(ClaimDataError, match=message):
            _load(tmp_path, _notebook_claim(extra))
    arms = GOOD.replace('versus = "each"', 'versus = "each"\narm_groups = ["grid"]', 1)
    with pytest.raises(ClaimDataError, match=r"field 'arm_groups' = \['grid'\]: expected no arm groups for measure"):
        _load(tmp_path, arms)


def test_the_package_file_names_only_arm_groups_the_study_has(tmp_path):
    """S3 rests on SAM's grid (its arms then get every seed); a misspelt group fails naming the claim."""
    assert registry.CLAIMS["S3"].primary.arm_groups == ("grid",)
    groups = registry.known_arm_groups()
    registry._check_arm_groups(registry.CLAIMS, groups)
    bad = {**groups, "sam": groups["sam"] - {"grid"}}
    with pytest.raises(ClaimDataError, match=r"claim S3, primary: arm_groups: got 'grid', expected a group of 'sam'"):
        registry._check_arm_groups(registry.CLAIMS, bad)
