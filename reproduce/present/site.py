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
only divides each effect and interval by the δ the ledger states).
"""

from __future__ import annotations

import argparse
import html
import json
import re
import shutil
import sys
from pathlib import Path

import matplotlib
import mistune
import numpy as np
import pandas as pd

from reproduce.spec.tables import fmt_num

from reproduce.present.ledger_render import PAPERS_SIZE, summary_counts, verdict_tags
from reproduce.protocol import scale
from reproduce.spec.paths import ROOT

SKIP_DIRS = {"site", "smoke", "benchmarks", "notebooks", "cache"}
NAV_STYLE = """
nav.site-nav{position:sticky;top:0;background:#f4f6f8;border-bottom:1px solid #d0d7de;padding:.45em 1em;
font:14px system-ui,sans-serif;z-index:1000}
nav.site-nav a{margin-right:1em}
"""
STYLE = (
    NAV_STYLE
    + """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1100px;margin:0 auto;
padding:0 1.2em 3em;line-height:1.45;color:#1b1b1b}
table{border-collapse:collapse;margin:1em 0;font-size:14px}
th,td{border:1px solid #d0d7de;padding:.3em .55em;vertical-align:top}
th{background:#f4f6f8}
tr:target{background:#fff3b0}
[id]{scroll-margin-top:3em}
figure{display:inline-block;margin:.6em;max-width:480px;vertical-align:top}
figure img{max-width:100%;height:auto;border:1px solid #e1e4e8}
figcaption{font-size:13px;color:#444}
code{background:#f4f6f8;padding:0 .2em}
"""
)
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


def page_head(title: str, depth: int = 0) -> str:
    up = "../" * depth
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{STYLE}</style></head>'
        f"<body>{nav(up)}\n"
    )


def nav(up: str, extra: str = "") -> str:
    return (
        f'<nav class="site-nav"><a href="{up}index.html">coherent_itr results</a>'
        f'<a href="{up}ledger.html">claims ledger</a><a href="{up}figures.html">figures</a>{extra}</nav>'
    )


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


VERDICT_COLOURS = {
    "reproduced": "#1a9850",
    "reversed": "#d73027",
    "ruled out": "#4d4d4d",
    "inconclusive": "#f39c12",
    "not testable": "#8e7cc3",
}
CLIP = 8.0  # effects beyond ±CLIP × δ are drawn at the edge with an arrow


LEDGER_STYLE = """
body{max-width:1380px}
table.claims{font-size:13px}
table.claims td{white-space:nowrap}
table.claims td.claim{max-width:26em;overflow:hidden;text-overflow:ellipsis}
.filters{font:14px system-ui,sans-serif;margin:.6em 0}
.filters select{margin-right:1.2em}
"""
FILTER_SCRIPT = """<script>
function filterClaims(){var p=document.getElementById('f-paper').value,v=document.getElementById('f-verdict').value;
document.querySelectorAll('tr[data-paper]').forEach(function(r){
var ok=(!p||r.dataset.paper===p)&&(!v||r.dataset.verdicts.split('|').indexOf(v)>=0);r.style.display=ok?'':'none';});}
</script>"""
STATEMENT_CHARS = 70  # a claim's statement is cut here in the one-line table (the full text is its title)


def _verdict_html(r: dict) -> str:
    colour = VERDICT_COLOURS.get(r["verdict"], "black")
    tags = verdict_tags(r)
    tag = f" ({', '.join(tags)})" if tags else ""
    return f'<b style="color:{colour}">{html.escape(str(r["verdict"]))}</b>{html.escape(tag)}'


def _effect_text(r: dict) -> str:
    lo, hi = r.get("ci_low"), r.get("ci_high")
    if pd.notna(lo) and pd.notna(hi):
        return f"{fmt_num(r['effect'])} [{fmt_num(lo)}, {fmt_num(hi)}]"
    return fmt_num(r.get("effect"))


def _papers_size(r: dict) -> str:
    """The row's cell at the papers' size as the ledger wrote it, without its prefix ("" where it has none)."""
    v = r.get("papers_size")
    return v.removeprefix(PAPERS_SIZE) if isinstance(v, str) else ""


def _papers_size_html(text: str) -> str:
    """A papers'-size cell (:func:`_papers_size`) as HTML: its **verdict** in the verdict's colour."""
    return re.sub(
        r"\*\*([^*]+)\*\*",
        lambda m: f'<b style="color:{VERDICT_COLOURS.get(html.unescape(m[1]), "black")}">{m[1]}</b>',
        html.escape(text),
    )


def claims_table(claims) -> str:
    """One line per claim: id (its page), paper, the statement (cut, full text as its title), per data set the
    effect [interval] → verdict, and — as in the README, where the ledger has a ``papers_size`` column with
    anything in it — :data:`reproduce.protocol.scale.SCALE_DATA`'s verdict at the papers' size; filters by paper and
    verdict (a few lines of script, no library)."""
    prim = claims[claims["role"] == "primary"]
    data = list(dict.fromkeys(prim["dataset"]))
    papers = list(dict.fromkeys(prim["paper"].astype(str)))
    verdicts = [v for v in VERDICT_COLOURS if v in set(prim["verdict"])]
    options = "".join(f"<option>{html.escape(p)}</option>" for p in papers)
    v_options = "".join(f"<option>{html.escape(v)}</option>" for v in verdicts)
    scaled = any(_papers_size(r) for r in prim[prim["dataset"] == scale.SCALE_DATA].to_dict("records"))
    rows = []
    for cid, g in prim.groupby("id", sort=False):
        by = {r["dataset"]: r for r in g.to_dict("records")}
        first = g.iloc[0]
        text = str(first.get("statement", ""))
        short = text if len(text) <= STATEMENT_CHARS else text[: STATEMENT_CHARS - 1] + "…"
        cells = "".join(
            f"<td>{html.escape(_effect_text(by[d]))} → {_verdict_html(by[d])}</td>" if d in by else "<td>—</td>"
            for d in data
        )
        if scaled:
            cells += f"<td>{_papers_size_html(_papers_size(by.get(scale.SCALE_DATA, {}))) or '—'}</td>"
        vs = "|".join(dict.fromkeys(str(r["verdict"]) for r in by.values()))
        rows.append(
            f'<tr id="{html.escape(cid)}" data-paper="{html.escape(str(first["paper"]))}" '
            f'data-verdicts="{html.escape(vs)}">'
            f'<td><a href="claims/{html.escape(cid)}.html">{html.escape(cid)}</a></td>'
            f'<td>{html.escape(str(first["paper"]))}</td><td class="claim" title="{html.escape(text)}">'
            f"{html.escape(short)}</td>{cells}</tr>"
        )
    head = "".join(f"<th>{html.escape(d)}: effect [interval] → verdict</th>" for d in data)
    if scaled:
        head += f"<th>{html.escape(scale.SCALE_DATA)} at the {html.escape(scale.SCALE_LABEL)}</th>"
    return (
        f"<style>{LEDGER_STYLE}</style>{FILTER_SCRIPT}"
        '<div class="filters">paper <select id="f-paper" onchange="filterClaims()"><option value="">all</option>'
        f'{options}</select>verdict <select id="f-verdict" onchange="filterClaims()"><option value="">all</option>'
        f"{v_options}</select></div>"
        f'<table class="claims"><tr><th>id</th><th>paper</th><th>claim</th>{head}</tr>{"".join(rows)}</table>'
    )


def claim_figure(rows: list[dict], path: Path) -> None:
    """One panel per data set: the per-seed effects (dots), the mean with its simultaneous interval, 0, δ and
    the paper's effect."""
    matplotlib.use("Agg")
    # after matplotlib.use('Agg'): claim pages only
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(rows), 1, figsize=(6.4, 1.25 * len(rows) + 0.6), squeeze=False, sharex=True)
    for ax, r in zip(axes[:, 0], rows):
        seeds = [float(x) for x in str(r.get("seed_effects") or "").split(";") if x.strip()]
        colour = VERDICT_COLOURS.get(r["verdict"], "black")
        ax.plot(seeds, np.linspace(-0.15, 0.15, len(seeds)) if seeds else [], "o", color="0.55", ms=4, label="seeds")
        if pd.notna(r.get("ci_low")) and pd.notna(r.get("ci_high")):
            ax.plot([r["ci_low"], r["ci_high"]], [0.45, 0.45], color=colour, lw=2.2, label="interval")
        ax.plot([r["effect"]], [0.45], "o", color=colour, ms=6)
        ax.axvline(0, color="0.6", lw=0.9)
        if pd.notna(r.get("delta")):
            ax.axvline(r["delta"], color="0.4", lw=0.9, ls="--", label="δ")
        if pd.notna(r.get("paper_effect")):
            ax.axvline(abs(r["paper_effect"]), color="#2166ac", lw=1.1, label="paper")
        ax.set_yticks([])
        ax.set_ylim(-0.5, 0.9)
        ax.set_ylabel(str(r["dataset"]), fontsize=9)
        ax.tick_params(labelsize=8)
    axes[0, 0].legend(fontsize=7, ncol=5, loc="upper left", frameon=False)
    axes[-1, 0].set_xlabel(f"effect ({rows[0].get('unit') or rows[0].get('metric')}; > 0 = as claimed)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


CLAIM_FIELDS = (
    ("verdict", "verdict"),
    ("reason", "why"),
    ("effect", "effect [simultaneous interval]"),
    ("level", "interval level (family, m)"),
    ("paper_effect", "paper's effect"),
    ("delta", "δ (half the paper's effect)"),
    ("seed_effects", "per-seed effects"),
    ("seed_sd", "sd per seed"),
    ("query_var", "test-set sd"),
    ("power", "power at the paper's effect (seeds for 80 %)"),
    ("stability", "stability"),
    ("papers_size", f"at the {scale.SCALE_LABEL}"),  # only on the pages of the claims it decides again
)


def _field(r: dict, key: str) -> str:
    if key == "verdict":
        return _verdict_html(r)
    if key == "effect":
        return html.escape(_effect_text(r))
    if key == "level":
        return (
            html.escape(f"{100 * r['level']:.2f} % ({r.get('family')}, m = {int(r['family_size'])})")
            if pd.notna(r.get("level")) and pd.notna(r.get("family_size"))
            else "—"
        )
    if key == "paper_effect":
        return (
            html.escape(f"{fmt_num(r['paper_effect'])} ({r.get('paper_source')})")
            if pd.notna(r.get("paper_effect"))
            else "—"
        )
    if key == "seed_effects":
        seeds = [x for x in str(r.get("seed_effects") or "").split(";") if x.strip()]
        return html.escape(", ".join(fmt_num(x) for x in seeds) or "—")
    if key == "query_var":
        return html.escape(fmt_num(np.sqrt(r["query_var"]))) if pd.notna(r.get("query_var")) else "—"
    if key == "power":
        if not pd.notna(r.get("power")):
            return html.escape(str(r.get("power_note") or "—")) if pd.notna(r.get("power_note")) else "—"
        n = r.get("seeds_for_power")
        need = f"{int(n)} seeds" if pd.notna(n) else str(r.get("power_note") or "")
        return html.escape(f"{100 * r['power']:.0f} % with {int(r['n_seeds'])} ({need})")
    if key == "papers_size":
        return _papers_size_html(_papers_size(r)) or "—"
    if key == "stability":
        return html.escape(f"{100 * r['stability']:.0f} %") if pd.notna(r.get("stability")) else "—"
    v = r.get(key)
    return html.escape(fmt_num(v) if isinstance(v, float) else str(v)) if pd.notna(v) else "—"


def write_claim_pages(claims, out: Path) -> int:
    """``claims/<id>.html`` for every claim: per data set its numbers (:data:`CLAIM_FIELDS`) and a figure
    (:func:`claim_figure`) of the per-seed effects and the interval against 0, δ and the paper's effect."""
    prim = claims[claims["role"] == "primary"]
    folder = out / "claims"
    folder.mkdir(parents=True, exist_ok=True)
    for cid, g in prim.groupby("id", sort=False):
        rows = g.to_dict("records")
        claim_figure(rows, folder / f"{cid}.png")
        head = "".join(f"<th>{html.escape(str(r['dataset']))}</th>" for r in rows)
        body = "".join(
            f"<tr><th>{html.escape(label)}</th>" + "".join(f"<td>{_field(r, key)}</td>" for r in rows) + "</tr>"
            for key, label in CLAIM_FIELDS
            if key != "papers_size" or any(_papers_size(r) for r in rows)
        )
        page = (
            page_head(f"{cid} — {rows[0]['statement']}", depth=1)
            + f"<h1>{html.escape(cid)} · {html.escape(str(rows[0]['paper']))}</h1>"
            + f"<p>{html.escape(str(rows[0]['statement']))}</p>"
            + f'<img src="{html.escape(cid)}.png" alt="{html.escape(cid)}: per-seed effects and interval">'
            + f"<table><tr><th></th>{head}</tr>{body}</table>"
            + '<p><a href="../ledger.html">back to the ledger</a></p></body></html>\n'
        )
        (folder / f"{cid}.html").write_text(page, encoding="utf-8")
    return prim["id"].nunique()


def headline_figure(claims, path: Path) -> list[str] | None:
    """The main comparison in one figure: every primary row's effect ÷ its smallest effect of interest δ (half
    the paper's effect), with its simultaneous interval, one panel per data set, coloured by verdict; the
    paper's own effect is the line at 2. Rows without δ (no paper number; identities) cannot be put on that
    scale and are left out. Returns the claim ids left out, or None when nothing was drawn."""
    matplotlib.use("Agg")
    # after matplotlib.use('Agg'): the headline figure only
    import matplotlib.pyplot as plt

    if claims is None or not {"effect", "ci_low", "ci_high", "delta"} <= set(claims.columns):
        return None
    rows = claims[(claims["role"] == "primary") & (claims["delta"] > 0)]
    if rows.empty:
        return None
    left_out = [c for c in dict.fromkeys(claims.loc[claims["role"] == "primary", "id"]) if c not in set(rows["id"])]
    ids = list(dict.fromkeys(rows["id"]))
    data = list(dict.fromkeys(rows["dataset"]))
    fig, axes = plt.subplots(
        1, len(data), figsize=(4.2 * len(data) + 1.2, 0.22 * len(ids) + 1.6), sharey=True, squeeze=False
    )
    y_of = {cid: len(ids) - 1 - i for i, cid in enumerate(ids)}
    for ax, d in zip(axes[0], data):
        sub = rows[rows["dataset"] == d]
        for r in sub.itertuples(index=False):
            t, y = r.delta, y_of[r.id]
            colour = VERDICT_COLOURS.get(r.verdict, "black")
            lo, hi = r.ci_low / t, r.ci_high / t
            if np.isfinite(lo) and np.isfinite(hi):
                ax.plot([np.clip(lo, -CLIP, CLIP), np.clip(hi, -CLIP, CLIP)], [y, y], color=colour, lw=1.6)
            x = r.effect / t
            marker = ">" if x > CLIP else "<" if x < -CLIP else "o"
            ax.plot(np.clip(x, -CLIP, CLIP), y, marker=marker, color=colour, ms=5)
        for v, style, colour in ((0, "-", "0.6"), (1, "--", "0.6"), (2, "-", "#2166ac")):
            ax.axvline(v, color=colour, lw=0.9, ls=style, zorder=0)
        ax.set_xlim(-CLIP - 0.5, CLIP + 0.5)
        ax.set_title(d, fontsize=10)
        ax.set_xlabel("our effect ÷ δ (1 = half the paper's, 2 = the paper's)", fontsize=9)
        ax.tick_params(labelsize=8)
        ax.grid(axis="x", alpha=0.3)
    axes[0][0].set_yticks(range(len(ids)), [ids[len(ids) - 1 - k] for k in range(len(ids))])
    axes[0][0].set_ylim(-0.8, len(ids) - 0.2)
    handles = [plt.Line2D([], [], color=c, marker="o", lw=1.6, label=v) for v, c in VERDICT_COLOURS.items()]
    handles.append(plt.Line2D([], [], color="#2166ac", lw=0.9, label="the paper's effect"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)
    fig.suptitle("Each claim's effect against the paper's, with its simultaneous interval", fontsize=10)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return left_out


def verdict_table(claims) -> str:
    if claims is None:
        return "<p>No claims ledger yet: run <code>make reproduce</code>.</p>"
    if "underpowered" in claims:  # the ledger's own categories, as in the README (inconclusive split by power)
        counts = summary_counts(claims)
        counts = counts.loc[:, counts.sum() > 0]
        order = list(counts.columns)
    else:
        primary = claims[claims["role"] == "primary"]
        counts = primary.groupby(["dataset", "verdict"]).size().unstack(fill_value=0)
        order = [v for v in VERDICT_COLOURS if v in counts]
        order += [v for v in counts.columns if v not in order]
    head = "".join(f"<th>{html.escape(v)}</th>" for v in order)
    rows = "".join(
        f"<tr><td>{html.escape(d)}</td>" + "".join(f"<td>{counts.loc[d, v]}</td>" for v in order) + "</tr>"
        for d in counts.index
    )
    return (
        f"<table><tr><th>data set</th>{head}</tr>{rows}</table>"
        "<p>One primary row per claim and data set; the rule and every row are in the "
        '<a href="ledger.html">claims ledger</a>.</p>'
    )


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
