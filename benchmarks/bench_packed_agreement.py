"""Do packed runs agree with their solo runs? The X1 arms trained by both engines on this CPU.

``coherent_itr.packed.train_packed`` trains E runs that share a data set, a model shape and a loss as one model;
on a toy run a member equals its solo run (``coherent_itr.train.train``) to float rounding, because only the GRU's
arithmetic differs (torch's fused kernel against the recurrence as matrix products). Over a real run such rounding
differences can grow as they do between two CPUs. This script measures how far they grow where it matters: for every
X1 arm (the fair comparison's shared arms, ``reproduce.spec.experiments.overview_arms``) on each synthetic world
asked for, it trains every seed solo and all the arm's seeds as one pack, one torch thread and one BLAS thread
throughout (as the study's workers), and reports

* per run: |packed − solo| of the selected validation RSUM (what tuning and selection read) and of the test RSUM of
  the selected checkpoint, and whether the best epoch is the same;
* per arm, per world and overall: the median, 90th percentile and maximum of those differences;
* per world: whether the arms' ranking by mean validation RSUM over the seeds (the decision tuning and selection
  take) is the same under both engines;
* the wall time per run of each engine (the pack's wall time divided by its members), with the load average:
  other processes share this machine's cores, so the times are indicative;

beside the spreads already measured for the same configs on two CPUs (``retrain_vs_committed_flickr8k.md``) and on a
GPU against a CPU (``gpu/cpu_vs_gpu_flickr8k.md``), both on Flickr8k's tuning rungs.

A run's config is the driver's (``Arm.config``) at the profile's own learning rate (2e-3: the smoke grid's only
setting, a point of the default grid and the setting most synthetic X1 families chose) without warm-up — engine
agreement, not tuning, is measured — with ``grad_diag_every=0`` (the sampled gradient diagnostics only read
gradients, on both engines, and cost time) and its epochs capped at the world's ``EPOCHS`` (default: the profile's
tuning rung, 5 epochs; smoke: its cap of 2). A pack is as wide as the arm's seeds (``--width`` to pad it with the
engine's dummy members, which on a CPU cost as much as a run and change no member's numbers). Test RSUM is the
``rsum`` of ``coherent_itr.evaluation.evaluate_run`` (checked equal on each world's first run) computed by
``coherent_itr.metrics.retrieval_metrics`` alone: the full evaluation costs ≈ 6 s a run on the default world.

    python benchmarks/bench_packed_agreement.py [--world smoke:5 --world default:2] [--width N] [--arms 3]

``--world PROFILE:SEEDS[:EPOCHS]`` (data: synthetic). Writes ``results/benchmarks/packed_agreement.md`` and ``.csv``
(one row per run).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]
OUT = ROOT / "results" / "benchmarks"
NAME = "packed_agreement"
DEFAULT_WORLDS = ("smoke:5", "default:2")
#: the reference spreads: (label, file under results/benchmarks/, what it compares)
REFERENCES = (
    ("CPU vs CPU", "retrain_vs_committed_flickr8k.md", "Intel AVX-512 against AMD AVX2, 148 Flickr8k rungs"),
    ("GPU vs CPU", "gpu/cpu_vs_gpu_flickr8k.md", "H200 (captured step, fp16 bundle) against AMD AVX2, 72 rungs"),
)
RUN_COLUMNS = (
    "world",
    "arm",
    "loss",
    "seed",
    "epochs",
    "val_solo",
    "val_packed",
    "val_diff",
    "test_solo",
    "test_packed",
    "test_diff",
    "best_epoch_solo",
    "best_epoch_packed",
    "epochs_run_solo",
    "epochs_run_packed",
    "s_solo",
    "s_packed",
    "load_1min",
)


# --- the runs ------------------------------------------------------------------------------------------------
def world_groups(profile_name: str, seeds: int, epochs: int | None = None, arms: int | None = None):
    """``[(arm name, loss, [one Config per seed])]`` for the X1 arms of ``profile_name`` on the synthetic world, and
    the setting used (see the module docstring)."""
    from reproduce.protocol import tuning
    from reproduce.spec import experiments
    from reproduce.spec.profiles import profile_for

    prof = profile_for(profile_name, "synthetic")
    setting = {"lr": float(prof.model["lr"]), "warmup_epochs": 0}
    cap = epochs or prof.tuning.rung_epochs or int(prof.model["epochs"])
    x1 = [a for a in experiments.overview_arms(prof) if a.group == "x1"][: arms or None]
    groups = []
    for arm in x1:
        if setting not in tuning.grid(arm, prof):
            raise ValueError(f"{arm.name}: {setting} is not a point of the {profile_name} tuning grid")
        cfgs = [arm.config(prof, s, **setting) for s in range(seeds)]
        cfgs = [c.replace(grad_diag_every=0, epochs=min(c.epochs, cap)) for c in cfgs]
        groups.append((arm.name, cfgs[0].loss, cfgs))
    return groups, {**setting, "epochs": min(cap, int(prof.model["epochs"]))}


def selected_test_rsum(result, splits) -> float:
    """The test RSUM of a run's selected checkpoint (one fold: the synthetic and toy test splits hold ≤ 1,000
    images, ``evaluate_run``'s fold size)."""
    from coherent_itr import metrics

    img, cap = result.arrays["test_img"].astype(np.float32), result.arrays["test_cap"].astype(np.float32)
    return float(metrics.retrieval_metrics(img @ cap.T, splits.test.image_of_caption)["rsum"])


def _check_evaluate_run(result, splits, cache_dir) -> None:
    from coherent_itr.evaluation import evaluate_run

    full = evaluate_run(result, splits=splits, cache_dir=cache_dir)["rsum"]
    if not np.isclose(full, selected_test_rsum(result, splits), rtol=0, atol=1e-9):
        raise AssertionError(f"test RSUM {selected_test_rsum(result, splits)} differs from evaluate_run's {full}")


def measure(world: str, groups, splits, width: int = 0, cache_dir=None, check_evaluate: bool = True, log=print):
    """One row per run (:data:`RUN_COLUMNS`): each group's configs trained solo, one after another, then as one
    pack (``width``: the pack's width; 0: as many as the group's configs)."""
    import torch
    from threadpoolctl import threadpool_limits

    from coherent_itr.packed import train_packed
    from coherent_itr.train import train

    torch.set_num_threads(1)
    rows = []
    with threadpool_limits(limits=1, user_api="blas"):
        for name, loss, cfgs in groups:
            solo, s_solo = [], []
            for c in cfgs:
                t0 = time.perf_counter()
                solo.append(train(c, splits=splits, progress=False, cache_dir=cache_dir))
                s_solo.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            packed = train_packed(cfgs, splits=splits, width=width or len(cfgs), progress=False, cache_dir=cache_dir)
            s_packed = (time.perf_counter() - t0) / len(cfgs)
            if check_evaluate and not rows:
                _check_evaluate_run(solo[0], splits, cache_dir)
            load = os.getloadavg()[0]
            for c, a, b, s in zip(cfgs, solo, packed, s_solo):
                va, vb = float(a.record["health"]["val_rsum"]), float(b.record["health"]["val_rsum"])
                ta, tb = selected_test_rsum(a, splits), selected_test_rsum(b, splits)
                rows.append(
                    {
                        "world": world,
                        "arm": name,
                        "loss": loss,
                        "seed": c.seed,
                        "epochs": c.epochs,
                        "val_solo": va,
                        "val_packed": vb,
                        "val_diff": vb - va,
                        "test_solo": ta,
                        "test_packed": tb,
                        "test_diff": tb - ta,
                        "best_epoch_solo": a.record["best_epoch"],
                        "best_epoch_packed": b.record["best_epoch"],
                        "epochs_run_solo": a.record["epochs_run"],
                        "epochs_run_packed": b.record["epochs_run"],
                        "s_solo": s,
                        "s_packed": s_packed,
                        "load_1min": load,
                    }
                )
            done = rows[-len(cfgs) :]
            log(
                f"{world} {name}: |Δval| max {max(abs(r['val_diff']) for r in done):.2f}, "
                f"solo {np.mean(s_solo):.1f} s/run, packed {s_packed:.1f} s/run, load {load:.2f}"
            )
    return pd.DataFrame(rows, columns=list(RUN_COLUMNS))


# --- the summaries -------------------------------------------------------------------------------------------
def spread(d: pd.Series) -> dict:
    """median, 90th percentile (linear interpolation) and max of |d|."""
    a = d.abs().to_numpy(dtype=float)
    return {"median": float(np.median(a)), "p90": float(np.percentile(a, 90)), "max": float(a.max())}


def _summary_row(g: pd.DataFrame) -> dict:
    v, t = spread(g.val_diff), spread(g.test_diff)
    return {
        "runs": len(g),
        "val_median": v["median"],
        "val_p90": v["p90"],
        "val_max": v["max"],
        "val_equal": int((g.val_diff == 0).sum()),
        "test_median": t["median"],
        "test_p90": t["p90"],
        "test_max": t["max"],
        "best_epoch_equal": int((g.best_epoch_solo == g.best_epoch_packed).sum()),
        "s_solo": float(g.s_solo.mean()),
        "s_packed": float(g.s_packed.mean()),
    }


def arm_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per world and arm: the spreads of |packed − solo|, equal best epochs, mean validation RSUM and rank of each
    engine, seconds per run of each."""
    rows = []
    for world, w in df.groupby("world", sort=False):
        solo_mean = w.groupby("arm", sort=False).val_solo.mean()
        packed_mean = w.groupby("arm", sort=False).val_packed.mean()
        rank_solo = solo_mean.rank(ascending=False, method="min")
        rank_packed = packed_mean.rank(ascending=False, method="min")
        for arm, g in w.groupby("arm", sort=False):
            rows.append(
                {
                    "world": world,
                    "arm": arm,
                    **_summary_row(g),
                    "val_mean_solo": float(solo_mean[arm]),
                    "val_mean_packed": float(packed_mean[arm]),
                    "rank_solo": int(rank_solo[arm]),
                    "rank_packed": int(rank_packed[arm]),
                }
            )
    return pd.DataFrame(rows)


def ranking(df: pd.DataFrame) -> pd.DataFrame:
    """Per world: whether the arms' order by mean validation RSUM is the same under both engines, Kendall's τ of
    the two orders, whether the top arm is the same, and the smallest gap between two solo arm means (how close a
    swap is)."""
    from scipy.stats import kendalltau

    rows = []
    for world, w in df.groupby("world", sort=False):
        solo = w.groupby("arm", sort=False).val_solo.mean()
        packed = w.groupby("arm", sort=False).val_packed.mean()
        order_solo = list(solo.sort_values(ascending=False, kind="stable").index)
        order_packed = list(packed.sort_values(ascending=False, kind="stable").index)
        tau = kendalltau(solo.to_numpy(), packed[solo.index].to_numpy()).statistic if len(solo) > 1 else 1.0
        gaps = np.diff(np.sort(solo.to_numpy()))
        rows.append(
            {
                "world": world,
                "arms": len(solo),
                "seeds": int(w.groupby("arm").size().min()),
                "same_order": order_solo == order_packed,
                "kendall_tau": float(tau),
                "same_top": order_solo[0] == order_packed[0],
                "top_solo": order_solo[0],
                "top_packed": order_packed[0],
                "smallest_gap_solo": float(gaps.min()) if len(gaps) else float("nan"),
            }
        )
    return pd.DataFrame(rows)


def equal_arms(df: pd.DataFrame) -> dict[str, list[str]]:
    """Per world: the arms whose every run has the same selected validation RSUM under both engines."""
    return {
        w: [a for a, g in g_w.groupby("arm", sort=False) if (g.val_diff == 0).all()]
        for w, g_w in df.groupby("world", sort=False)
    }


def overall(df: pd.DataFrame) -> pd.DataFrame:
    """The spreads per world and over every run."""
    rows = [{"scope": w, **_summary_row(g)} for w, g in df.groupby("world", sort=False)]
    if df.world.nunique() > 1:
        rows.append({"scope": "all", **_summary_row(df)})
    return pd.DataFrame(rows)


def references(root: Path = OUT) -> list[dict]:
    """The reference spreads (|Δ| median, 90th percentile, max of validation RSUM), read from their reports."""
    out = []
    for label, name, what in REFERENCES:
        path = root / name
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        m = re.search(r"median (\d+\.\d+), 90th percentile (\d+\.\d+), max (\d+\.\d+)", text)
        vals = [float(x) for x in m.groups()] if m else [float("nan")] * 3
        out.append({"reference": label, "file": name, "compares": what, **dict(zip(("median", "p90", "max"), vals))})
    return out


# --- the report ----------------------------------------------------------------------------------------------
DIFF_COLUMNS = ("runs", "val_median", "val_p90", "val_max", "test_median", "test_p90", "test_max", "best_epoch_equal")
TIME_COLUMNS = ("runs", "s_solo", "s_packed", "packed_over_solo", "load_1min")


def report(df: pd.DataFrame, meta: dict) -> str:
    """The Markdown report of ``df`` (rows of :func:`measure`); ``meta``: command, worlds, machine, wall time."""
    from reproduce.spec.tables import markdown_table

    over, rank, arms = overall(df), ranking(df), arm_table(df)
    times = over.assign(packed_over_solo=over.s_packed / over.s_solo)
    times["load_1min"] = [float(g.load_1min.mean()) for _, g in df.groupby("world", sort=False)] + (
        [float(df.load_1min.mean())] if len(times) > len(df.world.unique()) else []
    )
    keys = ["world", "arm"]
    worlds = "; ".join(
        f"**{w['world']}**: {_seeds(w['seeds'])} × {w['arms']} arms, lr {w['lr']:g}, "
        f"warm-up 0, ≤ {w['epochs']} epochs, patience {w['patience']}, words/GRU/joint {w['model']}, "
        f"{w['train_images']:,} training / {w['dev_images']} validation / {w['test_images']:,} test images"
        for w in meta["worlds"]
    )
    not_run = "; ".join(w["not_run"] for w in meta["worlds"] if w.get("not_run"))
    lines = [
        "# Packed against solo training on this CPU: the X1 arms on the synthetic worlds",
        "",
        f"Produced by `{meta['command']}`. Each run is trained twice from the same config and seed: solo "
        "(`coherent_itr.train.train`) and as a member of its arm's pack (`coherent_itr.packed.train_packed`, all the "
        "arm's seeds in one pack as wide as they are). One torch thread, one BLAS thread. Worlds: " + worlds + ". "
        "Setting: the profile's own lr without warm-up (a point of its tuning grid) for every arm, not each arm's "
        "tuned one: the engines' agreement is measured, not the arms. Test RSUM: the selected checkpoint's."
        + (f" Not run: {not_run}." if not_run else ""),
        "",
        f"Machine: {meta['cpu']} ({meta['processor']}), {meta['cores']} cores, torch {meta['torch']}; "
        f"load average (1/5/15 min) {meta['load_start']} at the start and {meta['load_end']} at the end; the bench "
        f"took {meta['wall_min']:.1f} min. Other processes shared the cores.",
        "",
        "## |packed − solo| of the selected validation RSUM and of the test RSUM",
        "",
        markdown_table(over[["scope", *DIFF_COLUMNS]].round(2), index=False),
        "",
        "`best_epoch_equal`: runs whose two engines selected the same epoch. Runs whose selected validation RSUM is "
        "equal under both engines: "
        + ", ".join(f"{r.scope} {r.val_equal} of {r.runs}" for r in over.itertuples())
        + ". Arms whose every run does: "
        + "; ".join(f"{w}: {', '.join(a) or 'none'}" for w, a in equal_arms(df).items())
        + ".",
        "",
        "For scale, the spread of the validation RSUM of the same configs' tuning rungs on two machines (Flickr8k, "
        "every lr of the grid, 5 epochs after the warm-up; another data set than the runs above):",
        "",
        markdown_table(pd.DataFrame(references()).round(2), index=False),
        "",
        "## The arms' ranking by mean validation RSUM over the seeds",
        "",
        markdown_table(rank.round(3), index=False),
        "",
        "`smallest_gap_solo`: the smallest difference between two arms' solo means (a swap needs a difference of "
        "that size).",
        "",
        "## Wall time per run",
        "",
        markdown_table(times[["scope", *TIME_COLUMNS]].round(2), index=False),
        "",
        "Seconds per run: a solo run's wall time (setup, epochs, validation, test encoding); a pack's wall time "
        "divided by its members. `load_1min`: the 1-minute load average after each arm, averaged. On a CPU the "
        "packed engine runs the GRU as per-step batched matrix products instead of torch's fused kernel, and "
        "each member's loss in turn, so its epochs are slower (a GPU engine); a pack sets up once for all its "
        "members (data, vocabulary, relevance provider) and encodes the test split in one pass, which weighs most "
        "in short runs of a small model.",
        "",
        "## Per arm",
        "",
        markdown_table(arms[[*keys, *(c for c in DIFF_COLUMNS if c != "test_p90")]].round(2), index=False),
        "",
        markdown_table(
            arms[[*keys, "val_mean_solo", "val_mean_packed", "rank_solo", "rank_packed", "s_solo", "s_packed"]].round(
                {"val_mean_solo": 2, "val_mean_packed": 2, "s_solo": 1, "s_packed": 1}
            ),
            index=False,
        ),
        "",
        f"Every run: `{NAME}.csv`.",
        "",
    ]
    return "\n".join(lines)


def _seeds(n: int) -> str:
    return "seed 0" if n == 1 else f"seeds 0–{n - 1}"


def _world_meta(profile_name: str, seeds: int, groups, setting: dict, splits) -> dict:
    from reproduce.spec.profiles import profile_for

    prof = profile_for(profile_name, "synthetic")
    c = groups[0][2][0]
    missing = []
    if seeds < len(prof.seeds):
        missing.append(f"seeds {seeds}–{len(prof.seeds) - 1} of the profile's {len(prof.seeds)}")
    if setting["epochs"] < int(prof.model["epochs"]):
        missing.append(f"epochs {setting['epochs'] + 1}–{prof.model['epochs']} of its schedule")
    return {
        "world": profile_name,
        "seeds": seeds,
        "arms": len(groups),
        "lr": setting["lr"],
        "epochs": setting["epochs"],
        "patience": c.early_stop_patience,
        "model": f"{c.word_dim}/{c.text_hidden}/{c.embed_dim}, batch {c.batch_size}",
        "train_images": splits.train.n_images,
        "dev_images": splits.dev.n_images,
        "test_images": splits.test.n_images,
        "not_run": f"{profile_name}: " + ", ".join(missing) if missing else "",
    }


def cpu_model() -> str:
    """``/proc/cpuinfo``'s model name, else the platform's processor or machine type."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world", action="append", help="PROFILE:SEEDS[:EPOCHS] (repeatable; default smoke:5 default:2)")
    ap.add_argument("--width", type=int, default=0, help="pack width (0: the arm's seeds, no dummy members)")
    ap.add_argument("--arms", type=int, default=0, help="only the first N X1 arms (0: all)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)

    import torch

    from coherent_itr import data as data_mod
    from coherent_itr.determinism import cpu_identity
    from coherent_itr.io import atomic_write_text

    t0 = time.perf_counter()
    load_start = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    frames, worlds = [], []
    for spec in args.world or DEFAULT_WORLDS:
        profile_name, seeds, *rest = spec.split(":")
        groups, setting = world_groups(profile_name, int(seeds), int(rest[0]) if rest else None, args.arms)
        c = groups[0][2][0]
        splits = data_mod.load_splits(c.data, data_dir=c.data_dir, scale=c.data_scale, seed=c.data_seed)
        worlds.append(_world_meta(profile_name, int(seeds), groups, setting, splits))
        frames.append(measure(profile_name, groups, splits, width=args.width))
    df = pd.concat(frames, ignore_index=True)
    argv_shown = " ".join(sys.argv[1:]) if argv is None else " ".join(argv)
    meta = {
        "command": f"python benchmarks/bench_packed_agreement.py {argv_shown}".strip(),
        "worlds": worlds,
        "cpu": cpu_identity(),
        "processor": cpu_model(),
        "cores": os.cpu_count(),
        "torch": torch.__version__,
        "load_start": load_start,
        "load_end": " / ".join(f"{x:.2f}" for x in os.getloadavg()),
        "wall_min": (time.perf_counter() - t0) / 60,
    }
    text = report(df, meta)
    atomic_write_text(args.out / f"{NAME}.csv", df.to_csv(index=False, float_format="%.6g"))
    atomic_write_text(args.out / f"{NAME}.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
