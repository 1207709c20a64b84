"""Every seaborn call that draws a bootstrap interval fixes its seed (``reproduce.present.analyses.plotting.BANDS``),
so that a re-executed notebook draws the same whiskers: the same config and seed give the same figure."""

import ast
import json

import pytest
from helpers import ROOT


# seaborn functions whose default errorbar is a 95 % bootstrap interval with an unseeded generator
BOOTSTRAPPING = {"barplot", "pointplot", "lineplot", "regplot", "lmplot", "relplot", "catplot"}


def _sources() -> list[tuple[str, str]]:
    out = [(str(p.relative_to(ROOT)), p.read_text()) for p in sorted((ROOT / "reproduce").rglob("*.py"))]
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for i, cell in enumerate(json.loads(nb.read_text())["cells"]):
            if cell["cell_type"] == "code":
                src = "".join(cell["source"])
                code = "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in src.splitlines())
                out.append((f"{nb.relative_to(ROOT)} cell {i}", code))
    return out


def unseeded_bootstrap_calls(where: str, code: str) -> list[str]:
    """``where:line`` of each seaborn call that bootstraps with no seed: neither ``**BANDS`` nor ``seed=``,
    and no ``errorbar`` other than the default."""
    tree = ast.parse(code)
    seeded = {  # names bound to a dict(...) that carries **BANDS or seed=, e.g. point = dict(..., **plotting.BANDS)
        t.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Call)
        and any(k.arg == "seed" or (k.arg is None and "BANDS" in ast.unparse(k.value)) for k in node.value.keywords)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    bad = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr not in BOOTSTRAPPING or not (
            isinstance(node.func.value, ast.Name) and node.func.value.id == "sns"
        ):
            continue
        kw = {k.arg: k.value for k in node.keywords}
        splats = [ast.unparse(k.value) for k in node.keywords if k.arg is None]
        if "seed" in kw or any("BANDS" in s or s in seeded for s in splats):
            continue
        err = kw.get("errorbar")
        if err is not None and not (isinstance(err, ast.Tuple) and ast.unparse(err).startswith("('ci'")):
            continue  # errorbar=None or "sd": no bootstrap
        bad.append(f"{where}:{node.lineno}")
    return bad


def test_every_bootstrapped_band_has_a_seed():
    bad = [b for where, code in _sources() for b in unseeded_bootstrap_calls(where, code)]
    assert not bad, f"seaborn bootstrap intervals without a seed (use **plotting.BANDS): {bad}"


@pytest.mark.parametrize(
    "code, n_bad",
    [
        ('sns.barplot(data=d, x="a", y="b", errorbar=("ci", 95), ax=ax)', 1),
        ('sns.pointplot(data=d, x="a", y="b")', 1),
        ('sns.barplot(data=d, x="a", y="b", **BANDS, ax=ax)', 0),
        ('sns.lineplot(data=d, x="a", y="b", **plotting.BANDS)', 0),
        ('sns.barplot(data=d, x="a", y="b", errorbar=("ci", 95), seed=0)', 0),
        ('sns.barplot(data=d, x="a", y="b", errorbar=None)', 0),
        ("sns.heatmap(m, ax=ax)", 0),
        ('p = dict(x="m", **plotting.BANDS)\nsns.pointplot(data=d, **p)', 0),
        ('p = dict(x="m")\nsns.pointplot(data=d, **p)', 1),
    ],
)
def test_the_scan_finds_planted_calls(code, n_bad):
    assert len(unseeded_bootstrap_calls("planted", code)) == n_bad


def test_a_figure_saved_twice_is_byte_identical(tmp_path):
    """No date and no random SVG ids: a notebook re-executed on the same runs leaves its figures unchanged in git."""
    import time

    import matplotlib.pyplot as plt

    from reproduce.present import report

    fig, ax = plt.subplots()
    ax.plot([0, 1, 2], [1, 0, 1], label="a")
    ax.set(title="planted", xlabel="x")
    ax.legend()
    report.save_figure(fig, tmp_path, "p", "f")
    first = {fmt: (tmp_path / "p" / f"f.{fmt}").read_bytes() for fmt in ("png", "svg")}
    time.sleep(1.1)  # a date in the metadata would differ
    report.save_figure(fig, tmp_path, "p", "f")
    plt.close(fig)
    for fmt, data in first.items():
        assert (tmp_path / "p" / f"f.{fmt}").read_bytes() == data, fmt
    assert b"<dc:date>" not in first["svg"]
