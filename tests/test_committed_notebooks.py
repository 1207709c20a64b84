"""The committed executed notebooks (``results/notebooks``, ``results/flickr8k/notebooks``) read as a
researcher should see them: metric names by the label map, no warning boxes, no paths of
the machine that executed them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from reproduce.spec import notebook_keys

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = sorted(
    [*(ROOT / "results" / "notebooks").glob("*.ipynb"), *(ROOT / "results" / "flickr8k" / "notebooks").glob("*.ipynb")]
)
MACHINE_PATH = re.compile(r"(?<![\w$])/(?:root|home|work|tmp|Users)/[\w.-]+")


def _outputs_text(path: Path) -> str:
    import json

    nb = json.loads(path.read_text(encoding="utf-8"))
    return "\n".join(t for c in nb["cells"] for o in c.get("outputs", []) for t in notebook_keys._output_texts(o))


@pytest.mark.skipif(not COMMITTED, reason="no executed notebooks under results/ (run make reproduce)")
@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_committed_notebook_uses_labels_and_shows_no_warning_or_machine_path(path):
    assert notebook_keys.raw_metric_keys_in(path) == []
    text = _outputs_text(path)
    assert "TqdmWarning" not in text and "Flickr8kWarning" not in text
    assert not MACHINE_PATH.findall(text), MACHINE_PATH.findall(text)[:3]
    assert str(ROOT) not in path.read_text(encoding="utf-8")  # metadata included


def test_the_machine_path_pattern_can_fail():
    assert MACHINE_PATH.findall("see /work/main/src/a.py and /root/.cache/x")
    assert not MACHINE_PATH.findall("$FLICKR8K_DIR/images and src/coherent_itr/a.py and 1/work/2")


def _committed_dirs() -> dict:
    from reproduce.spec.profiles import profile_for

    return {d: ROOT / profile_for("default", d).results_dir for d in ("synthetic", "flickr8k")}


def test_every_committed_notebook_was_executed_by_the_code_of_this_checkout():
    """``results/`` is current at every landing: each committed notebook's stamp names the inputs this checkout's
    code, notebooks and library give (a landing that changes what they execute runs ``make reproduce``, any CPU)."""
    from reproduce.driver import notebooks

    stale = notebooks.stale_notebooks("default", _committed_dirs())
    assert not stale, "stale executed notebooks (regenerate them: make reproduce):\n" + "\n".join(stale)


def test_a_planted_edit_of_the_code_makes_every_committed_notebook_stale(tmp_path):
    import shutil

    from reproduce.driver import notebooks

    pkg = tmp_path / "reproduce"
    shutil.copytree(ROOT / "reproduce", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    edited = pkg / "present" / "analyses" / "plotting.py"
    edited.write_text(edited.read_text() + "\n# an edit\n")
    stale = notebooks.stale_notebooks("default", _committed_dirs(), pkg=pkg)
    assert len(stale) == 2 * len(notebooks.notebook_paths())
    assert all("executed with inputs" in s for s in stale) and "01_bcls.ipynb [flickr8k]" in "\n".join(stale)
