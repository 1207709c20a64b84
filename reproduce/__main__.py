"""``python -m reproduce --profile default``: train what the study needs and write its tables.

Current scope (foundation): the VSE++ baseline — Triplet-HN (max violation) and the
all-negatives variant — over the profile's seeds, served from the run cache when present,
summarised as ``<results>/baseline.csv`` and ``baseline.md`` (mean ± std over seeds).
"""
from __future__ import annotations

import argparse
import sys
import time

import pandas as pd

from coherent_itr.config import Config
from coherent_itr.io import atomic_write_text
from coherent_itr.runs import RunCache

from .profiles import get_profile

BASELINE_ARMS = {
    "VSE++ (Triplet-HN, max violation)": dict(loss="triplet", loss_params={"max_violation": True}),
    "VSE0 (triplet, all negatives)": dict(loss="triplet", loss_params={"max_violation": False}),
}
COLUMNS = ["i2t_r1", "i2t_r5", "i2t_r10", "t2i_r1", "t2i_r5", "t2i_r10", "rsum", "i2t_medr", "t2i_medr"]


def baseline_table(profile, cache: RunCache, progress: bool = True) -> pd.DataFrame:
    rows = []
    for arm, overrides in BASELINE_ARMS.items():
        for seed in profile.seeds:
            cfg = Config(data=profile.data, data_scale=profile.data_scale, seed=seed, **profile.model, **overrides)
            res = cache.get_or_train(cfg, progress=progress)
            rows.append({"arm": arm, "seed": seed, **{c: res.test[c] for c in COLUMNS},
                         "train_s": res.record["timing"]["train_s"], "best_epoch": res.record["best_epoch"]})
    return pd.DataFrame(rows)


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    g = df.groupby("arm", sort=False)[COLUMNS]
    mean, std = g.mean(), g.std(ddof=1).fillna(0.0)
    return pd.DataFrame({c: [f"{m:.1f} ± {s:.1f}" for m, s in zip(mean[c], std[c])] for c in COLUMNS},
                        index=mean.index)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m reproduce", description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="default", help="smoke | default | paper")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    profile = get_profile(args.profile)
    t0 = time.perf_counter()
    cache = RunCache()
    df = baseline_table(profile, cache, progress=not args.no_progress)
    out = profile.results_dir
    atomic_write_text(f"{out}/baseline.csv", df.to_csv(index=False))
    md = (f"# VSE++ baseline ({profile.name} profile, data={profile.data}/{profile.data_scale}, "
          f"seeds={list(profile.seeds)})\n\nTest split, R@K in %, mean ± std over seeds.\n\n"
          + summarise(df).to_markdown() + "\n")
    atomic_write_text(f"{out}/baseline.md", md)
    print(md)
    print(f"reproduce: profile={profile.name} finished in {time.perf_counter() - t0:.0f} s; results in {out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
