"""The claims ledger's files: :func:`collect` reads the notebooks' claim files and writes ``claims.csv``,
``claims.md`` and ``power.md``; :func:`update_readme` writes the README's ledger block; :func:`write_manifest` the
results manifest. ``python -m reproduce.driver.ledger_files`` re-decides the ledger from the claim files alone.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import io
import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import torch

from coherent_itr.io import atomic_write_json, atomic_write_text
from coherent_itr import paths
from coherent_itr.runs.migrations import upgrade_machine_1
from coherent_itr.runs import RUNS_FROM_ENV, RunCache, cpu_identity, load_machine, source_hash

from reproduce.protocol.ledger import (
    RULE,
)
from reproduce.spec import claims as registry
from reproduce.spec.baselines import baselines
from reproduce.spec.paths import ROOT
from reproduce.spec.profiles import get_profile
from reproduce.spec.tables import smoke_banner
from reproduce.protocol import claim_rows, ledger_compare, scale
from reproduce.protocol.claim_files import _read_notebook_rows
from reproduce.protocol.ledger_rows import build_ledger
from reproduce.protocol.study import Study
from reproduce.present.ledger_power import power_markdown
from reproduce.present.ledger_render import (
    NO_HEALTH,
    STALE,
    _flag,
    _readme_stale_sentence,
    markdown,
    papers_size_column,
    plain_summary,
    summary_counts,
    summary_markdown,
)


BEGIN, END = "<!-- claims-ledger:begin -->", "<!-- claims-ledger:end -->"


def collect(results_dir: str | os.PathLike, collapsed: dict | None = None, stale: dict | None = None) -> pd.DataFrame:
    """Gather every notebook's claim rows into ``claims.csv`` / ``claims.md`` (and ``power.md``) under the one rule.

    Exactly one primary row per claim id and data set (a placeholder ``inconclusive`` row says why
    when no notebook row is the registry's primary contrast). ``stale``: {claim file: reason} of files
    no current execution wrote; their rows are marked ``STALE`` in the note column."""
    results_dir = Path(results_dir)
    rows = _read_notebook_rows(results_dir, stale)
    seen = {r.get("dataset") for r in rows if isinstance(r.get("dataset"), str)}
    df = build_ledger(rows, collapsed=collapsed, baselines=baselines(results_dir, [*registry.DATASETS, *sorted(seen)]))
    # the main comparison's rows again at the papers' size, from the paper profile's own ledger (not its own)
    own = results_dir.resolve() == scale.paper_ledger_path().parent.resolve()
    df["papers_size"] = papers_size_column(df, None if own else scale.read_paper_ledger())
    health_known = collapsed is not None or any("collapsed" in r or "failed_seeds" in r for r in rows)
    df["health_evaluated"] = health_known
    atomic_write_text(results_dir / "claims.csv", df.to_csv(index=False))
    banner = smoke_banner(results_dir)
    atomic_write_text(results_dir / "claims.md", banner + markdown(df, health_known=health_known))
    atomic_write_text(results_dir / "power.md", banner + power_markdown(df))
    return df


def update_readme(
    df: pd.DataFrame, profile: str, readme: Path = ROOT / "README.md", by: str = "`make reproduce`"
) -> int:
    """Replace the summary table between the ledger markers of README.md (primary rows only; stale rows
    without their earlier verdicts, :func:`primary_table`); ``by``: what generated it. Returns how many stale
    primary rows it shows (0 without the markers)."""
    text = readme.read_text()
    if BEGIN not in text or END not in text:
        return 0
    date = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d")
    datasets = list(dict.fromkeys(df.loc[df["role"] == "primary", "dataset"])) if len(df) else []
    block = (
        f"{BEGIN}\n"
        + plain_summary(df)
        + "\n"
        + (f"{stale}\n\n" if (stale := _readme_stale_sentence(df)) else "")
        + f"_Profile `{profile}`, data {', '.join(datasets) or 'none'}, generated {date} by "
        f"{by} (library source hash {source_hash()}). One line per claim: its ONE primary row per "
        f"data set (declared in `reproduce/data/claims.toml`), our effect with its simultaneous interval and the "
        f"verdict by the rule in `reproduce/protocol/ledger.py` ({RULE.rstrip('.')}), and the ratio of our effect to "
        f"the paper's. Secondary rows, the papers' effects, power, stability and "
        f"the legend are in [results/claims.md](results/claims.md)._\n\n"
        + ("" if "health_evaluated" not in df or df["health_evaluated"].astype(bool).all() else NO_HEALTH + "\n\n")
        + summary_markdown(df)
        + END
    )
    text = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: block, text, flags=re.S)
    atomic_write_text(readme, text)
    return int(summary_counts(df)[STALE].sum()) if len(df) else 0


def runs_machine() -> dict:
    """The machine whose runs this invocation read: ``{"id", "numerics"}`` of the one ``$COHERENT_ITR_RUNS_FROM``
    names (``--runs-from``; a machine recorded in format 1 read as format 2: its CPU named), else ``{"id": "this
    machine"}``."""
    name = os.environ.get(RUNS_FROM_ENV)
    if not name:
        return {"id": "this machine"}
    numerics = upgrade_machine_1(load_machine(paths.cache_dir(create=False), name))
    return {"id": name, "numerics": numerics}


def collapsed_arms(profiles, papers=None) -> dict:
    """``{(data set, arm): reason}`` of the primary contrasts' collapsed arms (cached runs only) under ``profiles``
    (one resolved :class:`~reproduce.spec.profiles.Profile` per data set run), for the ledger's ``not testable``
    verdicts (``coherent_itr.health.is_collapsed``)."""
    out: dict = {}
    for prof in profiles:
        study = Study(prof, prof.data, cache=RunCache(), progress=False)
        out.update(claim_rows.collapsed_arms(study, papers=papers))
    return out


def committed_ledger(path: Path) -> pd.DataFrame | None:
    """The ledger ``path`` (``results/claims.csv``) as committed at the checkout's ``HEAD`` (``git show``), else as
    found before this invocation rewrites it; ``None`` if there is neither."""
    try:
        rel = Path(path).resolve().relative_to(ROOT)
        text = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"HEAD:{rel}"], capture_output=True, text=True, check=True, timeout=30
        ).stdout
        return pd.read_csv(io.StringIO(text))
    except (ValueError, OSError, subprocess.SubprocessError, pd.errors.ParserError):
        pass
    try:
        return pd.read_csv(path)
    except (OSError, ValueError):
        return None


def compare_ledgers(before: pd.DataFrame | None, after_path: Path) -> dict | None:
    """Print how the rebuilt ledger at ``after_path`` differs from ``before`` (:func:`committed_ledger`): verdicts,
    and the largest effect change of each unit; returns it for the manifest (``None`` without a ledger before)."""
    if before is None:
        return None
    change = ledger_compare.compare(before, pd.read_csv(after_path))
    for line in ledger_compare.summary_lines(change, "the committed ledger (results/claims.csv at HEAD)"):
        print(f"reproduce: {line}", flush=True)
    return change.as_dict()


def write_manifest(
    results_dir: str | os.PathLike,
    profile: str,
    datasets: list[str],
    runtime_s: float,
    timings: dict | None = None,
    n_workers: int | None = None,
    runs_trained: int = 0,
    failures: dict | None = None,
    runs_evaluated: int = 0,
    by_data: dict | None = None,
    estimate: dict | None = None,
    ledger_change: dict | None = None,
) -> None:
    """``results/manifest.json``: what produced the results (source hash, profile, data, machine) and
    how long each phase of this invocation took (seconds; cached runs cost nothing).

    ``last_training_invocation`` keeps the timing of the latest invocation that trained runs (this
    one, or carried over from the previous manifest when the source hash and profile are the same),
    so a rerun that only re-executes notebooks does not erase what the training cost.

    ``by_data``: per data set of this invocation, ``{"runs_trained": n, "runs_evaluated": m}`` (evaluated:
    a test evaluation computed here, for a run trained here or one trained before). ``last_training_by_data``
    keeps, per data set, the counts and phase times (``<data>_*`` of ``timings``) of the latest invocation
    that trained runs of that data set, carried over like ``last_training_invocation``: a study trained one
    data set at a time still shows what each cost.

    ``failures``: what failed or is stale in this invocation (``runs``, ``notebooks``, ``stale_claims``).
    ``estimate``: the plan's estimated against its actual wall time (``reproduce.protocol.progress.finish``).
    ``ledger_change``: the rebuilt ledger against the committed one (``reproduce.protocol.ledger_compare``).

    ``machine`` is the machine of this invocation, which computed the analyses (caption embeddings, relevance,
    image features); ``runs_machine`` the machine whose runs it read: an imported one (``--runs-from``, its
    numerics as its archive recorded them) or this one."""
    path = Path(results_dir) / "manifest.json"
    man = {
        "library_source_hash": source_hash(),
        "profile": profile,
        "data": datasets,
        "runtime_s": round(runtime_s, 1),
        "phases_s": {k: round(v, 1) for k, v in (timings or {}).items()},
        "runs_trained": runs_trained,
        "runs_evaluated": runs_evaluated,
        "failures": failures or {},
        **({"estimate": estimate} if estimate else {}),
        **({"ledger_vs_committed": ledger_change} if ledger_change else {}),
        "workers": n_workers,
        "finished_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {
            "platform": platform.platform(),
            "cpu": cpu_identity(),  # vendor and kernel instruction set: a CPU run's numbers depend on them
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "cuda": torch.cuda.is_available(),
        },
        "runs_machine": runs_machine(),
    }
    old = {}
    if path.exists():
        try:
            old = json.loads(path.read_text())
        except (OSError, ValueError):
            old = {}
    same = old.get("library_source_hash") == man["library_source_hash"] and old.get("profile") == profile
    last = None
    if runs_trained > 0:
        last = {
            k: man[k]
            for k in ("runtime_s", "phases_s", "runs_trained", "runs_evaluated", "workers", "finished_utc", "machine")
        }
    elif same:
        last = old.get("last_training_invocation")
    if last is not None:
        man["last_training_invocation"] = last
    per_data = dict(old.get("last_training_by_data") or {}) if same else {}
    for d, counts in (by_data or {}).items():
        if counts.get("runs_trained", 0) > 0:
            per_data[d] = {
                **counts,
                "phases_s": {k: v for k, v in man["phases_s"].items() if k.startswith(f"{d}_")},
                "workers": n_workers,
                "finished_utc": man["finished_utc"],
            }
    if per_data:
        man["last_training_by_data"] = dict(sorted(per_data.items()))
    atomic_write_json(path, man)


REDECIDED_BY = "`python -m reproduce.driver.ledger_files`, from the claim files of the notebooks' last executions"


def previous_health(claims_csv: Path) -> dict | None:
    """The collapse information a re-decision can reuse from the ledger it replaces: ``{}`` when that ledger
    evaluated training health and found no collapsed arm (no ``not testable`` row), None when it did not
    evaluate it (or there is none). A ledger with ``not testable`` rows is refused: their reasons are
    the run cache's, so only ``make reproduce`` can redo them."""
    if not claims_csv.exists():
        return None
    old = pd.read_csv(claims_csv)
    if "health_evaluated" not in old or not old["health_evaluated"].map(_flag).eq(True).all():
        return None
    if old["verdict"].eq("not testable").any():
        raise ValueError(
            f"{claims_csv}: has 'not testable' rows whose collapsed arms only the run cache knows; "
            "re-decide it with `make reproduce` (which reads the cache), not from the claim files alone"
        )
    return {}


def main(argv=None) -> int:
    """Re-decide the ledger (``claims.csv``, ``claims.md``, ``power.md``) and the README's ledger block from
    the claim files on disk under the current rule: nothing is trained or executed, the effects and
    intervals are the notebooks' last ones, and the README says so."""
    ap = argparse.ArgumentParser(prog="python -m reproduce.driver.ledger_files", description=main.__doc__)
    ap.add_argument("--profile", default="default", help="whose results folder (default: %(default)s)")
    name = ap.parse_args(argv).profile
    base = ROOT / get_profile(name).results_dir
    try:
        collapsed = previous_health(base / "claims.csv")
    except ValueError as e:
        print(f"{ap.prog}: error: {e}", file=sys.stderr)
        return 2
    table = collect(base, collapsed=collapsed)
    if name != "smoke":
        update_readme(table, name, by=REDECIDED_BY)
    print(summary_counts(table).to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
