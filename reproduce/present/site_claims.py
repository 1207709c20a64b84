"""The claims on the results site (:mod:`reproduce.present.site`): the one-line table of every claim with filters by
paper and verdict, a page per claim with its numbers and a figure of its per-seed effects, the headline figure (every
effect ÷ its δ, coloured by verdict) and the verdict counts per data set. Nothing is computed here: every number is the
ledger's (``claims.csv``)."""

from __future__ import annotations

import html
import re
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd

from reproduce.spec.tables import fmt_num

from reproduce.present.ledger_render import PAPERS_SIZE, summary_counts, verdict_tags
from reproduce.present.site_html import page_head
from reproduce.protocol import scale


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
