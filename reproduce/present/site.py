"""A static HTML site of the committed results: the executed notebooks, the claims ledger and the figures.

    python -m reproduce.present.site                      # results/ -> results/site/  (what `make site` runs)
    python -m reproduce.present.site --results R --out O

Pages (all relative links, so the folder can be opened from disk or served as is):

* ``index.html`` — what the study asks, the plain summary (``<results>/summary.md`` when the study
  wrote one, else the README's "What it finds"), the verdict counts per data set (from
  ``claims.csv``), the headline figure (:func:`headline_figure`), what produced the results
  (``manifest.json``), and one row per paper with its notebook page per data set and its claim ids
  linked into the ledger;
* ``<data>/<notebook>.html`` — each executed notebook rendered by nbconvert (figures embedded),
  with a bar linking home, the ledger rows of its claims and the figures;
* ``ledger.html`` — ``claims.md`` rendered, each claim id's first row carrying ``id="<claim id>"``
  (so ``ledger.html#B1`` lands on B1's primary row);
* ``figures.html`` — every PNG figure of the results folder, copied under ``figures/``.

Nothing is computed here: every number comes from the files the study wrote (the headline figure
only divides each effect and interval by the δ the ledger states). The claims' table, pages and figures are
:mod:`reproduce.present.site_claims`'s, the frame every page shares :mod:`reproduce.present.site_html`'s.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import shutil
import sys
from pathlib import Path

import mistune
import pandas as pd

from reproduce.present.site_claims import CLIP, claims_table, headline_figure, verdict_table, write_claim_pages
from reproduce.present.site_html import NAV_STYLE, nav, page_head
from reproduce.spec.paths import ROOT

SKIP_DIRS = {"site", "smoke", "benchmarks", "notebooks", "cache"}
INTRO = (
    "Five image-text retrieval papers argue that binary image–caption labels are not enough and that "
    "training on continuous relevance makes the embedding space more <em>coherent</em>. This study "
    "re-implements their losses on one backbone (VSE++), trains every arm under one protocol with an "
    "equal tuning budget, and decides each of their claims with a pre-stated rule: an effect with a "
    "simultaneous interval over seeds and test queries, read against zero and against half the paper's own "
    "effect. It runs on a synthetic world with "
    "known relevance and on Flickr8k with human relevance judgements."
)


def datasets(results: Path) -> list[tuple[str, Path]]:
    """The data sets with executed notebooks: ``synthetic`` at the root of ``results``, the others in a
    sub-folder of their name (``results/flickr8k/notebooks``)."""
    found = [("synthetic", results)] if (results / "notebooks").is_dir() else []
    for sub in sorted(p for p in results.iterdir() if p.is_dir() and p.name not in SKIP_DIRS):
        if (sub / "notebooks").is_dir():
            found.append((sub.name, sub))
    return found


def markdown_html(text: str) -> str:
    """Markdown (with pipe tables) to HTML, by the renderer nbconvert uses (mistune)."""
    return mistune.create_markdown(escape=False, plugins=["table", "strikethrough"])(text)


def read_claims(results: Path):
    """``claims.csv`` as a DataFrame, or None when the study has not written one."""
    path = results / "claims.csv"
    if not path.is_file():
        return None
    df = pd.read_csv(path, dtype={"id": str})
    missing = {"id", "role", "dataset", "verdict", "notebook"} - set(df.columns)
    if missing:
        raise ValueError(f"{path}: expected columns {sorted(missing)} are missing")
    return df


def claims_by_notebook(claims) -> dict[str, list[str]]:
    """``{"01_bcls": ["B1", …]}`` in ledger order (claim ids of the primary rows)."""
    if claims is None:
        return {}
    out: dict[str, list[str]] = {}
    for nb, cid in claims.loc[claims["role"] == "primary", ["notebook", "id"]].itertuples(index=False):
        ids = out.setdefault(str(nb), [])
        if cid not in ids:
            ids.append(cid)
    return out


def claim_links(ids: list[str], up: str = "") -> str:
    return " ".join(f'<a href="{up}ledger.html#{html.escape(c)}">{html.escape(c)}</a>' for c in ids)


def render_notebook(nb_path: Path, out_path: Path, claim_ids: list[str], data: str) -> None:
    """One executed notebook to a standalone HTML page (images embedded), with the site's bar on top."""
    # slow import, only when a notebook is rendered
    import nbformat

    # slow import, only when a notebook is rendered
    from nbconvert import HTMLExporter

    nb = nbformat.read(nb_path, as_version=4)
    exporter = HTMLExporter(template_name="lab")
    exporter.exclude_input_prompt = True
    exporter.exclude_output_prompt = True
    body, _ = exporter.from_notebook_node(nb)
    extra = f"<span>{html.escape(data)} · {html.escape(nb_path.stem)}</span>"
    if claim_ids:
        extra += f" <span>claims: {claim_links(claim_ids, '../')}</span>"
    bar = f"<style>{NAV_STYLE}</style>" + nav("../", " " + extra)
    body, n = re.subn(r"(<body[^>]*>)", lambda m: m.group(1) + bar, body, count=1)
    if not n:
        raise ValueError(f"{nb_path}: nbconvert produced no <body> to put the site bar in")
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(body, encoding="utf-8")


def anchor_claims(ledger_html: str, ids: list[str]) -> str:
    """Give the first table row of each claim id ``id="<claim id>"`` (its first primary row)."""
    for cid in ids:
        pattern = re.compile(r"<tr>(\s*<td[^>]*>\s*" + re.escape(html.escape(cid)) + r"\s*</td>)")
        ledger_html, n = pattern.subn(lambda m, c=cid: f'<tr id="{html.escape(c)}">' + m.group(1), ledger_html, 1)
        if not n:
            raise ValueError(f"claims.md has no table row for claim {cid!r} of claims.csv")
    return ledger_html


def write_ledger(results: Path, out: Path, claims) -> list[str]:
    """``ledger.html``: one line per claim with filters (:func:`claims_table`, each row anchored by its claim id
    and linked to its page, :func:`write_claim_pages`), then ``claims.md`` rendered (every row, the legend);
    without a ``claims.csv`` the Markdown alone, its first row per claim anchored. Returns the claim ids."""
    md = results / "claims.md"
    ids = list(dict.fromkeys(claims["id"])) if claims is not None else []
    body = markdown_html(md.read_text(encoding="utf-8")) if md.is_file() else "<p>No claims ledger was written.</p>"
    compact = claims is not None and {"statement", "paper", "effect", "ci_low", "ci_high"} <= set(claims.columns)
    if compact:
        write_claim_pages(claims, out)
        body = body.replace("<h1>Claims ledger</h1>", "", 1)
        body = "<h1>Claims ledger</h1>" + claims_table(claims) + "<h2>Every row</h2>" + body
    elif md.is_file():
        body = anchor_claims(body, ids)
    (out / "ledger.html").write_text(page_head("Claims ledger") + body + "</body></html>\n", encoding="utf-8")
    return ids


def figure_files(results: Path) -> list[Path]:
    """Every PNG under ``results`` (not the site, not the smoke run), in path order."""
    return sorted(p for p in results.rglob("*.png") if not ({"site", "smoke"} & set(p.relative_to(results).parts)))


def write_figures(results: Path, out: Path) -> int:
    parts = [page_head("Figures"), "<h1>Figures</h1><p>Every figure the study wrote, by folder.</p>"]
    current = None
    files = figure_files(results)
    for png in files:
        rel = png.relative_to(results)
        folder = rel.parent.as_posix()
        if folder != current:
            parts.append(f'<h2 id="{html.escape(folder.replace("/", "-"))}">{html.escape(folder)}</h2>')
            current = folder
        dest = out / "figures" / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(png, dest)
        src = html.escape(("figures" / rel).as_posix())
        parts.append(
            f'<figure><a href="{src}"><img src="{src}" alt="{html.escape(rel.as_posix())}" loading="eager"></a>'
            f"<figcaption><code>results/{html.escape(rel.as_posix())}</code></figcaption></figure>"
        )
    (out / "figures.html").write_text("\n".join(parts) + "</body></html>\n", encoding="utf-8")
    return len(files)


def manifest_line(results: Path) -> str:
    path = results / "manifest.json"
    if not path.is_file():
        return ""
    m = json.loads(path.read_text())
    bits = [f"profile <code>{html.escape(str(m.get('profile', '?')))}</code>"]
    if m.get("finished_utc"):
        bits.append(f"finished {html.escape(str(m['finished_utc']))}")
    if m.get("library_source_hash"):
        bits.append(f"library source hash <code>{html.escape(str(m['library_source_hash']))}</code>")
    return (
        "<p>Produced by <code>make reproduce</code>: " + ", ".join(bits) + " (<code>results/manifest.json</code>).</p>"
    )


def findings_markdown(results: Path, readme: Path = ROOT / "README.md") -> str:
    """The plain summary for the index: ``<results>/summary.md`` when the study wrote one, else the
    README's "What it finds" section. Links become their text (they are relative to the repository,
    not to the site); public URLs stay."""
    path = results / "summary.md"
    if path.is_file():
        text = path.read_text(encoding="utf-8")
    elif readme.is_file():
        m = re.search(
            r"^## What it finds\n(.*?)(?=^## |^<!-- claims-ledger:begin -->|\Z)", readme.read_text(), re.M | re.S
        )
        text = "## What it finds\n" + m.group(1) if m else ""
    else:
        return ""
    return re.sub(r"(?<!!)\[([^\]]*)\]\((?!https?://)[^)]*\)", r"\1", text)


def write_index(results: Path, out: Path, pages: dict[str, dict[str, str]], by_nb: dict[str, list[str]], claims):
    parts = [
        page_head("coherent_itr — results"),
        "<h1>Does continuous relevance make image-text retrieval more coherent?</h1>",
    ]
    parts.append(f"<p>{INTRO}</p>")
    summary = findings_markdown(results)
    if summary:
        parts.append(markdown_html(summary))
    parts += ["<h2>Verdicts</h2>", verdict_table(claims)]
    left_out = headline_figure(claims, out / "headline.png")
    if left_out is not None:
        note = f" Not on this scale (no paper number): {claim_links(left_out)}." if left_out else ""
        parts.append(
            '<figure style="max-width:100%"><img src="headline.png" alt="every primary effect against the paper\'s">'
            "<figcaption>Each effect divided by δ, half the paper's effect: the blue line at 2 is the paper's own "
            "effect, the dashed line at 1 is δ. <em>Reproduced</em>: the interval clear of 0; <em>ruled out</em>: "
            f"it contains 0 and ends left of 1. Effects beyond ±{CLIP:g} δ are drawn at the edge.{note}"
            "</figcaption></figure>"
        )
    parts.append(manifest_line(results))
    data_names = list(dict.fromkeys(d for nbs in pages.values() for d in nbs))
    head = "".join(f"<th>{html.escape(d)}</th>" for d in data_names)
    rows = []
    for stem, by_data in pages.items():
        cells = "".join(
            f'<td><a href="{html.escape(by_data[d])}">{html.escape(stem)}</a></td>' if d in by_data else "<td>—</td>"
            for d in data_names
        )
        rows.append(f"<tr><td>{html.escape(stem)}</td>{cells}<td>{claim_links(by_nb.get(stem, []))}</td></tr>")
    parts.append(
        f"<h2>Papers and notebooks</h2><table><tr><th>notebook</th>{head}<th>claims</th></tr>{''.join(rows)}</table>"
    )
    (out / "index.html").write_text("\n".join(parts) + "</body></html>\n", encoding="utf-8")


def build(results: str | Path = ROOT / "results", out: str | Path | None = None, progress: bool = False) -> Path:
    """Render the site; returns the path of ``index.html``. Raises ``FileNotFoundError`` naming the
    folder when ``results`` has no executed notebooks."""
    results = Path(results)
    out = Path(out) if out is not None else results / "site"
    found = datasets(results) if results.is_dir() else []
    if not found:
        raise FileNotFoundError(
            f"{results}: no executed notebooks (expected {results}/notebooks/*.ipynb); run make reproduce"
        )
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    claims = read_claims(results)
    by_nb = claims_by_notebook(claims)
    pages: dict[str, dict[str, str]] = {}
    for data, base in found:
        for nb in sorted((base / "notebooks").glob("*.ipynb")):
            rel = f"{data}/{nb.stem}.html"
            if progress:
                print(f"  {rel}", flush=True)
            render_notebook(nb, out / rel, by_nb.get(nb.stem, []), data)
            pages.setdefault(nb.stem, {})[data] = rel
    write_ledger(results, out, claims)
    n_fig = write_figures(results, out)
    write_index(results, out, dict(sorted(pages.items())), by_nb, claims)
    if progress:
        n_pages = sum(len(v) for v in pages.values())
        print(f"site: {n_pages} notebook pages, the ledger, {n_fig} figures -> {out / 'index.html'}")
    return out / "index.html"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m reproduce.present.site", description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default=str(ROOT / "results"), help="the results folder to render (default: results/)")
    ap.add_argument("--out", default=None, help="where to write the site (default: <results>/site)")
    args = ap.parse_args(argv)
    try:
        build(args.results, args.out, progress=True)
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
