"""Do the runs of this machine's cache repeat the committed tuning numbers? (Reads the cache; trains nothing.)

For every main arm × grid setting of the profile's tuning on ``--data`` whose rung (or full tuning run) is in the run
cache, the validation RSUM at the rung and, where its full tuning run is cached too, at the selected epoch, against
the committed tuning tables (``results/<paper>/tuning_<data>.csv``; Flickr8k under ``results/flickr8k/``), which a
run of one key gave where it trained. Equal numbers say the run repeated bit for bit (its RSUM is a sum of recalls
over 1,000 or more queries: a different run almost never matches exactly); different ones say something that
determines a run is outside its key — the CPU (a run's key names it since 2026-11-27, ``coherent_itr.runs.
cpu_identity``), or its input data. Also: for each arm whose rungs are all cached, whether the same settings go on
past the rung (``reproduce.protocol.tuning.survivors``).

    python benchmarks/bench_retrain_committed.py --data flickr8k [--profile default]

And for every arm whose every final run is trained and evaluated in the cache: the mean test RSUM of its seeds here
against the committed tables (:func:`final_arms`).

Writes ``results/benchmarks/retrain_vs_committed_<data>.md``, ``.csv`` and ``_final_arms.csv``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OUT = ROOT / "results" / "benchmarks"


def committed_table(data: str, paper: str) -> pd.DataFrame:
    folder = ROOT / "results" / ("flickr8k/" if data == "flickr8k" else "") / paper
    return pd.read_csv(folder / f"tuning_{data}.csv")


def compare(data: str, profile_name: str = "default", cache_root=None) -> tuple[pd.DataFrame, dict]:
    """(one row per arm × setting found in both, a summary)."""
    from coherent_itr.runs import RunCache
    from reproduce.protocol import tuning
    from reproduce.protocol.trials import load_record
    from reproduce.spec import experiments
    from reproduce.spec.profiles import profile_for

    prof, cache = profile_for(profile_name, data), RunCache(cache_root)
    rows, seen, same_survivors, arms_complete = [], set(), 0, 0
    for paper in experiments.PAPERS:
        old = committed_table(data, paper)
        for arm in tuning.main_arms(prof, paper):
            if arm.name in seen:  # an arm several papers share is tuned once
                continue
            seen.add(arm.name)
            trials, missing = tuning.rung_trials(arm, prof, cache)
            found = old[old.arm == arm.name]
            for t in trials:
                if t["status"] != "ok":
                    continue
                row = found[np.isclose(found.lr, t["lr"]) & (found.warmup_epochs == t["warmup_epochs"])]
                if len(row) != 1:
                    continue
                r = row.iloc[0]
                setting = (
                    {"lr": t["lr"], "warmup_epochs": t["warmup_epochs"]} if arm.honours_warmup else {"lr": t["lr"]}
                )
                full = load_record(cache, tuning._tuning_config(arm, prof, setting))
                ft = tuning.trial_from_record(full) if full is not None else None
                rows.append(
                    {
                        "paper": paper,
                        "arm": arm.name,
                        "lr": t["lr"],
                        "warmup_epochs": t["warmup_epochs"],
                        "rung_committed": float(r.rung_val_rsum),
                        "rung_here": t["val_rsum"],
                        "full_committed": float(r.val_rsum) if bool(r.went_on) else float("nan"),
                        "full_here": ft["val_rsum"] if ft else float("nan"),
                    }
                )
            if not missing and len(found):
                arms_complete += 1
                here = {(t["lr"], t["warmup_epochs"]) for t in tuning.survivors(trials, prof.tuning.keep)}
                committed = {(r.lr, r.warmup_epochs) for r in found.itertuples() if bool(r.went_on)}
                same_survivors += here == committed
    chosen = chosen_settings(prof, cache, data)
    cols = ["paper", "arm", "lr", "warmup_epochs", "rung_committed", "rung_here", "full_committed", "full_here"]
    df = pd.DataFrame(rows, columns=cols)
    d = (df.rung_here - df.rung_committed).abs()
    full = df.dropna(subset=["full_committed", "full_here"])
    summary = {
        "rungs": len(df),
        "rungs_equal": int((d == 0).sum()),
        "median_abs": float(d.median()) if len(d) else float("nan"),
        "p90_abs": float(d.quantile(0.9)) if len(d) else float("nan"),
        "max_abs": float(d.max()) if len(d) else float("nan"),
        "full_runs": len(full),
        "full_equal": int((full.full_here == full.full_committed).sum()),
        "arms_complete": arms_complete,
        "same_survivors": same_survivors,
        "chosen": chosen,
    }
    return df, summary


def chosen_settings(prof, cache, data: str) -> pd.DataFrame:
    """Per main arm whose tuning is complete in the cache: the setting chosen here and the committed one."""
    from reproduce.protocol import tuning
    from reproduce.spec import experiments

    rows, seen = [], set()
    for paper in experiments.PAPERS:
        try:
            here = tuning.tuning_table(prof, paper, cache)
        except tuning.TuningIncomplete:
            continue
        old = committed_table(data, paper)
        for arm in here.arm.unique():
            n, o = here[(here.arm == arm) & here.chosen], old[(old.arm == arm) & old.chosen]
            if arm in seen or len(n) != 1 or len(o) != 1:
                continue
            seen.add(arm)
            rows.append(
                {
                    "paper": paper,
                    "arm": arm,
                    "lr_here": float(n.lr.iloc[0]),
                    "warmup_here": int(n.warmup_epochs.iloc[0]),
                    "val_rsum_here": round(float(n.val_rsum.iloc[0]), 2),
                    "lr_committed": float(o.lr.iloc[0]),
                    "warmup_committed": int(o.warmup_epochs.iloc[0]),
                    "val_rsum_committed": round(float(o.val_rsum.iloc[0]), 2),
                }
            )
    out = pd.DataFrame(rows)
    if len(out):
        out["same"] = (out.lr_here == out.lr_committed) & (out.warmup_here == out.warmup_committed)
    return out


def committed_arm_rsum(data: str, paper: str, arm: str) -> tuple[float, float, float, str]:
    """(mean, sd, seeds, file) of ``arm``'s test RSUM in the paper's committed tables: the first of its CSVs
    (sorted by name) with a row for the arm (ours, where a table also holds the paper's rows) and a ``rsum``
    column; NaNs and "" when none has one."""
    folder = ROOT / "results" / ("flickr8k/" if data == "flickr8k" else "") / paper
    for f in sorted(folder.glob(f"*_{data}.csv")):
        t = pd.read_csv(f)
        if not {"arm", "rsum"} <= set(t.columns):
            continue
        row = t[t.arm == arm]
        if len(row) > 1:  # beside the paper's rows: ours are labelled "ours: …"
            row = row[row.apply(lambda r: any(str(v).startswith("ours") for v in r.values), axis=1)]
        if len(row) == 1 and pd.notna(row.rsum.iloc[0]):
            r = row.iloc[0]
            return float(r.rsum), float(r.get("rsum_std", np.nan)), float(r.get("n_seeds", np.nan)), f.name
    return np.nan, np.nan, np.nan, ""


def final_arms(profile_name: str, data: str, cache_root=None) -> pd.DataFrame:
    """Per arm (every paper) whose every final run is trained and evaluated in the cache: the seeds, the mean and
    sd of their test RSUM here, and the committed table's (:func:`committed_arm_rsum`); ``diff_over_se``: the
    difference over its standard error, sqrt(sd_here²/n_here + sd_committed²/n_committed). The arm's setting is
    the one its tuning chose on each machine (``lr_here``, ``warmup_here`` here; the committed ones are in the
    chosen-settings table for the main arms)."""
    from coherent_itr.runs import RunCache
    from reproduce.protocol.study import Study
    from reproduce.protocol.tuning import TuningIncomplete
    from reproduce.spec import experiments

    cache = RunCache(cache_root)
    study = Study(profile_name, data, cache=cache, progress=False)
    rows = []
    for paper in experiments.PAPERS:
        for arm in study.arms(paper):
            try:
                configs = study.configs(arm, train_missing=False)
            except TuningIncomplete:
                continue
            runs = [cache.load(c, evaluate=False) if cache.has(c) else None for c in configs]
            if not configs or any(r is None for r in runs):
                continue
            here = np.array([float(r.record["test"]["rsum"]) for r in runs])
            mean, sd, n, source = committed_arm_rsum(data, paper, arm.name)
            sd_here = float(here.std(ddof=1)) if len(here) > 1 else np.nan
            se = np.sqrt(sd_here**2 / len(here) + sd**2 / n) if len(here) > 1 and n > 1 else np.nan
            rows.append(
                {
                    "paper": paper,
                    "arm": arm.name,
                    "lr_here": configs[0].lr,
                    "warmup_here": configs[0].warmup_epochs,
                    "seeds_here": len(here),
                    "rsum_here": round(float(here.mean()), 2),
                    "sd_here": round(sd_here, 2),
                    "seeds_committed": n,
                    "rsum_committed": round(mean, 2),
                    "sd_committed": round(sd, 2),
                    "diff": round(float(here.mean()) - mean, 2),
                    "diff_over_se": round((float(here.mean()) - mean) / se, 1) if se > 0 else np.nan,
                    "committed_table": source,
                }
            )
    return pd.DataFrame(rows)


def readable_finals(finals: pd.DataFrame) -> pd.DataFrame:
    """:func:`final_arms` as a reader wants it: one line an arm, "mean ± sd (seeds)" for each machine."""

    def cell(mean, sd, n):
        if pd.isna(mean):
            return "–"
        return f"{mean:.1f}" + (f" ± {sd:.1f}" if pd.notna(sd) else "") + f" ({n:.0f})"

    return pd.DataFrame(
        {
            "paper": finals.paper,
            "arm": finals.arm,
            "setting here": [f"lr {r.lr_here:g}, warm-up {r.warmup_here}" for r in finals.itertuples()],
            "RSUM here": [cell(r.rsum_here, r.sd_here, r.seeds_here) for r in finals.itertuples()],
            "committed": [cell(r.rsum_committed, r.sd_committed, r.seeds_committed) for r in finals.itertuples()],
            "diff": ["–" if pd.isna(d) else f"{d:+.1f}" for d in finals["diff"]],
            "diff / se": ["–" if pd.isna(z) else f"{z:+.1f}" for z in finals.diff_over_se],
        }
    )


def readable(df: pd.DataFrame) -> pd.DataFrame:
    """The table as a reader wants it: RSUMs to 2 decimals (a recall sum over 1,000 queries has 2), the rung's
    difference beside them (the CSV keeps every digit)."""
    out = df.copy()
    out.insert(out.columns.get_loc("rung_here") + 1, "rung_diff", out.rung_here - out.rung_committed)
    return out.round({c: 2 for c in out.columns if c.startswith(("rung_", "full_"))})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="flickr8k", choices=["synthetic", "flickr8k"])
    ap.add_argument("--profile", default="default")
    args = ap.parse_args(argv)

    import platform

    from coherent_itr.runs import cpu_identity
    from reproduce.spec.tables import markdown_table

    df, s = compare(args.data, args.profile)
    finals = final_arms(args.profile, args.data)
    OUT.mkdir(parents=True, exist_ok=True)
    df.to_csv(OUT / f"retrain_vs_committed_{args.data}.csv", index=False)
    finals.to_csv(OUT / f"retrain_vs_committed_{args.data}_final_arms.csv", index=False)
    lines = [
        f"# The run cache against the committed tuning tables: {args.data}, profile {args.profile}",
        "",
        f"Produced by `python benchmarks/bench_retrain_committed.py --data {args.data}` on this machine "
        f"({cpu_identity()}, {platform.processor() or platform.machine()}); it reads the run cache and trains nothing.",
        "",
        f"- rungs found in both: **{s['rungs']}**, equal to the committed validation RSUM: **{s['rungs_equal']}**; "
        f"|here − committed|: median {s['median_abs']:.2f}, 90th percentile {s['p90_abs']:.2f}, max {s['max_abs']:.2f}",
        f"- full tuning runs found in both: {s['full_runs']}, equal at the selected epoch: {s['full_equal']}",
        f"- arms whose rungs are all here: {s['arms_complete']}; the same settings go on past the rung in "
        f"{s['same_survivors']} of them",
        f"- arms whose tuning is complete here: {len(s['chosen'])}; the same setting chosen for "
        f"{int(s['chosen']['same'].sum()) if len(s['chosen']) else 0} of them",
        f"- arms whose every final run is here: {len(finals)}, "
        f"{int(finals.rsum_committed.notna().sum()) if len(finals) else 0} of them in a committed table; "
        f"|diff / se| > 2 for {int((finals.diff_over_se.abs() > 2).sum()) if len(finals) else 0} (below)",
        "",
        "The committed runs trained on Intel Xeons with AVX-512 (docs/compute.md); a CPU run's numbers depend on the",
        "CPU's kernels, and its key names them since 2026-11-27 (`coherent_itr.runs.cpu_identity`).",
        "",
        "## The chosen settings",
        "",
        markdown_table(s["chosen"], index=False) if len(s["chosen"]) else "(no arm's tuning is complete in this cache)",
        "",
        "## Arms whose every final run is here: test RSUM against the committed tables",
        "",
        "Each arm at the setting its tuning chose on each machine, mean ± sd over its seeds (their number in",
        "brackets); `diff / se`: the difference of the means over its standard error (seed-to-seed only: one test",
        "set). Where the chosen setting differs (table above; an arm of a paper's sweep follows its main arm), the",
        "arms are different runs, not the same runs on another CPU.",
        "",
        markdown_table(readable_finals(finals), index=False) if len(finals) else "(no arm's final runs are all here)",
        "",
        "## Every rung",
        "",
        markdown_table(readable(df), index=False) if len(df) else "(no run of the committed tables is in this cache)",
        "",
    ]
    (OUT / f"retrain_vs_committed_{args.data}.md").write_text("\n".join(lines))
    print("\n".join(lines[:9]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
