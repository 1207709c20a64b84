"""The claims ledger as a reader sees it: ``claims.md`` (primary rows first, then secondary, then the legend), the
README's table and its plain summary — from the rows of :mod:`reproduce.protocol.ledger_rows`; ``power.md`` is
:mod:`reproduce.present.ledger_power`'s.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd


from reproduce.spec import claims as registry
from reproduce.protocol.ledger import (
    FAILED,
    FRACTION,
    LARGER_THAN_PAPER,
    LEGEND,
    POWER,
    REVERSAL,
    RULE,
    SEED_CAP,
    SMALLER,
    STABLE,
    TAGS,
)
from reproduce.protocol import scale
from reproduce.protocol.claim_files import as_float, is_stale
from reproduce.spec.tables import fmt_num, md_cell


def effect_cell(r) -> str:
    if not np.isfinite(as_float(r["effect"])):
        return f"— ({r['reason']})" if isinstance(r.get("reason"), str) else "—"
    if not (np.isfinite(as_float(r["ci_low"])) and np.isfinite(as_float(r["ci_high"]))):
        why = "identity: the largest deviation" if r.get("kind") == "identity" else str(r.get("reason", ""))
        return f"{fmt_num(r['effect'])} [— {why.split(';')[0]}]"
    return f"{fmt_num(r['effect'])} [{fmt_num(r['ci_low'])}, {fmt_num(r['ci_high'])}]"


PAPERS_SIZE = "papers' size: "  # how every cell of the ledger's papers_size column starts


def papers_size_cell(v) -> str:
    """A row's cell "at the papers' size" from :func:`reproduce.protocol.scale.papers_size`: empty for a row the
    papers' size does not decide again, the reason where it has no verdict, else its verdict and interval."""
    if v is None:
        return ""
    if isinstance(v, str):
        return f"{PAPERS_SIZE}{v}"
    return f"{PAPERS_SIZE}**{v['verdict']}** {effect_cell(v)}"


def papers_size_column(df: pd.DataFrame, paper: pd.DataFrame | None) -> list[str]:
    """The ledger's ``papers_size`` column: :func:`papers_size_cell` of every row against the papers'-size ledger
    ``paper`` (``None``: none measured yet)."""
    return [papers_size_cell(v) for v in scale.papers_size(df, paper)]


def _flag(x) -> bool | None:
    """A flag column read back from a CSV or freshly built: True / False / None (empty)."""
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, str) and x.strip().lower() in ("true", "false"):
        return x.strip().lower() == "true"
    return None


def power_cell(r) -> str:
    """Power at 1× the paper's effect with the row's seeds, and the seeds that would give POWER (or why none do)."""
    pw = as_float(r.get("power"))
    if not np.isfinite(pw):
        return "—"
    n = as_float(r.get("seeds_for_power"))
    if np.isfinite(n):
        need = f"{int(n)} seeds for {POWER:.0%}"
    elif "not reachable" in str(r.get("power_note") or ""):
        need = "not reachable: test-set variance"
    else:
        need = f"> {SEED_CAP} seeds"
    return f"{100 * pw:.0f}% ({need})"


def stability_cell(r) -> str:
    """Share of bootstrap resamples with the same verdict, *fragile* below the ledger's STABLE."""
    s = as_float(r.get("stability"))
    if not np.isfinite(s):
        return "—"
    return f"{100 * s:.0f}%" + (" *fragile*" if _flag(r.get("fragile")) else "")


STALE_MARK = "*stale*: an earlier run's, see the note in `claims.csv`"

STALE = "stale"  # the README's category of a stale primary row (summary_counts, primary_table)

STALE_CELL = "*stale*"  # the README cell of a stale primary row; the line above the table says what it means


def _stale_mask(rows: pd.DataFrame) -> pd.Series:
    """Boolean Series: which of ``rows`` are stale (:func:`is_stale`, for a whole table)."""
    if "note" not in rows:
        return pd.Series(False, index=rows.index)
    return rows["note"].map(lambda n: is_stale({"note": n})).astype(bool)


def verdict_tags(r) -> list[str]:
    """The notes beside a row's verdict, one vocabulary for the ledger, the README, the site and the notebooks:
    *underpowered* (inconclusive rows below POWER at the paper's effect), *a reversal not excluded* (ruled-out rows
    whose interval reaches below −δ), *smaller than the paper* (any direction row whose interval lies below the
    paper's effect), *larger than the paper — check the baseline* (reproduced rows) and, where the verdict
    changes with δ scaled to our baseline, *δ-sensitive: <verdict> under the scaled δ*, and where an arm failed
    seeds, *failed seeds* with the failure rates and the verdict without them."""
    tags = []
    if r["verdict"] == "inconclusive" and _flag(r.get("underpowered")):
        tags.append("underpowered")
    if r["verdict"] == "ruled out" and _flag(r.get("reversal_not_excluded")):
        tags.append(REVERSAL)
    if _flag(r.get("smaller_than_paper")):
        tags.append(SMALLER)
    if _flag(r.get("larger_than_paper")):
        tags.append("larger than the paper — check the baseline")
    if _flag(r.get("delta_sensitive")):
        tags.append(f"δ-sensitive: {r.get('verdict_scaled')} under the scaled δ")
    without = r.get("without_failures")
    if isinstance(without, str) and without.strip():
        tags.append(f"{FAILED}: {r.get('failures')}; without them {without}")
    return tags


def verdict_cell(r) -> str:
    """The verdict in bold with its tags (:func:`verdict_tags`), each in parentheses, and the *stale* mark of a row
    from an earlier run (:func:`is_stale`)."""
    v = f"**{r['verdict']}**" + "".join(f" ({t})" for t in verdict_tags(r))
    if is_stale(r):
        v += f" — {STALE_MARK}"
    return v


def _stale_counts(df: pd.DataFrame) -> tuple[int, int]:
    """(stale primary rows, primary rows) of a ledger."""
    prim = df[df["role"] == "primary"] if len(df) else df
    return int(_stale_mask(prim).sum()), len(prim)


def stale_sentence(df: pd.DataFrame) -> str:
    """One sentence when some primary rows are stale: how many, and that their numbers are an earlier run's."""
    n, n_prim = _stale_counts(df)
    if not n:
        return ""
    return (
        f"**{n} of {n_prim} primary rows are stale**: their claim files were written by an earlier run "
        "(other code or protocol) and no execution with the current inputs has replaced them. They are marked "
        "*stale* below; read their verdicts as that run's, not this ledger's."
    )


DELTA_ASSUMES = (
    "δ is in the metric's absolute units: it assumes the paper's effect carries over unchanged from the papers' "
    "models (RSUM 390–480 on Flickr30K and COCO) to ours (RSUM ≈ 220 on Flickr8k, ≈ 480 on the synthetic set)."
)


def scaled_delta_cell(r) -> str:
    """The δ sensitivity of a primary row: δ scaled to our baseline and the verdict under it (bold where it
    differs from the row's verdict); — where the row has no scaled δ."""
    ds = as_float(r.get("delta_scaled"))
    if not np.isfinite(ds):
        return "—"
    vs = str(r.get("verdict_scaled") or "")
    return f"{fmt_num(ds)} → " + (f"**{vs}**" if _flag(r.get("delta_sensitive")) else vs)


def delta_sentence(df: pd.DataFrame) -> str:
    """The README's sentence on what δ assumes and which primary verdicts change with δ scaled to our baseline."""
    prim = df[df["role"] == "primary"] if len(df) else df
    if "delta_sensitive" not in prim:
        return ""
    prim = prim[~_stale_mask(prim)]
    flips = prim[prim["delta_sensitive"].map(_flag).eq(True)]
    n = int(prim["delta_scaled"].map(as_float).map(np.isfinite).sum())
    if not n:
        return ""
    which = (
        "these verdicts change: "
        + "; ".join(
            f"{r['id']} {r['dataset']} ({r['verdict']} → {r['verdict_scaled']})" for r in flips.to_dict("records")
        )
        if len(flips)
        else "no verdict changes"
    )
    return (
        f"{DELTA_ASSUMES} With δ scaled to our baseline instead ({FRACTION:g} × paper effect × our baseline ÷ the "
        f"paper's, for the {n} RSUM rows with a paper effect), {which}; the declared δ stays the verdict."
    )


def _cell(s) -> str:
    return md_cell(s) if isinstance(s, str) and s else "—"


def legend_markdown() -> str:
    lines = [
        "## Legend",
        "",
        f"Rule (`reproduce/protocol/ledger.py`): {RULE} Effects are oriented so that the claim predicts > 0 (A − B). "
        "A primary row's interval is its family's simultaneous interval; secondary rows show an unadjusted 95% "
        "interval, are decided on direction alone and never decide a claim.",
        "",
    ]
    lines += [f"- **{v}** — {LEGEND[v]}" for v in LEGEND]
    lines += [f"- *{t}* — {TAGS[t]}" for t in TAGS]
    lines += [
        "",
        f"**δ** — the smallest effect of interest, half the paper's effect. {DELTA_ASSUMES} "
        f"**δ scaled** — {FRACTION:g} × the paper's effect × our baseline ÷ the paper's baseline (RSUM claims "
        "with a paper effect: the comparator arm's RSUM, `reproduce/spec/baselines.py`; — elsewhere, the "
        "`delta_scaled_note` column of `claims.csv` says why); beside it the verdict under that δ, and the verdict "
        "is flagged *δ-sensitive* where it differs. The declared δ stays the verdict. "
        "**Power** — the chance that the row's "
        f"interval lies above 0 if the paper's effect were true, at the row's measured seed sd and test-set "
        f"variance; beside it the seeds that would give {POWER:.0%} (cap {SEED_CAP}; `power.md`). "
        "**Stability** — share of bootstrap resamples (seeds and test queries together) with the same verdict; "
        f"*fragile* below {STABLE:.0%}. A reproduced effect more than {LARGER_THAN_PAPER:g}× the paper's is "
        "flagged *larger than the paper — check the baseline*. Formulas in `reproduce/protocol/ledger.py`.",
    ]
    return "\n".join(lines) + "\n"


NO_HEALTH = (
    "**Training health was not evaluated for this ledger** (no collapse information reached it): "
    "a verdict whose arm collapsed reads as a method effect here, without its failure rate and its verdict "
    "without the failed seeds — read such rows as provisional."
)


def markdown(df: pd.DataFrame, health_known: bool = True) -> str:
    stale = stale_sentence(df)
    out = [
        "# Claims ledger",
        "",
        "One primary row decides a claim per data set; every column and the unadjusted values are in "
        "`claims.csv`. Legend at the end.",
        *([] if health_known else ["", NO_HEALTH]),
        *(["", stale] if stale else []),
        "",
        "## Primary rows",
        "",
        "| id | claim | data | metric (unit; direction) | our effect [simultaneous interval] | paper's effect | "
        "δ | δ scaled to our baseline → verdict | ratio | power at the paper's effect | stability | verdict | "
        "at the papers' size (GRU-1024) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in df[df["role"] == "primary"].to_dict("records"):
        pe = (
            f"{fmt_num(r['paper_effect'])} ({_cell(r['paper_source']).split(',')[0]})"
            if np.isfinite(as_float(r["paper_effect"]))
            else "— (no number in the paper's text)"
        )
        out.append(
            f"| {r['id']} | {_cell(r['statement'])} | {r['dataset']} | {_cell(r['metric'])} "
            f"({_cell(r['unit'])}; {_cell(r['direction'])}) | {_cell(effect_cell(r))} | {pe} | {fmt_num(r['delta'])} | "
            f"{scaled_delta_cell(r)} | {fmt_num(r['ratio'], 2) if np.isfinite(as_float(r['ratio'])) else '—'} | "
            f"{power_cell(r)} | "
            f"{stability_cell(r)} | {verdict_cell(r)} | {_cell(r.get('papers_size')) or '—'} |"
        )
    for role in ("secondary", "exploratory"):
        sub = df[df["role"] == role]
        if not len(sub):
            continue
        out += [
            "",
            f"## {role.capitalize()} rows",
            "",
            "| id | statement | data | metric | arms | effect [95% interval] | verdict |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in sub.to_dict("records"):
            out.append(
                f"| {r['id']} | {_cell(r['statement'])} | {r['dataset'] or '—'} | {_cell(r['metric'])} | "
                f"{_cell(r['arms'])} | {_cell(effect_cell(r))} | {r['verdict']} |"
            )
    return "\n".join(out) + "\n\n" + legend_markdown()


def primary_table(df: pd.DataFrame) -> pd.DataFrame:
    """One line per claim id: the primary row's verdict (and effect) per data set; a stale row
    (:func:`is_stale`) shows neither its effect nor its verdict, only that it awaits a current run."""
    prim = df[df["role"] == "primary"]
    datasets = list(dict.fromkeys(prim["dataset"]))
    rows = []
    for cid, c in registry.CLAIMS.items():
        line = {"id": cid, "paper": c.paper, "claim": c.primary.statement, "papers_size": ""}
        for d in datasets:
            r = prim[(prim["id"] == cid) & (prim["dataset"] == d)]
            stale = bool(len(r)) and is_stale(r.iloc[0].to_dict())
            line[d] = STALE if stale else r["verdict"].iloc[0] if len(r) else "not tested"
            line[f"{d}_effect"] = "—" if stale else effect_cell(r.iloc[0].to_dict()) if len(r) else "—"
            line[f"{d}_ratio"] = as_float(r["ratio"].iloc[0]) if len(r) and "ratio" in r and not stale else math.nan
            line[f"{d}_cell"] = (
                STALE_CELL if stale else verdict_cell(r.iloc[0].to_dict()) if len(r) else "**not tested**"
            )
            if len(r) and d == scale.SCALE_DATA and isinstance(r.iloc[0].get("papers_size"), str):
                line["papers_size"] = r.iloc[0]["papers_size"]
        rows.append(line)
    return pd.DataFrame(rows)


def summary_markdown(df: pd.DataFrame) -> str:
    """The README table: primary rows only, one line per claim, with the tally per data set (stale rows
    counted apart, :func:`primary_table`)."""
    t = primary_table(df)
    datasets = [c for c in t.columns if c not in ("id", "paper", "claim") and "_" not in c]
    scaled = bool(t["papers_size"].astype(bool).any()) if len(t) else False
    head = (
        "| id | paper | primary contrast | "
        + " | ".join(f"{d}: effect [interval] → verdict | {d}: ratio to paper" for d in datasets)
        + (f" | {scale.SCALE_DATA} at the papers' size (GRU-1024)" if scaled else "")
        + " |"
    )
    rows = [head, "|" + "---|" * (3 + 2 * len(datasets) + scaled)]
    for r in t.to_dict("records"):
        rows.append(
            f"| {r['id']} | {r['paper']} | {_cell(r['claim'])} | "
            + " | ".join(
                (r[d + "_cell"] if r[d] == STALE else f"{_cell(r[d + '_effect'])} → {r[d + '_cell']}")
                + " | "
                + (fmt_num(r[d + "_ratio"], 2) if np.isfinite(r[d + "_ratio"]) else "—")
                for d in datasets
            )
            + (f" | {_cell(r['papers_size'].removeprefix(PAPERS_SIZE)) or '—'}" if scaled else "")
            + " |"
        )
    tallies = []
    t = t[~t["id"].isin(set(df.loc[check_rows(df), "id"]))]
    for d in datasets:
        n = t[d].value_counts()
        tallies.append(
            f"{d}: " + ", ".join(f"{n.get(v, 0)} {v}" for v in (*LEGEND, STALE) if v in LEGEND or n.get(v, 0))
        )
    checks = ", ".join(dict.fromkeys(df.loc[check_rows(df), "id"]))
    also = f" (device and identity checks {checks}: one measurement each, not counted)" if checks else ""
    return "\n".join(rows) + "\n\nPrimary rows" + also + " — " + "; ".join(tallies) + ".\n"


SUMMARY_CATEGORIES = (
    "reproduced",
    "reversed",
    "ruled out",
    "inconclusive (underpowered)",
    "inconclusive",
    "not testable",
    STALE,
)


DEVICE_CHECKS = {"B7": "a timing of the loss on this machine, not of either data set"}  # one measurement each


def check_rows(df: pd.DataFrame) -> pd.Series:
    """Boolean Series: the primary rows that are device or identity checks (:data:`DEVICE_CHECKS`, identity claims):
    one measurement, listed under every data set, counted once in the README's summary (:func:`checks_line`)."""
    if not len(df):
        return pd.Series(False, index=df.index)
    kind = df["kind"] if "kind" in df else pd.Series("", index=df.index)
    return (df["role"] == "primary") & (df["id"].isin(list(DEVICE_CHECKS)) | kind.eq("identity"))


def checks_line(df: pd.DataFrame) -> str:
    """The summary's line on the device and identity checks: each once, with its verdict(s) over the data sets."""
    rows = df[check_rows(df)]
    if not len(rows):
        return ""
    parts = []
    for cid, g in rows.groupby("id", sort=False):
        what = DEVICE_CHECKS.get(cid, "an identity, exact up to floating point")
        verdicts = " / ".join(dict.fromkeys(STALE if is_stale(r) else r["verdict"] for r in g.to_dict("records")))
        parts.append(f"{cid} {verdicts} ({what})")
    return (
        f"- **device and identity checks** ({len(parts)}, one measurement each, shown under every data set but "
        "counted once and not above): " + "; ".join(parts)
    )


def summary_counts(df: pd.DataFrame) -> pd.DataFrame:
    """Primary rows per data set (rows) and category (columns, :data:`SUMMARY_CATEGORIES`): the verdicts,
    with ``inconclusive`` split into *underpowered* (the underpowered flag) and the rest; a stale row
    (:func:`is_stale`) counts as *stale*, whatever its earlier verdict."""
    prim = df[df["role"] == "primary"]
    under = prim["underpowered"].map(_flag).eq(True) if "underpowered" in prim else False
    cat = prim["verdict"].where(~((prim["verdict"] == "inconclusive") & under), SUMMARY_CATEGORIES[3])
    cat = cat.where(~_stale_mask(prim), STALE)
    t = pd.crosstab(prim["dataset"], cat).reindex(columns=list(SUMMARY_CATEGORIES), fill_value=0)
    return t.reindex(list(dict.fromkeys(prim["dataset"]))).fillna(0).astype(int)


def caveat(df: pd.DataFrame) -> str:
    """The one caveat sentence of the plain summary, chosen by a stated rule: of three shares over the
    primary rows of all data sets — (a) reproduced rows flagged *larger than the paper*, among reproduced
    rows; (b) *fragile* rows, among decided rows (reproduced, reversed, ruled out); (c) *underpowered* rows
    (below 80% power at the paper's effect), among the primary rows with a paper effect — the largest one
    (ties in the order a, b, c) is stated, stale rows (:func:`is_stale`) left out. Empty when all three are 0."""
    prim = df[df["role"] == "primary"]
    prim = prim[~_stale_mask(prim)]
    flag = {
        c: (prim[c].map(_flag).eq(True) if c in prim else pd.Series(False, index=prim.index))
        for c in ("larger_than_paper", "fragile", "underpowered")
    }
    planned = prim["power"].map(as_float).map(np.isfinite) if "power" in prim else pd.Series(False, index=prim.index)
    rep = prim["verdict"] == "reproduced"
    decided = prim["verdict"].isin(["reproduced", "reversed", "ruled out"])
    cands = [
        (
            int((rep & flag["larger_than_paper"]).sum()),
            int(rep.sum()),
            f"reproduced effects are more than {LARGER_THAN_PAPER:g}× the paper's (check the baseline "
            "before reading them as the method's gain)",
        ),
        (
            int((decided & flag["fragile"]).sum()),
            int(decided.sum()),
            f"decided verdicts are fragile (the same verdict in fewer than {STABLE:.0%} of bootstrap resamples)",
        ),
        (
            int(flag["underpowered"].sum()),
            int(planned.sum()),
            f"primary rows with a paper effect had less than {POWER:.0%} power to reproduce it with their seeds "
            "(`power.md` gives the seeds each would need)",
        ),
    ]
    k, n, text = max(cands, key=lambda c: c[0] / c[1] if c[1] else 0.0)
    if not n or not k:
        return ""
    return f"Caveat: {k} of {n} {text}."


def plain_summary(df: pd.DataFrame) -> str:
    """The README's plain summary: per data set, how many primary rows are reproduced / reversed / ruled out /
    inconclusive and underpowered / inconclusive (not testable and stale rows when there are any), then the
    :func:`caveat` sentence and the rule that chose it. Empty without primary rows."""
    if not len(df) or not (df["role"] == "primary").any():
        return ""
    checks = check_rows(df)
    counts = summary_counts(df[~checks])
    lines = [
        f"- **{d}** ({int(row.sum())} claims{' besides the checks' if checks.any() else ''}): "
        + ", ".join(f"{int(row[c])} {c}" for i, c in enumerate(SUMMARY_CATEGORIES) if i < 5 or row[c])
        for d, row in counts.iterrows()
    ]
    lines += [line for line in (checks_line(df),) if line]
    delta = delta_sentence(df)
    if delta:
        lines += ["", delta]
    cav = caveat(df)
    rule = (
        " _(The caveat is the largest of three shares: reproduced effects more than "
        f"{LARGER_THAN_PAPER:g}× the paper's, fragile decided verdicts, underpowered rows — "
        "`reproduce.present.ledger_render.caveat`.)_"
    )
    return "**In short.**\n\n" + "\n".join(lines) + ("\n\n" + cav + rule if cav else "") + "\n"


def check_notebook_summary(summary: pd.DataFrame, ledger: pd.DataFrame) -> list[str]:
    """Disagreements between a notebook's per-claim summary (columns ``id``, ``dataset``, ``verdict``)
    and the ledger's primary rows; empty when they agree. Every claim the summary names must be
    in the ledger with the same verdict."""
    prim = ledger[ledger["role"] == "primary"].set_index(["id", "dataset"])["verdict"]
    bad = []
    for r in summary.to_dict("records"):
        key = (r["id"], r["dataset"])
        if key not in prim.index:
            bad.append(f"{key[0]} on {key[1]}: in the notebook's summary but not a primary row of claims.csv")
        elif prim[key] != r["verdict"]:
            bad.append(f"{key[0]} on {key[1]}: notebook says {r['verdict']!r}, claims.csv says {prim[key]!r}")
    return bad


def assert_notebook_agrees(summary: pd.DataFrame, ledger: pd.DataFrame) -> None:
    """Raise when :func:`check_notebook_summary` finds a disagreement (for notebooks and tests)."""
    bad = check_notebook_summary(summary, ledger)
    if bad:
        raise AssertionError("the notebook disagrees with results/claims.csv:\n  " + "\n  ".join(bad))


def _readme_stale_sentence(df: pd.DataFrame) -> str:
    """The README's line on stale primary rows (empty when there are none): how many, and where their numbers are."""
    n, n_prim = _stale_counts(df)
    if not n:
        return ""
    return (
        f"**{n} of {n_prim} primary rows await a run with the current inputs**: they show *stale* below, "
        "without a verdict; [results/claims.md](results/claims.md) keeps the earlier run's numbers."
    )
