"""The results site (reproduce/present/site.py): built from a planted results folder, its links, images and
claim anchors checked by a Python link checker and in a real headless browser (Chromium; skipped when
none is installed). ``make test-site`` also builds the site of the committed results and points
``COHERENT_ITR_SITE`` at it, so the browser checks every page of the real site too.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import nbformat  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from reproduce.present import site, site_claims  # noqa: E402

CLAIMS_MD = """# Claims ledger

## Primary rows

| id | claim | data | verdict |
|---|---|---|---|
| B1 | Triplet-SN beats Triplet-HN | synthetic | **reproduced** |
| B1 | Triplet-SN beats Triplet-HN | flickr8k | **inconclusive** |
| B10 | a planted id that B1 must not match | synthetic | **ruled out** |
| U1 | Unified beats Triplet-HN | synthetic | **ruled out** |

## Secondary rows

| id | claim | data | verdict |
|---|---|---|---|
| B1 | secondary \\| row with an escaped pipe | synthetic | **inconclusive** |
"""


def _png(color: str) -> bytes:
    fig, ax = plt.subplots(figsize=(2, 1.5), dpi=50)
    ax.plot([0, 1], [0, 1], color=color)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def _notebook(path: Path, title: str) -> None:
    nb = nbformat.v4.new_notebook()
    out = nbformat.v4.new_output("display_data", data={"image/png": base64.b64encode(_png("C0")).decode()})
    nb.cells = [
        nbformat.v4.new_markdown_cell(f"# {title}\n\nClaims B1 and U1."),
        nbformat.v4.new_code_cell("plot()", outputs=[out], execution_count=1),
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    """A results folder shaped like the study's: two data sets, two notebooks each, a ledger, figures."""
    res = tmp_path / "results"
    for base in (res, res / "flickr8k"):
        _notebook(base / "notebooks" / "01_bcls.ipynb", "01 · BCLS")
        _notebook(base / "notebooks" / "05_unified.ipynb", "05 · Unified")
    rows = [  # U1 has no δ (no paper number): it cannot go on the headline figure's effect ÷ δ scale
        ("B1", "primary", "synthetic", "reproduced", "01_bcls", 30.0, 20.0, 40.0, 10.0),
        ("B1", "primary", "flickr8k", "inconclusive", "01_bcls", 5.0, -5.0, 15.0, 10.0),
        ("B10", "primary", "synthetic", "ruled out", "01_bcls", 1.0, -2.0, 4.0, 10.0),
        ("U1", "primary", "synthetic", "ruled out", "05_unified", 0.1, 0.0, 0.2, math.nan),
        ("B1", "secondary", "synthetic", "inconclusive", "01_bcls", 2.0, -1.0, 5.0, 10.0),
    ]
    columns = ["id", "role", "dataset", "verdict", "notebook", "effect", "ci_low", "ci_high", "delta"]
    pd.DataFrame(rows, columns=columns).to_csv(res / "claims.csv", index=False)
    (res / "claims.md").write_text(CLAIMS_MD)
    (res / "manifest.json").write_text(json.dumps({"profile": "default", "library_source_hash": "abc123"}))
    for rel in ("bcls/fig4_synthetic.png", "flickr8k/bcls/fig4_flickr8k.png"):
        (res / rel).parent.mkdir(parents=True, exist_ok=True)
        (res / rel).write_bytes(_png("C1"))
    smoke = res / "smoke" / "bcls" / "fig4_synthetic.png"  # never part of the site
    smoke.parent.mkdir(parents=True)
    smoke.write_bytes(_png("C2"))
    return res


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs, self.srcs, self.ids = [], [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "a" and "href" in a:
            self.hrefs.append(a["href"])
        if tag == "img" and "src" in a:
            self.srcs.append(a["src"])
        if "id" in a:
            self.ids.append(a["id"])


def _parse(path: Path) -> _Links:
    p = _Links()
    p.feed(path.read_text(encoding="utf-8"))
    return p


def _broken_links(out: Path) -> list[str]:
    """Every relative link, image and fragment of the site that does not resolve (external URLs skipped)."""
    pages = {p: _parse(p) for p in out.rglob("*.html")}
    broken = []
    for page, parsed in pages.items():
        for ref in parsed.hrefs + parsed.srcs:
            u = urlsplit(ref)
            if u.scheme or ref.startswith("//"):
                continue  # data: URIs and public URLs (nbconvert's CDN scripts)
            target = (page.parent / u.path).resolve() if u.path else page
            if not target.is_file():
                broken.append(f"{page.relative_to(out)}: {ref} (no file)")
            elif u.fragment and target.suffix == ".html" and u.fragment not in pages[target].ids:
                broken.append(f"{page.relative_to(out)}: {ref} (no id {u.fragment!r})")
    return broken


def test_site_pages_links_and_claim_anchors(planted: Path, tmp_path: Path):
    index = site.build(planted, tmp_path / "site")
    out = index.parent
    pages = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.html"))
    assert pages == [
        "figures.html",
        "flickr8k/01_bcls.html",
        "flickr8k/05_unified.html",
        "index.html",
        "ledger.html",
        "synthetic/01_bcls.html",
        "synthetic/05_unified.html",
    ]
    assert _broken_links(out) == []
    ledger = (out / "ledger.html").read_text()
    # B1's anchor is on its FIRST row (the synthetic primary row), not on B10 and not on the secondary row
    row = re.search(r'<tr id="B1">(.*?)</tr>', ledger, re.S).group(1)
    assert "synthetic" in row and "reproduced" in row and "secondary" not in row
    assert re.search(r'<tr id="B10">\s*<td>B10</td>', ledger)
    assert ledger.count('id="B1"') == 1
    assert "secondary | row with an escaped pipe" in html.unescape(ledger)  # one cell, not two
    index_html = index.read_text()
    for ref in ("ledger.html#B1", "ledger.html#U1", "synthetic/01_bcls.html", "flickr8k/05_unified.html"):
        assert f'href="{ref}"' in index_html
    assert "<td>reproduced</td>" not in index_html and ">1</td>" in index_html  # counts, not verdict names
    assert '<img src="headline.png"' in index_html and (out / "headline.png").stat().st_size > 0
    assert 'Not on this scale (no paper number): <a href="ledger.html#U1">U1</a>.' in index_html
    bcls = (out / "synthetic" / "01_bcls.html").read_text()
    assert 'href="../ledger.html#B1"' in bcls and 'href="../ledger.html#B10"' in bcls and "#U1" not in bcls
    assert "data:image/png;base64," in bcls
    assert sorted(p.relative_to(out).as_posix() for p in (out / "figures").rglob("*.png")) == [
        "figures/bcls/fig4_synthetic.png",
        "figures/flickr8k/bcls/fig4_flickr8k.png",
    ]


def test_link_checker_finds_a_planted_broken_anchor_and_image(planted: Path, tmp_path: Path):
    out = site.build(planted, tmp_path / "site").parent
    ledger = out / "ledger.html"
    ledger.write_text(ledger.read_text().replace('id="U1"', 'id="U1x"'))
    (out / "figures" / "bcls" / "fig4_synthetic.png").unlink()
    broken = _broken_links(out)
    assert any("#U1 (no id 'U1')" in b for b in broken), broken
    assert any("fig4_synthetic.png (no file)" in b for b in broken), broken


def test_a_claim_without_a_ledger_row_and_a_folder_without_notebooks_are_errors(planted: Path, tmp_path: Path):
    (planted / "claims.md").write_text(CLAIMS_MD.replace("| U1 |", "| U9 |"))
    with pytest.raises(ValueError, match="no table row for claim 'U1'"):
        site.build(planted, tmp_path / "site")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match=re.escape(str(empty))):
        site.build(empty)
    assert site.main(["--results", str(empty)]) == 2


def test_rebuild_replaces_the_previous_site(planted: Path, tmp_path: Path):
    out = tmp_path / "site"
    site.build(planted, out)
    (out / "leftover.html").write_text("old")
    shutil.rmtree(planted / "flickr8k")
    site.build(planted, out)
    assert not (out / "leftover.html").exists() and not (out / "flickr8k").exists()


def test_index_summary_from_the_results_or_the_readme_links_made_text(planted: Path, tmp_path: Path):
    readme = tmp_path / "README.md"
    readme.write_text(
        "# T\n\n## What it finds\n\n* **B1** holds ([the ledger](results/claims.md), "
        "[paper](https://arxiv.org/abs/2210.11319)).\n\n## Run it\n\nmake\n"
    )
    text = site.findings_markdown(planted, readme)
    assert text.startswith("## What it finds") and "Run it" not in text
    assert "the ledger," in text and "results/claims.md" not in text and "(https://arxiv.org/abs/2210.11319)" in text
    (planted / "summary.md").write_text("Generated summary: 1 of 2 reproduced.")
    assert site.findings_markdown(planted, readme) == "Generated summary: 1 of 2 reproduced."
    index = site.build(planted, tmp_path / "site").read_text()
    assert "Generated summary: 1 of 2 reproduced." in index


# --- in a real browser ---------------------------------------------------------------------------

PROBE = """<script>
window.addEventListener('load', function () {
  var imgs = Array.prototype.map.call(document.images, function (i) {
    return {src: (i.getAttribute('src') || '').slice(0, 60), ok: i.complete && i.naturalWidth > 0};
  });
  var ids = Array.prototype.map.call(document.querySelectorAll('[id]'), function (e) { return e.id; });
  var hrefs = Array.prototype.map.call(document.querySelectorAll('a[href]'), function (a) {
    return a.getAttribute('href');
  });
  var t = document.querySelector(':target');
  var pre = document.createElement('pre');
  pre.id = 'site-probe';
  pre.textContent = JSON.stringify({title: document.title, imgs: imgs, ids: ids, hrefs: hrefs,
                                    target: t ? t.id : null, h1: (document.querySelector('h1') || {}).textContent});
  document.body.appendChild(pre);
});
</script>"""


def _chromium() -> str | None:
    for name in (os.environ.get("CHROMIUM", ""), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


needs_browser = pytest.mark.skipif(_chromium() is None, reason="no headless Chromium (apt-get install chromium)")


def _browse(page: Path, fragment: str = "") -> dict:
    """Load ``page`` (a probe copy beside it, so its relative links still resolve) in headless Chromium
    and return what the page's DOM reports after its load event: images loaded, ids, links, :target."""
    probe = page.with_name(page.stem + ".probe.html")
    text = page.read_text(encoding="utf-8")
    head, body_end, tail = text.rpartition("</body>")
    probe.write_text(head + PROBE + body_end + tail if body_end else text + PROBE, encoding="utf-8")
    try:
        r = subprocess.run(
            [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
             "--virtual-time-budget=5000", "--window-size=1280,1600", "--dump-dom",
             probe.resolve().as_uri() + (f"#{fragment}" if fragment else "")],
            capture_output=True, text=True, timeout=180,
        )  # fmt: skip
    finally:
        probe.unlink()
    m = re.search(r'<pre id="site-probe">(.*?)</pre>', r.stdout, re.S)
    assert m, f"{page}: the page did not finish loading in Chromium (exit {r.returncode}): {r.stderr[-1500:]}"
    return json.loads(html.unescape(m.group(1)))


def _check_in_browser(out: Path, claim_ids: list[str]) -> dict[str, dict]:
    seen = {p.relative_to(out).as_posix(): _browse(p) for p in sorted(out.rglob("*.html"))}
    index = seen["index.html"]
    assert index["title"].startswith("coherent_itr") and "coherent" in index["h1"]
    for rel, dom in seen.items():
        bad = [i["src"] for i in dom["imgs"] if not i["ok"]]
        assert not bad, f"{rel}: images that did not load: {bad}"
        for ref in dom["hrefs"]:
            u = urlsplit(ref)
            if u.scheme or not u.fragment or not u.path.endswith("ledger.html"):
                continue
            assert u.fragment in seen["ledger.html"]["ids"], f"{rel}: {ref} names no id of the ledger page"
    assert set(claim_ids) <= set(seen["ledger.html"]["ids"])
    first = claim_ids[0]
    assert _browse(out / "ledger.html", first)["target"] == first  # the browser lands on that row
    return seen


@needs_browser
def test_planted_site_in_a_headless_browser(planted: Path, tmp_path: Path):
    out = site.build(planted, tmp_path / "site").parent
    seen = _check_in_browser(out, ["B1", "B10", "U1"])
    # one image per notebook page, two figures, the headline figure of the index
    assert sum(len(d["imgs"]) for d in seen.values()) == 2 * 2 + 2 + 1
    assert [i["ok"] for i in seen["index.html"]["imgs"]] == [True]
    # the check can fail: a figure replaced by bytes that are not an image does not load
    (out / "figures" / "bcls" / "fig4_synthetic.png").write_bytes(b"not a png")
    imgs = _browse(out / "figures.html")["imgs"]
    assert [i["ok"] for i in imgs] == [False, True], imgs


@needs_browser
@pytest.mark.skipif(not os.environ.get("COHERENT_ITR_SITE"), reason="set by make test-site (the built site)")
def test_built_site_in_a_headless_browser():
    out = Path(os.environ["COHERENT_ITR_SITE"])
    assert (out / "index.html").is_file(), f"COHERENT_ITR_SITE={out}: no index.html (run make site)"
    claims = (
        pd.read_csv(out.parent / "claims.csv", dtype={"id": str}) if (out.parent / "claims.csv").is_file() else None
    )
    ids = list(dict.fromkeys(claims["id"])) if claims is not None else []
    seen = _check_in_browser(out, ids)
    assert sum(len(d["imgs"]) for d in seen.values()) > 0
    assert _broken_links(out) == []


def test_the_ledger_page_has_one_line_per_claim_with_filters_and_a_page_per_claim(planted: Path, tmp_path: Path):
    """With the ledger's own columns the page opens with one row per claim (anchored once by its id, the claim's
    verdict per data set, filter attributes) and links each claim to its page: the numbers per data set and a
    figure of the per-seed effects against 0, δ and the paper's effect."""
    claims = pd.read_csv(planted / "claims.csv")
    claims = claims.assign(
        paper=["BCLS", "BCLS", "BCLS", "Unified", "BCLS"],
        statement=["Triplet-SN beats Triplet-HN on test RSUM " * 3, "Triplet-SN beats Triplet-HN", "B10", "U1", "s"],
        paper_effect=[9.7, 9.7, 9.7, math.nan, math.nan],
        seed_effects=["29;30;31", "4;5;6", "1;1;1", "0.1;0.1;0.1", ""],
        power=[0.95, 0.2, 0.9, math.nan, math.nan],
        seeds_for_power=[3, 14, 4, math.nan, math.nan],
        underpowered=[False, True, False, None, None],
        n_seeds=[3, 3, 3, 3, 3],
    )
    claims.to_csv(planted / "claims.csv", index=False)
    out = site.build(planted, tmp_path / "site").parent
    ledger = (out / "ledger.html").read_text()
    assert _broken_links(out) == []
    table = ledger[ledger.index('<table class="claims">') : ledger.index("<h2>Every row</h2>")]
    rows = re.findall(r"<tr id=\"([^\"]+)\" data-paper=\"([^\"]+)\" data-verdicts=\"([^\"]+)\">", table)
    assert rows == [
        ("B1", "BCLS", "reproduced|inconclusive"),
        ("B10", "BCLS", "ruled out"),
        ("U1", "Unified", "ruled out"),
    ]
    assert ledger.count('id="B1"') == 1 and 'id="f-paper"' in ledger and 'id="f-verdict"' in ledger
    assert "…" in table and 'title="Triplet-SN beats Triplet-HN on test RSUM Triplet-SN' in table  # cut, full as title
    assert "inconclusive</b> (underpowered)" in table
    b1 = (out / "claims" / "B1.html").read_text()
    assert "29, 30, 31" in b1 and "4, 5, 6" in b1 and "95 % with 3 (3 seeds)" in b1 and "20 % with 3 (14 seeds)" in b1
    assert (out / "claims" / "B1.png").stat().st_size > 0 and '<img src="B1.png"' in b1


def _with_papers_size(planted: Path, paper) -> pd.DataFrame:
    """The planted ledger with the ledger's own columns and its papers'-size cells as the ledger writes them
    (:func:`reproduce.present.ledger_render.papers_size_column` against the papers'-size ledger ``paper``)."""
    from reproduce.present.ledger_render import papers_size_column

    claims = pd.read_csv(planted / "claims.csv").assign(
        paper=["BCLS", "BCLS", "BCLS", "Unified", "BCLS"], statement=["B1", "B1", "B10", "U1", "s"]
    )
    claims["papers_size"] = papers_size_column(claims, paper)
    claims.to_csv(planted / "claims.csv", index=False)
    return claims


def _row(table: str, cid: str) -> str:
    return re.search(rf'<tr id="{cid}".*?</tr>', table).group(0)


def test_the_ledger_page_and_claim_pages_show_the_verdict_at_the_papers_size(planted: Path, tmp_path: Path):
    from reproduce.protocol import scale

    paper = pd.DataFrame(
        [
            dict(
                id="B1",
                role="primary",
                dataset="flickr8k",
                verdict="reversed",
                effect=-15.3,
                ci_low=-20.1,
                ci_high=-10.4,
            )
        ]
    )
    claims = _with_papers_size(planted, paper)
    assert claims.loc[1, "papers_size"] == "papers' size: **reversed** -15.3 [-20.1, -10.4]"  # B1, flickr8k
    out = site.build(planted, tmp_path / "site").parent
    assert _broken_links(out) == []
    ledger = (out / "ledger.html").read_text()
    table = ledger[ledger.index('<table class="claims">') : ledger.index("<h2>Every row</h2>")]
    assert f"<th>flickr8k at the {html.escape(scale.SCALE_LABEL)}</th>" in table
    b1 = _row(table, "B1")
    assert b1.endswith(
        f'<td><b style="color:{site_claims.VERDICT_COLOURS["reversed"]}">reversed</b> -15.3 [-20.1, -10.4]</td></tr>'
    )
    assert _row(table, "U1").endswith("<td>—</td></tr>")  # U1 has no Flickr8k row here
    assert 'data-verdicts="reproduced|inconclusive"' in b1  # the filter keeps the default's verdicts
    page = (out / "claims" / "B1.html").read_text()
    line = re.search(rf"<tr><th>at the {re.escape(html.escape(scale.SCALE_LABEL))}</th>.*?</tr>", page).group(0)
    assert line.count("<td>") == 2 and "<td>Flickr8k only</td>" in line  # synthetic: the paper profile trains none
    assert '">reversed</b> -15.3 [-20.1, -10.4]</td>' in line
    assert "papers" not in (out / "claims" / "B10.html").read_text()  # B10 is no main-comparison row


def test_without_papers_size_runs_the_main_rows_say_not_yet_measured_and_without_the_column_nothing(
    planted: Path, tmp_path: Path
):
    _with_papers_size(planted, None)
    out = site.build(planted, tmp_path / "site").parent
    ledger = (out / "ledger.html").read_text()
    table = ledger[ledger.index('<table class="claims">') : ledger.index("<h2>Every row</h2>")]
    assert _row(table, "B1").endswith("<td>not yet measured</td></tr>")
    assert "not yet measured" in (out / "claims" / "B1.html").read_text()
    claims = pd.read_csv(planted / "claims.csv").drop(columns="papers_size")  # a ledger written before the column
    claims.to_csv(planted / "claims.csv", index=False)
    out = site.build(planted, tmp_path / "site2").parent
    ledger = (out / "ledger.html").read_text()
    assert "papers" not in ledger[ledger.index('<table class="claims">') : ledger.index("<h2>Every row</h2>")]
    assert "papers" not in (out / "claims" / "B1.html").read_text()
