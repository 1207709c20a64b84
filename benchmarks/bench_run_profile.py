"""Benchmark: where a default-profile run's time goes, and how far the study's step is from a bare step.

Profiles one default-profile run (the profile's model: VSE++ GRU-128 over 128-d words, joint space
128, batch 128 — ``reproduce.spec.profiles._GRU128``; Triplet-HN, lr 2e-3, one torch thread, one BLAS
thread) on the synthetic default world — or on Flickr8k with ``--data flickr8k`` (needs
``FLICKR8K_DIR`` and the prepared features) — phase by phase, through the library's own training
steps (:mod:`coherent_itr.train`):

* ``data_load`` — ``load_splits`` (from the data cache when it is warm: the note says which);
* ``setup`` — vocabulary, tokenisation, model, loss, optimiser (``train._setup``);
* ``batching`` — one epoch of ``_batches`` plus the per-batch token slicing, without the model;
* ``relevance_build`` / ``relevance_lookup`` — the relevance provider a relevance-trained loss
  uses (synthetic: ``true``; Flickr8k: ``sbert``), built once, then one epoch of batch look-ups;
* ``study_step`` — ``train._train_step`` without diagnostics (float32 and bf16 autocast of the
  encoders; bf16 is only worth it on CPUs with AMX-BF16 or on GPUs — the note records the CPU);
* ``diag_step`` — the same step with tangent-gradient diagnostics (``retain_grad`` + stats);
* ``bare_step`` — encoders forward + Triplet-HN forward/backward + gradient clipping + Adam, on
  the same batches, nothing else (float32 and bf16): the floor the study's step is compared with.
  The three steps are interleaved batch by batch (medians), so load on a shared machine affects
  them alike;
* ``validate`` — ``train._validate`` (what selection and the health record need);
* ``test_encode`` — encoding the test split; ``test_eval`` — every test metric
  (``evaluation.evaluate_run`` when present, else ``evaluate_embeddings``; the first call also
  builds the yardsticks' relevance matrices, later calls hit their caches);
* ``run_wall`` — ``train()`` end to end (``--quick``: 1 epoch, else the profile's 3) plus
  ``test_eval``, against ``n_steps × study_step`` (goal: wall ≤ 1.5× the training steps).

FLOP arithmetic of a step (multiply-add = 2 FLOP; backward ≈ 2× forward):
GRU forward per token 6·H·(W + H) (three gates, input and hidden matmuls), image projection
2·F·D per image, similarities 2·B²·D; step ≈ 3 × forward. Σ tokens is measured on the batches.

Goals (issue "compute"): study step ≤ 1.3× bare step; run wall ≤ 1.5× its training steps.
The machine's load average is recorded before and after: numbers taken on a busy machine are
not final.

    .venv/bin/python benchmarks/bench_run_profile.py [--data synthetic|flickr8k] [--quick]

Writes ``results/benchmarks/run_profile.csv`` and ``run_profile.md`` (``--data flickr8k``:
``run_profile_flickr8k.*``), atomically.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import io
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from coherent_itr import data as data_mod
from coherent_itr import evaluation, losses
from coherent_itr import train as T
from coherent_itr.config import Config
from coherent_itr.io import atomic_write_text
from coherent_itr.models import VSEModel

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from reproduce.spec.profiles import _GRU128  # noqa: E402

DEFAULT_MODEL = dict(
    **{k: _GRU128[k] for k in ("embed_dim", "word_dim", "text_hidden", "batch_size", "sampling")},
    lr=2e-3,
    device="cpu",
    loss="triplet",
)


def _load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def _has_amx() -> bool:
    try:
        return " amx_bf16" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


def _timed(fn, *a, **kw):
    t0 = time.perf_counter()
    out = fn(*a, **kw)
    return out, time.perf_counter() - t0


def _epoch_batches(run: T._Run, n: int | None = None) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(1234)
    out = []
    for b in T._batches(run.tr.n_images, run.tr.captions_per_image, run.config, g):
        if len(b[0]) == run.config.batch_size:
            out.append(b)
        if n is not None and len(out) >= n:
            break
    return out


def _bare_stepper(run: T._Run, bf16: bool):
    """A fresh model of the same sizes; the step: encoders, Triplet-HN, backward, clip, Adam — nothing else."""
    c = run.config
    torch.manual_seed(0)
    model = VSEModel(run.tr.features.shape[1], len(run.vocab), c.embed_dim, c.word_dim, c.text_hidden)
    crit = losses.build("triplet")
    opt = torch.optim.Adam(model.parameters(), lr=c.lr)
    model.train()

    def step(img_idx, cap_idx, tok, lens):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            v, t = model(run.feats[img_idx], tok, lens)
        loss = crit(v.float() @ t.float().T)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), c.grad_clip)
        opt.step()

    return step


def _flops(run: T._Run, batches) -> tuple[float, float]:
    """(FLOP per step, mean Σ tokens per batch) from the module docstring's arithmetic."""
    c = run.config
    tokens = float(np.mean([int(run.lengths[cap].sum()) for _, cap in batches]))
    b, f, d, w, h = c.batch_size, run.tr.features.shape[1], c.embed_dim, c.word_dim, c.text_hidden
    fwd = 6 * h * (w + h) * tokens + 2 * f * d * b + 2 * b * b * d + (2 * h * d * b if h != d else 0)
    return 3 * fwd, tokens


def profile(data: str, quick: bool, cache_dir: str | None) -> tuple[list[dict], dict]:
    torch.set_num_threads(1)
    n_steps = 20 if quick else 60
    cfg = Config(
        data=data,
        data_scale="default",
        **DEFAULT_MODEL,
        epochs=1 if quick else 3,
        lr_decay_epoch=3 if data == "synthetic" else 2,
    )
    rows: list[dict] = []

    def add(phase, seconds, count=1, unit="call", note=""):
        rows.append(
            {
                "data": data,
                "phase": phase,
                "total_s": round(seconds, 4),
                "count": count,
                "per_unit_ms": round(1000 * seconds / max(count, 1), 3),
                "unit": unit,
                "note": note,
            }
        )

    meta = {"load_before": _load(), "cpu_capability": torch.backends.cpu.get_cpu_capability(), "amx": _has_amx()}
    with threadpool_limits(limits=1, user_api="blas"):
        _, s = _timed(T.use_deterministic_kernels)
        add(
            "first_call_imports", s, note="torch.use_deterministic_algorithms imports torch._inductor: once per process"
        )
        splits, s = _timed(data_mod.load_splits, data, data_dir=cfg.data_dir, scale="default", cache_dir=cache_dir)
        add("data_load", s, note="load_splits (data cache as found)")
        run, s = _timed(T._setup, cfg, splits, cache_dir)
        add("setup", s, note="vocabulary, tokens, model, loss, optimiser")

        def batching():
            k = 0
            for img, cap in T._batches(
                run.tr.n_images, run.tr.captions_per_image, cfg, torch.Generator().manual_seed(0)
            ):
                lens = run.lengths[cap]
                run.tokens[cap][:, : int(lens.max())]
                run.feats[img]
                k += 1
            return k

        k, s = _timed(batching)
        add("batching", s, k, "batch", "one epoch of _batches + token/feature slicing")
        meta["steps_per_epoch"] = k

        rel_name = "true" if data == "synthetic" else "sbert"
        prov, s = _timed(data_mod.relevance_provider, rel_name, run.tr, cache_dir=cache_dir)
        add("relevance_build", s, note=f"provider '{rel_name}' over the training split")
        batches_all = _epoch_batches(run)
        t0 = time.perf_counter()
        for img, cap in batches_all:
            prov.batch(img.numpy(), cap.numpy())
        add("relevance_lookup", time.perf_counter() - t0, len(batches_all), "batch", f"'{rel_name}' B×B look-ups")

        batches = batches_all[: n_steps + 3]
        flop, tokens = _flops(run, batches)
        meta.update(flop_per_step=flop, tokens_per_batch=tokens)
        pre = []
        for img, cap in batches:  # tokens sliced beforehand: the bare step does none of it
            lens = run.lengths[cap]
            pre.append((img, cap, run.tokens[cap][:, : int(lens.max())], lens))
        for label, bf16 in (("float32", False), ("bf16", True)):
            # study, diagnostic and bare steps interleaved batch by batch, so a busy machine's noise hits all three
            run.config = cfg.replace(bf16=bf16)
            bare = _bare_stepper(run, bf16)
            kinds = {
                "study": lambda b, p: T._train_step(run, *b, False),
                "diag": lambda b, p: T._train_step(run, *b, True),
                "bare": lambda b, p: bare(*p),
            }
            times = {k: [] for k in kinds}
            for i, (b, p) in enumerate(zip(batches, pre)):
                for k, fn in kinds.items():
                    t0 = time.perf_counter()
                    fn(b, p)
                    if i >= 3:  # the first 3 batches warm up
                        times[k].append(time.perf_counter() - t0)
            notes = {
                "study": "train._train_step, no diagnostics",
                "diag": "train._train_step with tangent diagnostics",
                "bare": f"encoders + Triplet-HN fwd/bwd + clip + Adam; {flop / 1e9:.2f} GFLOP/step",
            }
            for k, ts in times.items():
                add(f"{k}_step_{label}", sum(ts), len(ts), "step", notes[k])
                meta[f"{k}_step_{label}_median_ms"] = 1000 * statistics.median(ts)
        run.config = cfg

        vals = [_timed(T._validate, run)[1] for _ in range(3)]
        add("validate", sum(vals), 3, "pass", f"{run.dev.n_images} images, {run.dev.n_captions} captions")
        (img_e, cap_e), s = _timed(T.encode_split, run.model, splits.test, run.vocab, run.device)
        add("test_encode", s, note=f"{splits.test.n_images} images")

    res, wall = _timed(T.train, cfg, splits, False, cache_dir)
    meta["run_train_s"] = res.record["timing"]["train_s"]
    meta["run_n_steps"] = sum(h["n_steps"] for h in res.history)
    add("run_train_fn", wall, note=f"train() end to end, {cfg.epochs} epoch(s), {meta['run_n_steps']} steps")

    def evaluate():
        if hasattr(evaluation, "evaluate_run"):
            return evaluation.evaluate_run(res, splits=splits, cache_dir=cache_dir)
        return evaluation.evaluate_embeddings(
            res.arrays["test_img"], res.arrays["test_cap"], splits.test, cfg.eval_fold_size, cache_dir
        )

    _, s = _timed(evaluate)
    add("test_eval_first", s, note="every test metric, first call in the process (yardsticks built or read from disk)")
    _, s = _timed(evaluate)
    add("test_eval", s, note="every test metric, yardsticks in memory (every later run of a worker)")
    meta["run_wall_s"] = wall + s
    meta["load_after"] = _load()
    return rows, meta


def summary(meta: dict) -> list[tuple[str, str, str]]:
    steps = meta["run_n_steps"] * meta["study_step_float32_median_ms"] / 1000
    out = [
        (
            "bare step float32 (ms)",
            f"{meta['bare_step_float32_median_ms']:.1f}",
            f"{meta['flop_per_step'] / 1e9:.2f} GFLOP → "
            f"{meta['flop_per_step'] / meta['bare_step_float32_median_ms'] / 1e6:.1f} GFLOP/s",
        ),
        ("bare step bf16 (ms)", f"{meta['bare_step_bf16_median_ms']:.1f}", ""),
        (
            "study step float32 (ms)",
            f"{meta['study_step_float32_median_ms']:.1f}",
            f"{meta['study_step_float32_median_ms'] / meta['bare_step_float32_median_ms']:.2f}× bare (goal ≤ 1.3×)",
        ),
        (
            "study step bf16 (ms)",
            f"{meta['study_step_bf16_median_ms']:.1f}",
            f"{meta['study_step_bf16_median_ms'] / meta['bare_step_bf16_median_ms']:.2f}× bare bf16",
        ),
        (
            "diagnostic step float32 (ms)",
            f"{meta['diag_step_float32_median_ms']:.1f}",
            f"{meta['diag_step_float32_median_ms'] / meta['study_step_float32_median_ms']:.2f}× study step "
            "(paid every k steps only)",
        ),
        (
            "run wall (s)",
            f"{meta['run_wall_s']:.1f}",
            f"{meta['run_wall_s'] / steps:.2f}× its {meta['run_n_steps']} training steps ({steps:.1f} s) "
            "(goal ≤ 1.5×); "
            "train() + warm test evaluation",
        ),
        (
            "train() epoch loops (s)",
            f"{meta['run_train_s']:.1f}",
            f"{meta['run_train_s'] / steps:.2f}× the steps alone",
        ),
    ]
    return out


def write(rows: list[dict], meta: dict, data: str, quick: bool) -> None:
    out = ROOT / "results" / "benchmarks"
    out.mkdir(parents=True, exist_ok=True)
    stem = "run_profile" if data == "synthetic" else f"run_profile_{data}"
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
    atomic_write_text(out / f"{stem}.csv", buf.getvalue())
    lines = [
        f"# Run profile ({data}, default profile{', --quick' if quick else ''})",
        "",
        f"{dt.datetime.now().isoformat(timespec='seconds')}; {platform.machine()}, {os.cpu_count()} CPUs, "
        f"torch {torch.__version__} (CPU capability {meta['cpu_capability']}, AMX-BF16 "
        f"{'present' if meta['amx'] else 'absent'}), one torch thread, one BLAS thread; "
        "load average (1/5/15 min) before "
        f"{meta['load_before']}, after {meta['load_after']}. Steps per epoch {meta['steps_per_epoch']}, "
        f"Σ tokens per batch {meta['tokens_per_batch']:.0f}. Produced by `benchmarks/bench_run_profile.py`.",
        "",
        "| quantity | value | against |",
        "|---|---|---|",
    ]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in summary(meta)]
    lines += ["", "| phase | total s | count | ms per unit | unit | note |", "|---|---|---|---|---|---|"]
    lines += [
        f"| {r['phase']} | {r['total_s']} | {r['count']} | {r['per_unit_ms']} | {r['unit']} | {r['note']} |"
        for r in rows
    ]
    atomic_write_text(out / f"{stem}.md", "\n".join(lines) + "\n")
    print("\n".join(lines))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", choices=("synthetic", "flickr8k"), default="synthetic")
    ap.add_argument("--quick", action="store_true", help="20 timed steps and a 1-epoch run instead of 60 and 3")
    ap.add_argument("--cache-dir", default=None, help="cache root (default: $COHERENT_ITR_CACHE)")
    args = ap.parse_args(argv)
    if args.data == "flickr8k" and not os.environ.get("FLICKR8K_DIR"):
        print("--data flickr8k needs FLICKR8K_DIR", file=sys.stderr)
        return 2
    rows, meta = profile(args.data, args.quick, args.cache_dir)
    write(rows, meta, args.data, args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
