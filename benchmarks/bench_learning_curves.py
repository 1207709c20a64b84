"""Learning curves of every main arm, trained well past the epoch cap, to choose the cap and the model size.

Rule (stated before any curve was read; the same for every arm):

* **Arms**: every main arm of the default profile (the distinct tuning problems of
  ``reproduce.protocol.tuning``), seed 0.
* **Model**: ``--size`` words/GRU/joint (default 128/128/128), batch 128 of captions, gradient clip 2.
* **Setting**: lr = the arm's lr chosen by the previous protocol's tuning on the synthetic world
  (``results/tuning_summary.csv``: 2e-3 for most arms, 6e-4 for the manual ladders, Kendall SW-HS alone and
  S-NDCG alone), one warm-up epoch on all negatives where a warm-up changes the loss
  (``ITRLoss.honours_warmup``), the same on both data sets.
* **Schedule of the long run**: ``--epochs`` (default 20 = 2 × a cap of 10), lr × 0.1 after 80 % of the
  epochs (16), no early stopping, validation RSUM recorded every epoch.
* **Reading**: for a candidate cap E, an arm *plateaus within E* when its validation RSUM at some epoch ≤ E
  (before any decay in the long run, so a lower bound of what the cap's own decayed schedule reaches) is
  ≥ 95 % of its best validation RSUM of the whole long run. The cap is the smallest E at which every arm
  plateaus. After the cold run, the protocol's selected checkpoints are compared with the same long-run bests.

Each arm's curve is written when its run ends (``results/benchmarks/learning_curves/<data>/<arm>.csv``), so an
interrupted benchmark resumes; ``--report`` only re-draws the table and the figure from the saved curves.

    python benchmarks/bench_learning_curves.py --data synthetic [--workers 2]
    FLICKR8K_DIR=... python benchmarks/bench_learning_curves.py --data flickr8k
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

OUT = ROOT / "results" / "benchmarks" / "learning_curves"
PLATEAU = 0.95
DECAY_AT = 0.8


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def previous_lr(data_root: Path = ROOT / "results") -> dict[str, float]:
    """The lr the previous protocol chose per main arm on the synthetic world (``tuning_summary.csv``)."""
    import pandas as pd

    t = pd.read_csv(data_root / "tuning_summary.csv")
    return {r.arm: float(r.lr) for r in t[t.chosen.astype(bool)].itertuples()}


def arm_configs(data: str, epochs: int, size: tuple[int, int, int]) -> list[tuple[str, object]]:
    """``[(arm name, Config)]`` of every main arm (one per tuning problem) under the rule above."""
    from reproduce.spec import experiments
    from reproduce.protocol import tuning
    from reproduce.protocol.study import profile_for

    prof = profile_for("default", data)
    lrs = previous_lr()
    word, gru, joint = size
    out, seen = [], set()
    for paper in experiments.PAPERS:
        for arm in tuning.main_arms(prof, paper):
            key = tuning.tuning_key(arm, prof)
            if key in seen:
                continue
            seen.add(key)
            if arm.name not in lrs:
                raise KeyError(f"no previous tuned lr for main arm {arm.name!r} in results/tuning_summary.csv")
            cfg = arm.config(
                prof,
                0,
                lr=lrs[arm.name],
                warmup_epochs=1 if arm.honours_warmup else 0,
            ).replace(
                word_dim=word,
                text_hidden=gru,
                embed_dim=joint,
                epochs=epochs,
                lr_decay_epoch=round(DECAY_AT * epochs),
                early_stop_patience=0,
                grad_diag_every=0,
            )
            out.append((arm.name, cfg))
    return out


def _train_one(args) -> str:
    name, cfg_dict, path = args
    import pandas as pd
    import torch

    from coherent_itr.config import Config
    from coherent_itr.train import train

    torch.set_num_threads(1)
    cfg = Config.from_dict(cfg_dict)
    t0 = time.perf_counter()
    res = train(cfg, progress=False)
    hist = pd.DataFrame(res.record["history"])
    keep = [
        c
        for c in (
            "epoch",
            "lr",
            "warmup",
            "train_loss",
            "val_rsum",
            "val_rsum_chance",
            "val_pos_sim",
            "val_hardneg_sim",
            "epoch_time_s",
        )
        if c in hist
    ]
    hist = hist[keep].assign(arm=name, loss=cfg.loss, wall_s=time.perf_counter() - t0)
    tmp = path.with_suffix(".tmp")
    hist.to_csv(tmp, index=False)
    os.replace(tmp, path)
    return (
        f"{name}: best val RSUM {hist.val_rsum.max():.1f} at epoch {int(hist.val_rsum.idxmax()) + 1}, "
        f"{time.perf_counter() - t0:.0f} s"
    )


def plateau_table(curves, cap_candidates=(3, 5, 6, 8, 10, 12, 15, 20, 25, 30)):
    """Per arm: long-run best val RSUM (epoch), and for each candidate cap E the share of that best reached
    by epoch E; the smallest E at which the arm reaches ``PLATEAU``."""
    import pandas as pd

    rows = []
    for arm, h in curves.groupby("arm", sort=False):
        h = h.sort_values("epoch")
        best = float(h.val_rsum.max())
        row = {"arm": arm, "best val RSUM": best, "at epoch": int(h.epoch[h.val_rsum.idxmax()])}
        reached = None
        for e in range(1, int(h.epoch.max()) + 1):
            share = float(h[h.epoch <= e].val_rsum.max()) / best if best > 0 else float("nan")
            if reached is None and share >= PLATEAU:
                reached = e
            if e in cap_candidates:
                row[f"E={e}"] = share
        row["95 % by epoch"] = reached
        rows.append(row)
    return pd.DataFrame(rows)


def report(data: str, tag: str = "") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd
    from matplotlib.ticker import MaxNLocator

    name = data + tag
    folder = OUT / name
    files = sorted(folder.glob("*.csv"))
    if not files:
        raise SystemExit(f"no curves under {folder}: run the benchmark first")
    curves = pd.concat([pd.read_csv(f) for f in files], ignore_index=True)
    table = plateau_table(curves)
    meta = json.loads((folder / "meta.json").read_text()) if (folder / "meta.json").exists() else {}
    shown = table.copy()  # the CSV keeps the raw shares; the Markdown shows them as percentages
    for c in [c for c in table.columns if c.startswith("E=")]:
        shown[c] = [f"{v:.0%}" if v == v else "—" for v in shown[c]]
    shown["95 % by epoch"] = [("—" if v is None or v != v else int(v)) for v in shown["95 % by epoch"]]
    md = shown.to_markdown(index=False, floatfmt=".1f")
    cap_needed = table["95 % by epoch"].max()
    lines = [
        f"# Learning curves, {data} (seed 0, long run of {int(curves.epoch.max())} epochs)",
        "",
        f"Model {meta.get('size', '?')} (words/GRU/joint), batch 128; lr: the previous protocol's tuned lr per arm; "
        "one all-negatives warm-up epoch where it applies; lr × 0.1 after 80 % of the epochs; no early stopping. "
        f"Machine: {meta.get('machine', '?')}; load average before {meta.get('load_before', '?')}.",
        "",
        md,
        "",
        "`E=k`: the best validation RSUM by epoch k as a share of the long run's best (before the long run's lr "
        "decay, so a lower bound of a k-epoch schedule with its own decay). `95 % by epoch`: the first epoch at "
        f"which the arm reaches {PLATEAU:.0%} of its long-run best.",
        "",
        f"**Smallest cap at which every arm reaches {PLATEAU:.0%}: {cap_needed} epochs.**",
        "",
    ]
    (OUT / f"{name}.md").write_text("\n".join(lines), encoding="utf-8")
    table.to_csv(OUT / f"{name}_plateau.csv", index=False)
    fig, ax = plt.subplots(figsize=(9, 5.5), constrained_layout=True)
    colours = plt.get_cmap("tab20").colors  # one colour per arm (up to 20), line style alternating too
    for i, (arm, h) in enumerate(curves.groupby("arm", sort=False)):
        ax.plot(
            h.epoch, h.val_rsum, marker="os^D"[i % 4], ms=3, ls=("-", "--")[i % 2], color=colours[i % 20], label=arm
        )
    ax.set_xlabel("epoch")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("validation RSUM")
    ax.set_title(f"Learning curves, {data} (seed 0)")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    ax.grid(alpha=0.3)
    fig.savefig(OUT / f"{name}.png", dpi=120)
    print((OUT / f"{name}.md").read_text())


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", choices=("synthetic", "flickr8k"), default="synthetic")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--size", default="128/128/128", help="words/GRU/joint dimensions")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--arm", action="append", default=[], help="an arm name, repeatable (default: every main arm)")
    ap.add_argument("--report", action="store_true", help="only re-draw the table and figure")
    ap.add_argument(
        "--tag", default="", help="suffix of the output folder and files (e.g. _e40 for a longer check of some arms)"
    )
    a = ap.parse_args(argv)
    if not a.report:
        size = tuple(int(x) for x in a.size.split("/"))
        folder = OUT / (a.data + a.tag)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "meta.json").write_text(
            json.dumps(
                {
                    "size": a.size,
                    "epochs": a.epochs,
                    "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
                    "load_before": " ".join(f"{x:.2f}" for x in os.getloadavg()),
                }
            )
        )
        arms = arm_configs(a.data, a.epochs, size)
        unknown = sorted(set(a.arm) - {name for name, _ in arms})
        if unknown:  # arm names contain commas and spaces: each is named whole, and a typo stops here
            raise SystemExit(f"--arm: no main arm named {unknown}; main arms: {[n for n, _ in arms]}")
        todo = [
            (name, cfg.to_dict(), folder / f"{slug(name)}.csv")
            for name, cfg in arms
            if (not a.arm or name in a.arm) and not (folder / f"{slug(name)}.csv").exists()
        ]
        print(f"{len(todo)} arm(s) to train on {a.data}, {a.workers} worker(s)", flush=True)
        if todo:  # features and Sentence-BERT embeddings once, in this process, not in every worker
            from coherent_itr.config import Config
            from reproduce.protocol.prepare import prepare

            prepare([Config.from_dict(t[1]) for t in todo], progress=False)
        slow = ("adaptive_ladder", "ladder", "listwise", "bcls", "sndcg", "kendall_sw_hs")  # longest first
        todo.sort(key=lambda t: slow.index(t[1]["loss"]) if t[1]["loss"] in slow else len(slow))
        with ProcessPoolExecutor(a.workers) as pool:
            for line in pool.map(_train_one, todo):
                print(line, flush=True)
    report(a.data, a.tag)


if __name__ == "__main__":
    main()
