"""Reading and writing the claims ledger, the README table and the results manifest.

Each notebook writes its claims to ``<results>/<paper>/claims[_<data>].csv`` with
:func:`write_claims`; :func:`collect` gathers them into ``<results>/claims.csv`` and ``.md``
and lists every claim id of ``claims.md`` — a claim no notebook has tested yet is listed as
``inconclusive`` with a note saying it was not tested in that run, never silently dropped.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import re
from pathlib import Path

import pandas as pd

from coherent_itr.io import atomic_write_json, atomic_write_text
from coherent_itr.runs import source_hash

from .ledger import LEDGER_COLUMNS, ClaimResult

ROOT = Path(__file__).resolve().parent.parent
CLAIM_IDS = {
    "BCLS": [f"B{i}" for i in range(1, 10)],
    "Ladder": [f"L{i}" for i in range(1, 7)],
    "SAM": [f"S{i}" for i in range(1, 6)],
    "Listwise": [f"N{i}" for i in range(1, 8)],
    "Unified": [f"U{i}" for i in range(1, 7)],
    "Across papers": ["X1", "X2", "X3"],
}
BEGIN, END = "<!-- claims-ledger:begin -->", "<!-- claims-ledger:end -->"


def write_claims(claims: list[ClaimResult], results_dir: str | os.PathLike, paper: str, data: str) -> pd.DataFrame:
    """Write a notebook's claim rows (verdicts by the rule in :mod:`.ledger`) and return them."""
    df = pd.DataFrame([c.row() for c in claims], columns=LEDGER_COLUMNS)
    out = Path(results_dir) / paper / f"claims_{data}.csv"
    atomic_write_text(out, df.to_csv(index=False))
    return df


def claim_files(results_dir: Path) -> list[Path]:
    """The notebooks' claim files of one profile: ``<results>/<paper>/claims_*.csv`` (synthetic) and
    ``<results>/flickr8k/<paper>/claims_*.csv`` — never those of another profile's results folder
    nested inside it (``results/smoke/`` lives under ``results/``)."""
    return sorted([*results_dir.glob("*/claims_*.csv"), *(results_dir / "flickr8k").glob("*/claims_*.csv")])


def collect(results_dir: str | os.PathLike, stale: dict | None = None) -> pd.DataFrame:
    """Gather every notebook's claims (all data sets) into ``claims.csv`` / ``claims.md``.

    ``stale``: {claim file: reason} of files no current execution wrote (see
    :func:`reproduce.notebooks.stale_claims`); their rows keep their verdicts but their note starts
    with ``STALE (<reason>)``."""
    results_dir = Path(results_dir)
    stale = {Path(k).resolve(): v for k, v in (stale or {}).items()}

    def read(p: Path) -> pd.DataFrame:
        df = pd.read_csv(p)
        if p.resolve() in stale:
            df["note"] = [f"STALE ({stale[p.resolve()]})" + (f"; {n}" if isinstance(n, str) else "")
                          for n in df.get("note", [None] * len(df))]
        return df

    parts = [read(p) for p in claim_files(results_dir)]
    df = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=LEDGER_COLUMNS)
    tested = set(df["id"]) if len(df) else set()
    missing = [{"id": cid, "paper": paper, "verdict": "inconclusive", "kind": "", "n_seeds": 0,
                "note": "not tested in this run: its notebook was not executed for this profile and data"}
               for paper, ids in CLAIM_IDS.items() for cid in ids if cid not in tested]
    if missing:
        df = pd.concat([df, pd.DataFrame(missing)], ignore_index=True)
    order = {cid: i for i, cid in enumerate(c for ids in CLAIM_IDS.values() for c in ids)}
    df = df.assign(_o=df["id"].map(order)).sort_values(["_o", "dataset"], na_position="last").drop(columns="_o")
    df = df.reindex(columns=LEDGER_COLUMNS)
    atomic_write_text(results_dir / "claims.csv", df.to_csv(index=False))
    atomic_write_text(results_dir / "claims.md", markdown(df))
    return df


def _fmt(x, digits=2):
    try:
        return "" if pd.isna(x) else f"{float(x):.{digits}f}"
    except (TypeError, ValueError):
        return str(x)


def markdown(df: pd.DataFrame) -> str:
    rows = ["| id | paper | claim | data | effect [95% CI] | seeds | verdict |", "|---|---|---|---|---|---|---|"]
    for r in df.itertuples(index=False):
        eff = "" if pd.isna(r.effect) else f"{_fmt(r.effect)} [{_fmt(r.ci_low)}, {_fmt(r.ci_high)}]"
        stmt = r.statement if isinstance(r.statement, str) else (r.note if isinstance(r.note, str) else "")
        data = r.dataset if isinstance(r.dataset, str) else ""
        rows.append(f"| {r.id} | {r.paper} | {stmt} | {data} | {eff} | {int(r.n_seeds or 0)} | {r.verdict} |")
    return "\n".join(rows) + "\n"


def claim_verdict(verdicts) -> str:
    """One word for a claim tested by several rows (each with its verdict by the rule in
    :mod:`.ledger`): ``reproduced`` if every row is, ``not reproduced`` if every decided row is
    not and at least one is, ``inconclusive`` if no row is decided, else ``mixed``."""
    v = list(verdicts)
    decided = [x for x in v if x != "inconclusive"]
    if not decided:
        return "inconclusive"
    if all(x == "reproduced" for x in v):
        return "reproduced"
    if all(x == "not reproduced" for x in decided):
        return "not reproduced"
    return "mixed"


def summary_markdown(df: pd.DataFrame) -> str:
    """One line per claim id: its verdict per data set with the tally of its rows
    (R reproduced / N not reproduced / I inconclusive); every row is in ``claims.md``."""
    datasets = sorted({d for d in df["dataset"].dropna()}) if len(df) else []
    head = "| id | paper | claim (first row's statement) | " + " | ".join(datasets or ["data"]) + " |"
    rows = [head, "|" + "---|" * (3 + max(1, len(datasets)))]
    for cid in (c for ids in CLAIM_IDS.values() for c in ids):
        sub = df[df["id"] == cid]
        if not len(sub):
            continue
        tested = sub[sub["dataset"].notna()]
        stmt = tested["statement"].iloc[0] if len(tested) else sub["note"].iloc[0]
        cells = []
        for d in datasets or [None]:
            part = tested[tested["dataset"] == d] if d else tested
            if not len(part):
                cells.append("not tested")
                continue
            n = part["verdict"].value_counts()
            tally = f"R{n.get('reproduced', 0)}/N{n.get('not reproduced', 0)}/I{n.get('inconclusive', 0)}"
            cells.append(f"**{claim_verdict(part['verdict'])}** ({tally})")
        rows.append(f"| {cid} | {sub['paper'].iloc[0]} | {stmt} | " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def update_readme(df: pd.DataFrame, profile: str, readme: Path = ROOT / "README.md") -> None:
    """Replace the summary table between the ledger markers of README.md."""
    text = readme.read_text()
    if BEGIN not in text or END not in text:
        return
    date = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d")
    datasets = sorted({d for d in df["dataset"].dropna()}) if len(df) else []
    block = (f"{BEGIN}\n_Profile `{profile}`, data {', '.join(datasets) or 'none'}, generated {date} by "
             f"`make reproduce` (library source hash {source_hash()}). One line per claim; a claim is tested "
             f"by one or more rows (effect with a Student-t 95% interval over seeds, verdict by the rule in "
             f"`reproduce/ledger.py`), all of them in [results/claims.md](results/claims.md). R/N/I = rows "
             f"reproduced / not reproduced / inconclusive._\n\n"
             + summary_markdown(df) + END)
    text = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: block, text, flags=re.S)
    atomic_write_text(readme, text)


def write_manifest(results_dir: str | os.PathLike, profile: str, datasets: list[str], runtime_s: float,
                   timings: dict | None = None, n_workers: int | None = None, runs_trained: int = 0,
                   failures: dict | None = None) -> None:
    """``results/manifest.json``: what produced the results (source hash, profile, data, machine) and
    how long each phase of this invocation took (seconds; cached runs cost nothing).

    ``last_training_invocation`` keeps the timing of the latest invocation that trained runs (this
    one, or carried over from the previous manifest when the source hash and profile are the same),
    so a rerun that only re-executes notebooks does not erase what the training cost.

    ``failures``: what failed or is stale in this invocation (``runs``, ``notebooks``, ``stale_claims``)."""
    import torch
    path = Path(results_dir) / "manifest.json"
    man = {
        "library_source_hash": source_hash(),
        "profile": profile,
        "data": datasets,
        "runtime_s": round(runtime_s, 1),
        "phases_s": {k: round(v, 1) for k, v in (timings or {}).items()},
        "runs_trained": runs_trained,
        "failures": failures or {},
        "workers": n_workers,
        "finished_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version(),
                    "torch": torch.__version__, "cuda": torch.cuda.is_available()},
    }
    last = None
    if runs_trained > 0:
        last = {k: man[k] for k in ("runtime_s", "phases_s", "runs_trained", "workers", "finished_utc", "machine")}
    elif path.exists():
        try:
            old = json.loads(path.read_text())
        except (OSError, ValueError):
            old = {}
        if old.get("library_source_hash") == man["library_source_hash"] and old.get("profile") == profile:
            last = old.get("last_training_invocation")
    if last is not None:
        man["last_training_invocation"] = last
    atomic_write_json(path, man)
