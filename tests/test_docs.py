"""The user documentation: README length and ledger markers, links that stay inside the repository
(or go to public URLs), the README's library example runs, CITATION.cff has the CFF 1.2.0 shape."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
PAPERS = (
    "Image-Text Retrieval with Binary and Continuous Label Supervision",
    "Adaptive Ladder Loss for Learning Coherent Visual-Semantic Embedding",
    "Is An Image Worth Five Sentences?",
    "Integrating Listwise Ranking into Pairwise-based Image-Text Retrieval",
    "Unified Loss of Pair Similarity Optimization for Vision-Language Retrieval",
    "VSE++: Improving Visual-Semantic Embeddings with Hard Negatives",
    "Framing Image Description as a Ranking Task",
)


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def bad_links(path: Path, root: Path = ROOT) -> list[str]:
    """Links of a Markdown file that leave the repository, name a missing file or a missing heading."""
    bad = []
    for target in LINK.findall(path.read_text(encoding="utf-8")):
        if re.match(r"https?://", target):
            if re.match(r"https?://(localhost|127\.|[^/]*\.invalid)", target):
                bad.append(f"{target} (not public)")
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if root.resolve() not in dest.parents and dest != root.resolve():
            bad.append(f"{target} (outside the repository)")
        elif not dest.exists():
            bad.append(f"{target} (no such file)")
        elif anchor and dest.suffix == ".md":
            heads = {_slug(h) for h in re.findall(r"^#+ (.+)$", dest.read_text(encoding="utf-8"), re.M)}
            if anchor not in heads:
                bad.append(f"{target} (no heading #{anchor})")
    return bad


def test_readme_is_short_starts_with_the_study_and_keeps_the_ledger_block():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines (at most 200)"
    assert lines[0].startswith("# ") and "?" in lines[0]  # the question the study asks
    first_section = text.split("\n## ", 2)
    assert first_section[1].startswith("What it finds")
    assert text.count("<!-- claims-ledger:begin -->") == 1 and text.count("<!-- claims-ledger:end -->") == 1
    # the verdict words are defined before the results use them, and the power table is linked
    words = first_section[1]
    for w in ("**Reproduced**", "**Reversed**", "**Ruled out**", "**Inconclusive**"):
        assert w in words and words.index(w) < words.index("* **")
    assert "results/power.md" in words


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_links_stay_in_the_repository_or_go_to_public_urls(path: Path):
    assert bad_links(path) == []
    text = path.read_text(encoding="utf-8")
    assert "../shared/" not in text and not re.search(r"\bthe issues?\b", text, re.I)


def test_link_checker_catches_planted_bad_links(tmp_path: Path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# Title\n\n## On a GPU\n")
    page = tmp_path / "README.md"
    page.write_text(
        "[ok](docs/a.md#on-a-gpu) [web](https://example.org/x) [up](../shared/notes/claims.md) "
        "[gone](docs/b.md) [anchor](docs/a.md#nowhere) [local](http://localhost:8888/lab) ![img](x.png)"
    )
    assert bad_links(page, tmp_path) == [
        "../shared/notes/claims.md (outside the repository)",
        "docs/b.md (no such file)",
        "docs/a.md#nowhere (no heading #nowhere)",
        "http://localhost:8888/lab (not public)",
    ]


def test_readme_library_example_runs(capsys):
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "README.md has no python example"
    import torch

    state = torch.random.get_rng_state()  # the example seeds torch; leave other tests' RNG as it was
    try:
        exec(compile(blocks[0], "README.md example", "exec"), {"__name__": "readme_example"})
    finally:
        torch.random.set_rng_state(state)
    out = capsys.readouterr().out.splitlines()
    assert "'bcls'" in out[0] and len(out) == 3
    rsum, ndcg = map(float, out[2].split())
    assert 0 <= rsum <= 600 and 0 <= ndcg <= 1


def test_citation_cff_and_references():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0"
    assert {"cff-version", "message", "title", "authors"} <= set(cff)
    assert (
        cff["license"] == "MIT"
        and cff["authors"]
        and all(a.get("name") or a.get("family-names") for a in cff["authors"])
    )
    refs = cff["references"]
    assert all({"type", "title", "authors"} <= set(r) for r in refs)
    titles = " ".join(r["title"] for r in refs)
    references = (ROOT / "docs" / "references.md").read_text(encoding="utf-8")
    for paper in PAPERS:
        assert paper.lower() in titles.lower(), paper
        assert paper.lower() in references.lower(), paper
    assert not re.search(r"doi\.org|\b10\.\d{4,}/", references)  # no DOI: only arXiv ids and venues
    license_text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert license_text.startswith("MIT License") and "Flickr8k" in license_text


def test_the_protocols_tuning_grid_and_halving_share_are_the_codes():
    """docs/protocol.md states the default profile's lr grid and how many settings go on past the rung: they are
    read back from the text and compared with ``reproduce.spec.profiles`` and
    ``reproduce.protocol.halving.n_survivors``."""
    from reproduce.spec.profiles import get_profile
    from reproduce.protocol.halving import n_survivors

    text = (ROOT / "docs" / "protocol.md").read_text(encoding="utf-8")
    grid = get_profile("default").tuning
    stated = {tuple(float(x) for x in m.split(", ")) for m in re.findall(r"lr ∈ \{([0-9e., -]+)\}", text)}
    assert stated == {tuple(sorted(grid.lr))}, f"docs/protocol.md states lr grids {stated}, the code has {grid.lr}"
    halves = re.findall(r"(\d+) of (\d+), (\d+) of (\d+)", text)
    assert halves, "docs/protocol.md does not state the successive-halving shares ('k of n, k of n')"
    n_with, n_without = len(grid.lr) * len(grid.warmup_epochs), len(grid.lr)
    for a, b, c, d in halves:
        assert (int(b), int(d)) == (n_with, n_without)
        assert (int(a), int(c)) == (n_survivors(n_with, grid.keep), n_survivors(n_without, grid.keep))


def test_the_compute_docs_cost_table_is_the_cost_models():
    """docs/compute.md's table of what the default protocol costs (tuning runs, final runs, worker-hours, wall hours
    at 2 workers) is what ``python -m reproduce.protocol.plan`` computes (``reproduce.protocol.plan.estimate_cost``)."""
    from reproduce.protocol.plan import estimate_cost

    text = (ROOT / "docs" / "compute.md").read_text(encoding="utf-8")
    for data, name in (("synthetic", "synthetic"), ("flickr8k", "Flickr8k")):
        m = re.search(rf"^\| {name} \| (\d+) \| (\d+) \| ([\d.]+) \| ([\d.]+) h \|$", text, flags=re.M)
        assert m, f"docs/compute.md has no cost row for {name}"
        e = estimate_cost("default", data, workers=2)
        assert (int(m[1]), int(m[2])) == (e["tuning_runs"], e["final_runs"]), (name, m.groups(), e)
        assert float(m[3]) == round(e["worker_hours"], 1), (name, m[3], e["worker_hours"])
        assert float(m[4]) == round(e["total_min"] / 60, 1), (name, m[4], e["total_min"] / 60)
