"""Is the tuning grid wide enough? One step past its top learning rate, for every X1 main arm.

When a tuning grid's top lr is what most families choose, the optimum may lie above it. For every X1 main arm
whose chosen lr is the grid's top, this trains the tuning seed at the chosen setting with the lr one grid step
further (×3, the grid's own log spacing, rounded) and compares validation RSUM at the selected checkpoint — the
number the tuner ranks by; no test metric is read. One seed per setting, as in tuning: read a difference of a
few RSUM against the seed spread of ``results/<data>/overview/x1_main_*.md``. Runs go through the run cache
(resumable; they are not part of any plan).

    FLICKR8K_DIR=... python benchmarks/bench_lr_edge.py --data synthetic,flickr8k

Writes ``results/benchmarks/lr_edge.{md,csv}``. The committed result was measured on 2026-11-26 with the grid
{2e-4, 6e-4, 2e-3} (step to 6e-3); on Flickr8k six of ten arms gained there, so 6e-3 joined the grid for every
arm the same day (``reproduce.spec.profiles.TuningGrid``). Run again, the script steps past the current top.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OUT = ROOT / "results" / "benchmarks"
STEP = 3.0  # the grid's log spacing (2e-4, 6e-4, 2e-3, 6e-3), one step on


def rows_for(data: str) -> list[dict]:
    import torch

    from coherent_itr.runs import RunCache
    from reproduce.protocol import tuning
    from reproduce.protocol.study import profile_for

    torch.set_num_threads(1)
    prof = profile_for("default", data)
    cache = RunCache()
    top = max(prof.tuning.lr)
    fams = tuning.families(prof, ["overview"], cache)
    rows = []
    for f in fams.values():
        setting = tuning.chosen_setting(f)
        row = {
            "data": data,
            "arm": f.arm.name,
            "lr": setting["lr"],
            "warm-up": setting.get("warmup_epochs", 0),
            "val RSUM": round(f.chosen["val_rsum"], 1),
        }
        if setting["lr"] < top:
            rows.append({**row, "lr ×3": "—", "val RSUM at lr ×3": "—", "Δ": "— (chosen lr inside the grid)"})
            continue
        cfg = next(c for c in f.arm.configs(prof, **setting) if c.seed == prof.tuning.seed)
        cfg = cfg.replace(lr=round(setting["lr"] * STEP, 10))
        t = time.perf_counter()
        rec = cache.get_or_train(cfg, progress=False, evaluate=False).record
        v = float(rec["health"]["val_rsum"])
        rows.append({**row, "lr ×3": cfg.lr, "val RSUM at lr ×3": round(v, 1), "Δ": round(v - f.chosen["val_rsum"], 1)})
        print(f"{data} {f.arm.name}: {row['val RSUM']} → {v:.1f} at lr {cfg.lr:g} ({time.perf_counter() - t:.0f} s)")
    return rows


def main(argv=None) -> None:
    import pandas as pd

    from reproduce.spec.tables import markdown_table

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="synthetic", help="comma-separated: synthetic, flickr8k")
    args = ap.parse_args(argv)
    rows = [r for d in args.data.split(",") for r in rows_for(d.strip())]
    df = pd.DataFrame(rows)
    OUT.mkdir(parents=True, exist_ok=True)
    df.to_csv(OUT / "lr_edge.csv", index=False)
    load = os.getloadavg()[0]
    text = (
        "# One step past the tuning grid's top lr (X1 main arms, tuning seed 0)\n\n"
        f"`python benchmarks/bench_lr_edge.py --data {args.data}`; load average {load:.1f} at the end (the "
        "numbers are validation RSUM, not timings). `val RSUM`: the tuned setting's run, as the tuner ranks it; "
        "`val RSUM at lr ×3`: the same setting and seed with the lr one grid step past the top (6e-3); "
        "Δ = the second minus the first. One seed each: compare Δ with the seed spread of the X1 table.\n\n"
        + markdown_table(df, index=False)
        + "\n"
    )
    (OUT / "lr_edge.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
