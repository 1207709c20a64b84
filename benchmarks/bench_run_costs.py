"""What the runs of a profile really cost on this machine, read from the run cache (no training).

Every training entry of the cache whose config has the profile's model and schedule on ``--data`` (words /
GRU / joint size, batch, epoch cap, patience) is one observation: its record's ``timing`` (training seconds per
epoch, validation seconds, the whole ``train()`` call) and ``epochs_run`` (where early stopping ended it), and,
where the run was evaluated, the evaluation's ``eval_s``. Grouped by loss, and by loss × lr for the epochs
(a small lr trains longer before it plateaus). These are the numbers ``reproduce.spec.profiles`` prices a plan with
(``COSTS``, ``LOSS_EPOCH_S``, ``EXPECTED_EPOCHS``); the runs were timed where they ran (two workers side by side
in the driver), so the figures include that contention.

    python benchmarks/bench_run_costs.py --data flickr8k [--profile default]

Writes ``results/benchmarks/run_costs_<data>.md`` and ``.csv``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OUT = ROOT / "results" / "benchmarks"
MODEL_FIELDS = ("embed_dim", "word_dim", "text_hidden", "batch_size", "early_stop_patience", "lr_decay_epoch")


def plan_keys(data: str, profile_name: str = "default", cache_root=None) -> set:
    """Run keys of the profile's whole protocol on ``data`` as the cache decides it now: the tuning runs (rungs),
    the settings that went on to the cap, and the final runs of the tuned plan (what one cold run trains)."""
    from coherent_itr.runs import RunCache
    from reproduce.protocol import tuning
    from reproduce.protocol.study import profile_for

    prof, cache = profile_for(profile_name, data), RunCache(cache_root)
    runs = [*tuning.tuning_configs(prof), *tuning.survivor_configs(prof, None, cache)]
    return {cache.train_key(c) for c in [*runs, *tuning.tuned_plan(prof, None, cache)]}


def observations(data: str, profile_name: str = "default", cache_root=None, planned: set | None = None):
    """One row per cached training entry of ``data`` with the profile's model and schedule (``in_plan``: the
    run is one of the protocol's, :func:`plan_keys`)."""
    import pandas as pd

    from coherent_itr.config import Config
    from coherent_itr.runs import RunCache
    from reproduce.spec.profiles import run_seconds
    from reproduce.protocol.study import profile_for

    prof = profile_for(profile_name, data)
    want = {k: prof.model[k] for k in MODEL_FIELDS if k in prof.model}
    cache = RunCache(cache_root)
    planned = plan_keys(data, profile_name, cache_root) if planned is None else planned
    evals = {}
    for m in (cache.root / "eval").glob("*/metrics.json"):
        try:
            e = json.loads(m.read_text())
        except (OSError, ValueError):
            continue
        evals[e.get("run_key")] = e.get("eval_s")
    rows = []
    for rec_path in (cache.root / "train").glob("*/record.json"):
        try:
            r = json.loads(rec_path.read_text())
        except (OSError, ValueError):
            continue
        c = r["config"]
        # S1's reduced-data runs stretch patience and the decay epoch: kept when they are the plan's
        if c.get("data") != data or (any(c.get(k) != v for k, v in want.items()) and r.get("run_key") not in planned):
            continue
        t = r["timing"]
        n = max(1, int(r["epochs_run"]))
        rows.append(
            {
                "loss": c["loss"],
                "kind": "rung" if c["epochs"] < prof.model["epochs"] else "full",  # S1's stretched runs: full
                "lr": c["lr"],
                "warmup_epochs": c.get("warmup_epochs", 0),
                "train_fraction": c.get("train_fraction", 1.0),
                "seed": c["seed"],
                "epochs_run": n,
                "best_epoch": r["best_epoch"],
                "train_s_per_epoch": t["train_s_per_epoch"],
                "val_s_per_epoch": t["val_s"] / n,
                "fixed_s": t["total_s"] - t["train_s"] - t["val_s"],
                "total_s": t["total_s"],
                "estimated_s": run_seconds(Config.from_dict(c), data, evaluated=False),
                "eval_s": evals.get(r.get("run_key")),
                "in_plan": r.get("run_key") in planned,
                "finished": rec_path.stat().st_mtime,
            }
        )
    return pd.DataFrame(rows)


def summary(obs):
    """Per loss (full-data runs): runs, median training / validation seconds per epoch, fixed seconds, median
    epochs run, median whole-run seconds, median evaluation seconds."""
    full = obs[(obs.train_fraction == 1.0) & (obs.kind == "full")]
    g = full.groupby("loss")
    return (
        g.agg(
            runs=("total_s", "size"),
            train_s_per_epoch=("train_s_per_epoch", "median"),
            val_s_per_epoch=("val_s_per_epoch", "median"),
            fixed_s=("fixed_s", "median"),
            epochs_run=("epochs_run", "median"),
            total_s=("total_s", "median"),
            eval_s=("eval_s", "median"),
            actual_over_estimate=("total_s", "sum"),
            estimated_s=("estimated_s", "sum"),
        )
        .reset_index()
        .assign(actual_over_estimate=lambda d: d.actual_over_estimate / d.estimated_s)
        .drop(columns="estimated_s")
        .sort_values("total_s", ascending=False)
    )


def epochs_by_lr(obs):
    full = obs[(obs.train_fraction == 1.0) & (obs.kind == "full")]
    return full.pivot_table(index="loss", columns="lr", values="epochs_run", aggfunc="median")


def plan_line(obs, n_planned: int) -> str:
    """What the protocol's own runs (``in_plan``) took: the measured cost of its training in one cold run."""
    p = obs[obs.in_plan]
    ev = p.eval_s.dropna()
    return (
        f"**The protocol's plan** (tuning rungs, the settings that went on, the tuned final runs): {n_planned} runs, "
        f"{len(p)} of them cached with timings; they took **{p.total_s.sum() / 3600:.2f} worker-hours** of `train()` "
        f"and {ev.sum() / 3600:.2f} of test evaluation ({len(ev)} evaluated), ≈ "
        f"{(p.total_s.sum() + ev.sum()) / 3600 / 2:.1f} h of wall time at 2 workers without data preparation and "
        f"notebooks; the cost model priced them at {p.estimated_s.sum() / 3600:.2f} worker-hours of training."
    )


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", choices=("synthetic", "flickr8k"), required=True)
    ap.add_argument("--profile", default="default")
    a = ap.parse_args(argv)
    planned = plan_keys(a.data, a.profile)
    obs = observations(a.data, a.profile, planned=planned)
    if obs.empty:
        raise SystemExit(f"no cached {a.data} runs of the {a.profile} profile's model: run the study first")
    s = summary(obs)
    wall = (obs.finished.max() - obs.finished.min()) / 60
    lines = [
        f"# Run costs, {a.data} ({a.profile} profile's model), read from the run cache",
        "",
        f"{len(obs)} training runs ({int((obs.train_fraction == 1.0).sum())} on the whole training split), "
        f"{int(obs.eval_s.notna().sum())} evaluated; finished over {wall:.0f} min; "
        f"{sum(obs.total_s) / 3600:.2f} worker-hours of `train()` ({int((obs.kind == 'rung').sum())} of the runs are "
        f"successive-halving rungs). The cost model (`reproduce.spec.profiles.run_seconds`, training only) priced "
        "the same "
        f"runs at {sum(obs.estimated_s) / 3600:.2f} worker-hours: actual / estimate = "
        f"{sum(obs.total_s) / sum(obs.estimated_s):.2f} (per loss below). Machine: {os.cpu_count()} CPUs; timed "
        "inside the workers (two side by side; other jobs may have shared the cores). Produced by "
        "`benchmarks/bench_run_costs.py`.",
        "",
        plan_line(obs, len(planned)),
        "",
        s.to_markdown(index=False, floatfmt=".2f"),
        "",
        "Median epochs run (early stopping, patience counted after the warm-up) by loss × lr:",
        "",
        epochs_by_lr(obs).to_markdown(floatfmt=".0f"),
        "",
    ]
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"run_costs_{a.data}.md").write_text("\n".join(lines), encoding="utf-8")
    obs.drop(columns="finished").to_csv(OUT / f"run_costs_{a.data}.csv", index=False)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
