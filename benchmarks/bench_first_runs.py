"""The main comparison (X1) of the new protocol as far as the run cache holds it, read without training.

For every X1 main arm on ``--data``: the tuning trials (successive halving: each setting's rung, and the
validation RSUM of those that went on), the setting the protocol chooses (``reproduce.protocol.tuning``: the same code
the driver uses, health check of the other seeds included), and the test RSUM of each seed's run at that
setting — for the arms whose runs are all cached; the others are listed as pending. Nothing is trained or
evaluated here (``RunCache.load(..., evaluate=False)``). This is a progress report of a study that runs over
several sittings, not the ledger: no verdict (the complete arms get the main comparison's intervals).

    FLICKR8K_DIR=... python benchmarks/bench_first_runs.py --data flickr8k

Writes ``results/benchmarks/first_runs_<data>.md``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OUT = ROOT / "results" / "benchmarks"

from reproduce.protocol import main_comparison  # noqa: E402


def arm_rows(data: str, paper: str = "overview"):
    """(rows of the table, pending arm names, one {arm, seed, rsum} per final run) from the run cache."""
    from coherent_itr.runs import RunCache
    from reproduce.protocol import tuning
    from reproduce.protocol.study import profile_for

    prof = profile_for("default", data)
    cache = RunCache()
    rows, pending, scores = [], [], []
    for arm in tuning.main_arms(prof, paper):
        trials, missing = tuning.arm_trials(arm, prof, cache)
        if missing:
            pending.append(f"{arm.name} ({len(missing)} tuning run(s) missing)")
            continue
        fam = tuning.Family(tuning.tuning_key(arm, prof), arm, [arm.name], trials, None)
        fam.chosen = chosen = tuning.health_checked_choice(fam, prof, cache)
        finals = tuning.arm_configs(arm, tuning.main_arms(prof, paper), prof, {fam.key: fam})  # the driver's own
        runs = [cache.load(c, evaluate=False) for c in finals]
        if any(r is None for r in runs):
            pending.append(f"{arm.name} ({sum(r is None for r in runs)} of {len(runs)} seed(s) missing)")
            continue
        test = [float(r.record["test"]["rsum"]) for r in runs]
        went = [t for t in trials if t.get("went_on", True)]
        rows.append(
            {
                "arm": arm.name,
                "chosen lr": chosen["lr"],
                "warm-up": chosen["warmup_epochs"],
                "val RSUM": round(chosen["val_rsum"], 1),
                "settings (went on / grid)": f"{len(went)} / {len(trials)}",
                "test RSUM per seed": " ".join(f"{x:.1f}" for x in test),
                "mean": round(statistics.mean(test), 1),
                "sd": round(statistics.stdev(test), 1) if len(test) > 1 else float("nan"),
                "epochs run": " ".join(str(r.record["epochs_run"]) for r in runs),
            }
        )
        scores += [{"arm": arm.name, "seed": c.seed, "rsum": x} for c, x in zip(finals, test)]
    return rows, pending, scores


def comparison_lines(scores, data: str) -> list[str]:
    """The complete arms as the ledger's main comparison reports them (``reproduce.protocol.main_comparison``: mean and
    IQM with 95% stratified-bootstrap intervals, probability of improvement over VSE++), table and forest plot."""
    import matplotlib

    matplotlib.use("Agg")
    from reproduce.spec.tables import markdown_table

    res = main_comparison.main_comparison(scores, "rsum")
    fig = main_comparison.forest_plot(
        res, "RSUM (R@1+R@5+R@10, both directions, %)", f"X1 on {data}, new protocol, complete arms so far"
    )
    png = OUT / f"first_runs_{data}.png"
    fig.savefig(png, dpi=120)
    return [
        "## The complete arms as the main comparison reports them",
        "",
        "`reproduce.protocol.main_comparison` on the test RSUM above (Agarwal et al. 2021: mean and interquartile mean "
        "with "
        "95% stratified-bootstrap intervals, 2,000 resamples of each arm's seeds; P(> VSE++) = the probability "
        "that a run of the arm beats a run of VSE++, with its interval). Not the ledger's verdicts: no family-wise "
        "intervals, no smallest effect of interest.",
        "",
        markdown_table(main_comparison.comparison_table(res)),
        "",
        f"![forest plot]({png.name})",
        "",
    ]


def main(argv=None) -> None:
    import pandas as pd

    from reproduce.spec.tables import markdown_table

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", choices=("synthetic", "flickr8k"), required=True)
    a = ap.parse_args(argv)
    rows, pending, scores = arm_rows(a.data)
    lines = [
        f"# The main comparison (X1) of the new protocol so far, {a.data}",
        "",
        "Read from the run cache by `benchmarks/bench_first_runs.py` (nothing trained): each arm tuned on the "
        "validation split by the protocol of `reproduce/spec/profiles.py` (successive halving, the health check of the "
        "other seeds), then its 5 seeds at the chosen setting; test RSUM of each seed. A progress report, not the "
        "ledger: no verdict until the whole study has run (the intervals of the complete arms are below).",
        "",
        markdown_table(pd.DataFrame(rows), index=False) if rows else "(no arm complete yet)",
        "",
    ]
    if pending:
        lines += ["Pending: " + "; ".join(pending) + ".", ""]
    OUT.mkdir(parents=True, exist_ok=True)
    scores = pd.DataFrame(scores)
    if len(scores) and (scores.arm == main_comparison.BASE).any():
        lines += comparison_lines(scores, a.data)
    (OUT / f"first_runs_{a.data}.md").write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
