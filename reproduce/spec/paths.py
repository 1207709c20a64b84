"""Where the study's files are: the checkout's root and the notebooks, with the paper each one is about.

One definition of :data:`ROOT` (the repository root: ``results/``, ``notebooks/`` and ``README.md`` are under it)
for every module of ``reproduce/``. Standard library only, so the command line's ``--help`` stays light.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK_DIR = ROOT / "notebooks"
# --papers value → the notebook it selects ("data" is the data card; it trains nothing)
PAPER_NOTEBOOKS = {
    "overview": "00",
    "bcls": "01",
    "ladder": "02",
    "sam": "03",
    "listwise": "04",
    "unified": "05",
    "data": "06",
}


def notebook_paths(only: list[str] | None = None) -> list[Path]:
    nbs = sorted(p for p in NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb"))
    if only:
        nbs = [p for p in nbs if any(p.stem.startswith(o) or p.stem == o for o in only)]
    return nbs


def for_papers(papers: list[str] | None) -> list[str] | None:
    """The notebook prefixes selected by ``--papers`` (None: every notebook)."""
    return [PAPER_NOTEBOOKS[p] for p in papers] if papers else None
