"""Check and benchmark: the CUDA path (issue "the papers' own scale on a GPU", items 3–4). Needs a GPU.

1. **losses** — every loss the study trains (:func:`reproduce.spec.experiments.study_losses`) on a planted batch
   (B = 128, float32 similarities in [−1, 1], relevance in [0, 1] with a unit diagonal; TF32 off):
   value and gradient w.r.t. the similarities on CUDA against the same on CPU. Passes when
   ``|Δ value| ≤ 1e-5 · max(1, |value|)`` and ``max |Δ grad| ≤ 1e-5 · max(1, max |grad|)``.
2. **tiny run** — :func:`coherent_itr.train.train` of VSE++ (and of the listwise loss, with the synthetic
   world's true relevance) on the smoke synthetic world, 3 epochs, on CUDA and on CPU: both complete;
   their test RSUM side by side (equal only up to kernel differences: a GRU's cuDNN kernels are not
   the CPU's).
3. **step** — one study training step (``train._train_step``, VSE++ / Triplet-HN, batch 128, the synthetic
   default world's captions) at the ``default`` model (words / GRU / joint 128 / 128 / 128) and the
   ``paper`` model (300 / 1024 / 1024): float32, TF32 and bf16 autocast; the median of timed steps after
   warm-up steps, each synchronised; the study runs in deterministic-kernel mode, so this does too.
4. **parallel** — N processes on the one GPU, each a whole ``train()`` of VSE++ for 2 epochs on the synthetic
   default world (validation each epoch, test evaluation excluded): runs per hour for N = 1, 4, 8, 16 (default
   model) and N = 1, 4 (paper model) — what prices the protocol on such a machine. Each row says its step
   engine (CUDA graphs where the loss allows them, ``COHERENT_ITR_CUDA_GRAPHS=0``: eager).
5. **graphs** — the captured step (:mod:`coherent_itr.cuda_graphs`) against the eager step of the same run state
   (VSE++, batch 128, both model sizes, float32): median ms of a replay and of an eager step, each
   synchronised; and per model, a whole 2-epoch ``train()`` each way: training and validation seconds per
   epoch. On a CPU the replay stand-in runs (a check of the script).
6. **graph_runs** — a smoke run of VSE++ and of the listwise loss captured and eager on the device: how far
   the captured run's validation history and test embeddings are from the eager one's, and whether two
   captured runs of one config are identical. **graph_losses** — the same for every overview arm's loss (2
   epochs, the first a warm-up; a relevance-based loss on the world's true relevance): which losses the GPU
   captures.
7. **packed** — runs side by side in one process (``--runs-per-worker``: threads, each run on its own CUDA stream,
   :func:`reproduce.driver.worker.run_pack`): P processes × K runs each (P × K = 16), every run a whole
   ``train()`` of VSE++ for 6 epochs on the synthetic default world from splits the process loaded once —
   epochs an hour for each (P, K): on an H200, 16 × 1 was fastest and packs failed, so the driver trains one run
   a process on CUDA (**processes16**: that row alone, e.g. with and without CUDA MPS). **packed_identity** — one
   smoke run alone and the same run in a pack of three: identical validation history and test embeddings?
8. **dp_chunk** — the adaptive ladder's k-means DP in the CPU's chunks against one chunk: bit-equal, and how fast.
   **loss_kernels** — one eager loss step's kernels: how many, their summed time against the step's, the longest.

    python benchmarks/bench_cuda.py [--out DIR] [--quick]

Writes ``cuda.md`` and ``cuda.json`` into ``--out`` (default ``results/benchmarks/``) after every part, so
a run cut off by its time limit still leaves what it measured. Without CUDA it says so and exits 2
(``--allow-cpu`` runs every part with CPU standing in for CUDA: a check of this script, not a result).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from coherent_itr import cuda_graphs  # noqa: E402
from coherent_itr import data as data_mod  # noqa: E402
from coherent_itr import losses, metrics  # noqa: E402
from coherent_itr import train as T  # noqa: E402
from coherent_itr.determinism import use_deterministic_kernels  # noqa: E402
from reproduce.driver.worker import side_by_side  # noqa: E402
from reproduce.spec import experiments, profiles  # noqa: E402

TOL = 1e-5
TOL64 = 1e-10
FAILED_LOSS_COLUMNS = ["loss", "params", "value_diff", "grad_max_diff", "error"]  # the report lists failures only
MODELS = {
    "default": dict(profiles.PROFILES["default"].model),
    "paper": dict(profiles.PROFILES["paper"].model),
}


def vsepp_config(model: str, device: str, **over):
    """The overview's VSE++ arm at ``model``'s sizes on the synthetic default world, seed 0."""
    prof = profiles.profile_for(model, "synthetic")
    cfg = experiments.overview_arms(prof)[0].configs(prof)[0]
    return dataclasses.replace(cfg, device=device, data_scale="default", **over)


# --- 1. losses ----------------------------------------------------------------------------------------
def planted(b: int = 128, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    sim = (torch.rand(b, b, generator=g, dtype=torch.float64) * 2 - 1).float()
    sim += 0.5 * torch.eye(b)  # positives above most negatives, as in training
    rel = torch.rand(b, b, generator=g)
    rel.fill_diagonal_(1.0)
    return sim.clamp(-1, 1), rel


def loss_value_grad(name: str, params: dict, sim: torch.Tensor, rel: torch.Tensor, device: str, dtype=torch.float32):
    crit = losses.build(name, **params).to(device)
    s = sim.to(device, dtype).clone().requires_grad_()
    value = crit(s, rel.to(device, dtype) if getattr(crit, "requires_relevance", False) else None)
    value.backward()
    return float(value.detach().cpu()), s.grad.detach().cpu()


def check_losses(dev: str, dtype=torch.float32, tol: float = TOL) -> list[dict]:
    """Every study loss on CUDA against CPU at ``dtype``; float64 separates an implementation difference
    from float32 rounding amplified by a loss's conditioning (a temperature τ scales it by 1/τ). TF32 is off inside
    and restored after: the parts after train with the process's own switches (a run's key names them)."""
    with tf32_off():
        return _check_losses(dev, dtype, tol)


@contextlib.contextmanager
def tf32_off():
    """TF32 off for matmul and cuDNN inside; the switches as they were after."""
    old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def _check_losses(dev: str, dtype, tol: float) -> list[dict]:
    sim, rel = planted()
    rows = []
    for name, params in experiments.study_losses():
        row = {"loss": name, "params": json.dumps(params, sort_keys=True), "dtype": str(dtype).split(".")[-1]}
        try:
            v_cpu, g_cpu = loss_value_grad(name, params, sim, rel, "cpu", dtype)
            v_dev, g_dev = loss_value_grad(name, params, sim, rel, dev, dtype)
            dv, dg = abs(v_dev - v_cpu), float((g_dev - g_cpu).abs().max())
            g_scale = max(1.0, float(g_cpu.abs().max()))
            ok = dv <= tol * max(1.0, abs(v_cpu)) and dg <= tol * g_scale
            row.update(value_cpu=v_cpu, value_diff=dv, grad_max_abs=g_scale, grad_max_diff=dg, passed=bool(ok))
        except Exception as e:  # noqa: BLE001 — a failure is a row of the report, not the end of the check
            row.update(passed=False, error=f"{type(e).__name__}: {e}")
        rows.append(row)
    return rows


# --- 2. tiny runs -------------------------------------------------------------------------------------
def tiny_runs(dev: str) -> list[dict]:
    out = []
    for loss, extra in (("triplet", {}), ("listwise", {"relevance": "true"})):
        for device in (dev, "cpu"):
            cfg = dataclasses.replace(
                vsepp_config("default", device, loss=loss, **extra), data_scale="smoke", epochs=3, warmup_epochs=0
            )
            t0 = time.perf_counter()
            res = T.train(cfg, progress=False)
            test = data_mod.load_splits("synthetic", scale="smoke", seed=cfg.data_seed).test
            sim = np.asarray(res.arrays["test_img"]) @ np.asarray(res.arrays["test_cap"]).T
            out.append(
                {
                    "loss": loss,
                    "device": device,
                    "epochs_run": len(res.history),
                    "best_val_rsum": max(h.get("val_rsum", float("nan")) for h in res.history),
                    "test_rsum": float(metrics.retrieval_metrics(sim, test.image_of_caption)["rsum"]),
                    "wall_s": time.perf_counter() - t0,
                }
            )
    return out


def smoke_configs(dev: str):
    """(loss, config) of VSE++ and of the listwise loss (the world's true relevance) on the smoke world, 3 epochs."""
    for loss, extra in (("triplet", {}), ("listwise", {"relevance": "true"})):
        cfg = vsepp_config("default", dev, loss=loss, **extra)
        yield loss, dataclasses.replace(cfg, data_scale="smoke", epochs=3, warmup_epochs=0)


def graph_backend(dev: str):
    """``None`` on CUDA (real graphs); on a CPU the replay stand-in (a check of this script)."""
    return None if dev == "cuda" else cuda_graphs.ReplayBackend()


@contextlib.contextmanager
def graphs_switched(on: bool):
    """``COHERENT_ITR_CUDA_GRAPHS`` set to ``on`` inside, restored (or unset again) after."""
    old = os.environ.get(cuda_graphs.ENV)
    os.environ[cuda_graphs.ENV] = "1" if on else "0"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(cuda_graphs.ENV)
        else:
            os.environ[cuda_graphs.ENV] = old


def determinism(dev: str) -> list[dict]:
    """The same config and seed twice on ``dev``: identical validation history and test embeddings?"""
    out = []
    for loss, cfg in smoke_configs(dev):
        a, b = (T.train(cfg, progress=False) for _ in range(2))
        va = [h["val_rsum"] for h in a.history]
        vb = [h["val_rsum"] for h in b.history]
        d = float(np.abs(np.asarray(a.arrays["test_img"]) - np.asarray(b.arrays["test_img"])).max())
        out.append(
            {
                "loss": loss,
                "device": dev,
                "val_rsum_a": " ".join(f"{v:.2f}" for v in va),
                "val_rsum_b": " ".join(f"{v:.2f}" for v in vb),
                "same_history": va == vb,
                "test_embedding_max_diff": d,
            }
        )
    return out


# --- 3. step time -------------------------------------------------------------------------------------
def step_times(dev: str, n_steps: int, warm: int) -> list[dict]:
    with tf32_off():  # each mode sets its own switches; the process's come back after
        return _step_times(dev, n_steps, warm)


def _step_times(dev: str, n_steps: int, warm: int) -> list[dict]:
    rows = []
    for model in ("default", "paper"):
        for mode in ("float32", "tf32", "bf16"):
            torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
            torch.backends.cudnn.allow_tf32 = mode == "tf32"
            cfg = vsepp_config(model, dev, bf16=mode == "bf16", warmup_epochs=0)
            run = T._setup(cfg, None, None)
            g = torch.Generator().manual_seed(1234)
            batches = [b for b in T._batches(run.tr.n_images, run.tr.captions_per_image, cfg, g)]
            batches = [b for b in batches if len(b[0]) == cfg.batch_size][: warm + n_steps]
            times = []
            for k, (img, cap) in enumerate(batches):
                if dev == "cuda":
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
                T._train_step(run, img, cap, diagnose=False)
                if dev == "cuda":
                    torch.cuda.synchronize()
                if k >= warm:
                    times.append(time.perf_counter() - t0)
            ms = 1e3 * statistics.median(times)
            rows.append(
                {
                    "model": model,
                    "sizes": f"{cfg.word_dim}/{cfg.text_hidden}/{cfg.embed_dim}",
                    "mode": mode,
                    "step_ms": ms,
                    "steps_timed": len(times),
                    "steps_per_epoch": len(batches) and run.tr.n_captions // cfg.batch_size,
                }
            )
    return rows


# --- 5. the captured step -----------------------------------------------------------------------------
def graph_steps(dev: str, n_steps: int, warm: int) -> list[dict]:
    rows = []
    for model in ("default", "paper"):
        cfg = vsepp_config(model, dev, warmup_epochs=0)
        run = T._setup(cfg, None, None, graph_backend=graph_backend(dev))
        if run.graphs is None:
            raise RuntimeError(f"no graph engine for this run: {run.engine_note}")
        g = torch.Generator().manual_seed(1234)
        batches = [b for b in T._batches(run.tr.n_images, run.tr.captions_per_image, cfg, g)]
        batches = [b for b in batches if len(b[0]) == cfg.batch_size][: 2 * (warm + n_steps)]
        times: dict[str, list[float]] = {"eager": [], "graph": []}
        for k, (img, cap) in enumerate(batches):
            mode = "eager" if k % 2 else "graph"  # interleaved: the same model state for both
            if dev == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            if mode == "graph":
                if not run.graphs.step(img, cap, False, run.step):
                    T._train_step(run, img, cap, diagnose=False)
            else:
                T._train_step(run, img, cap, diagnose=False)
            if dev == "cuda":
                torch.cuda.synchronize()
            run.step += 1
            if k >= 2 * warm:
                times[mode].append(time.perf_counter() - t0)
        run.graphs.end_epoch()
        engine = run.graphs.describe()
        for mode, ts in times.items():
            rows.append(
                {
                    "model": model,
                    "sizes": f"{cfg.word_dim}/{cfg.text_hidden}/{cfg.embed_dim}",
                    "step": mode if mode == "eager" else engine["step"],
                    "step_ms": 1e3 * statistics.median(ts),
                    "steps_timed": len(ts),
                    "graphs": " ".join(engine["graphs"]),
                    "fallback": engine["reason"] or "",
                }
            )
    return rows


def graph_epochs(dev: str, epochs: int) -> list[dict]:
    """A whole train() each way: training and validation seconds per epoch."""
    rows = []
    for model in ("default", "paper"):
        for engine in ("graph", "eager"):
            cfg = vsepp_config(model, dev, epochs=epochs, warmup_epochs=0, early_stop_patience=epochs + 1)
            with graphs_switched(engine == "graph"):
                res = T.train(cfg, progress=False, graph_backend=graph_backend(dev) if engine == "graph" else None)
            t = res.record["timing"]
            rows.append(
                {
                    "model": model,
                    "engine": res.record.get("engine", {}).get("step", "eager"),
                    "epochs": len(res.history),
                    "steps_per_epoch": res.history[0]["n_steps"],
                    "train_s_per_epoch": t["train_s_per_epoch"],
                    "val_s_per_epoch": t["val_s"] / len(res.history),
                    "ms_per_step": 1e3 * t["train_s_per_epoch"] / res.history[0]["n_steps"],
                    "val_rsum": " ".join(f"{h['val_rsum']:.1f}" for h in res.history),
                }
            )
    return rows


# --- 6. captured runs against eager runs ---------------------------------------------------------------
GRAPH_ROW_COLUMNS = [  # what graph_row measures, in the report's order
    "loss",
    "engine",
    "captured_steps",
    "val_rsum_graph",
    "val_rsum_eager",
    "graph_vs_eager_embedding_max_diff",
    "graph_twice_identical",
    "fallback",
]


def graph_row(loss: str, cfg, dev: str) -> dict:
    """``cfg`` trained twice captured and once eager on ``dev``: how far apart, and the two captured runs equal?"""
    g1, g2 = (T.train(cfg, progress=False, graph_backend=graph_backend(dev)) for _ in range(2))
    with graphs_switched(False):
        eager = T.train(cfg, progress=False)

    def emb_diff(a, b):
        return float(np.abs(np.asarray(a.arrays["test_cap"]) - np.asarray(b.arrays["test_cap"])).max())

    return {
        "loss": loss,
        "engine": g1.record.get("engine", {}).get("step"),
        "captured_steps": g1.record.get("engine", {}).get("captured_steps"),
        "val_rsum_graph": " ".join(f"{h['val_rsum']:.2f}" for h in g1.history),
        "val_rsum_eager": " ".join(f"{h['val_rsum']:.2f}" for h in eager.history),
        "graph_vs_eager_embedding_max_diff": emb_diff(g1, eager),
        "graph_twice_identical": [h["val_rsum"] for h in g1.history] == [h["val_rsum"] for h in g2.history]
        and emb_diff(g1, g2) == 0.0,
        "fallback": g1.record.get("engine", {}).get("reason") or "",
    }


def graph_runs(dev: str) -> list[dict]:
    return [graph_row(loss, cfg, dev) for loss, cfg in smoke_configs(dev)]


def arm_smoke_configs(dev: str, epochs: int):
    """(arm's loss and parameters, config) of every overview arm with its own loss or loss parameters, on the
    smoke world for ``epochs`` epochs, the first a warm-up epoch when there are two or more (the study tunes the
    warm-up, and a loss that honours it is captured apart then); a relevance-based loss reads the world's true
    relevance (no sentence model needed on the GPU machine)."""
    prof = profiles.profile_for("default", "synthetic")
    seen = set()
    for arm in experiments.overview_arms(prof):
        cfg = arm.configs(prof)[0]
        name = f"{cfg.loss} {json.dumps(cfg.loss_params, sort_keys=True)}" if cfg.loss_params else cfg.loss
        if name in seen:
            continue
        seen.add(name)
        extra = {"relevance": "true", "relevance_params": {}} if cfg.relevance else {}
        yield (
            name,
            dataclasses.replace(
                cfg,
                device=dev,
                data_scale="smoke",
                epochs=epochs,
                warmup_epochs=min(1, epochs - 1),  # a warm-up epoch first (tuned in the study): captured apart
                early_stop_patience=epochs + 1,
                **extra,
            ),
        )


def graph_losses(dev: str, epochs: int) -> list[dict]:
    """Every overview arm's loss captured (twice) and eager on the smoke world: which are captured, do two
    captured runs agree, how far is the eager run."""
    rows = []
    for name, cfg in arm_smoke_configs(dev, epochs):
        try:
            rows.append(graph_row(name, cfg, dev))
        except Exception as exc:  # noqa: BLE001 — one loss failing is a finding; the others still run
            rows.append({"loss": name, "fallback": f"failed: {type(exc).__name__}: {exc}"[:300]})
    return rows


def dp_chunk(dev: str, n_rep: int) -> list[dict]:
    """The adaptive ladder's k-means DP in the CPU's cache-sized chunks against all rows in one chunk (what a CUDA
    device runs): are the levels and level counts bit-equal on ``dev``, and how long does each take (eager, mean
    ms of ``n_rep`` calls, synchronised)? Both directions of planted B = 128 batches, as a captured step clusters."""
    from coherent_itr.losses import adaptive_ladder as al

    name = "DP_CHUNK_ELEMENTS_CUDA" if dev == "cuda" else "DP_CHUNK_ELEMENTS"
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    rows = []
    for seed in range(3):
        _, rel = planted(128, seed)
        both = torch.cat([rel, rel.T]).to(dev)
        vals = both[~torch.eye(128, dtype=torch.bool, device=dev).repeat(2, 1)].view(256, 127)
        got = {}
        for label, chunk in (("cpu_chunks", al.DP_CHUNK_ELEMENTS), ("one_chunk", al.DP_CHUNK_ELEMENTS_CUDA)):
            old = getattr(al, name)
            setattr(al, name, chunk)
            try:
                al.adaptive_levels_torch(vals, 2, 4)  # warm
                sync()
                t0 = time.perf_counter()
                for _ in range(n_rep):
                    level, k = al.adaptive_levels_torch(vals, 2, 4)
                sync()
                got[label] = (level, k, (time.perf_counter() - t0) / n_rep * 1e3)
            finally:
                setattr(al, name, old)
        (l1, k1, t1), (l2, k2, t2) = got["cpu_chunks"], got["one_chunk"]
        rows.append(
            {
                "seed": seed,
                "levels_equal": bool(torch.equal(l1, l2)),
                "counts_equal": bool(torch.equal(k1, k2)),
                "rows_differing": int((l1 != l2).any(dim=1).sum()),
                "ms_cpu_chunks": round(t1, 3),
                "ms_one_chunk": round(t2, 3),
            }
        )
    return rows


KERNEL_LOSSES = ("triplet", "ladder", "sam", "adaptive_ladder")


def loss_kernels(dev: str, n_rep: int) -> list[dict]:
    """Where one loss step's device time goes: eager forward + backward of each of :data:`KERNEL_LOSSES` at B = 128
    on a planted batch (both directions' relevance differ, as a captured step clusters them): the synchronised wall
    time of a step (median of ``n_rep``), the kernels one step launches, their summed time, and the longest three.
    Many short kernels against little kernel time says a loss is bound by its launches (a graph helps); kernel time
    near the wall time says by its kernels' work. The adaptive ladder is ≈ 42 % of the default plan's GPU work and
    gained nothing from capture in a run (7.9 s an epoch eager, 8.3 captured, 16 processes). On the CPU standing
    in: the leaf aten operations and their CPU time."""
    from torch.profiler import ProfilerActivity, profile

    cuda = dev == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    sim0, rel0 = planted(128)
    rows = []
    for name in KERNEL_LOSSES:
        crit = losses.build(name).to(dev)
        sim, rel = sim0.to(dev), rel0.to(dev) if getattr(crit, "requires_relevance", False) else None

        def step():
            s = sim.clone().requires_grad_()
            crit(s, rel).backward()

        for _ in range(3):
            step()
        sync()
        walls = []
        for _ in range(n_rep):
            t0 = time.perf_counter()
            step()
            sync()
            walls.append((time.perf_counter() - t0) * 1e3)
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        with profile(activities=activities) as prof:
            step()
            sync()
        if cuda:
            ev = [
                (e.name, e.device_time_total) for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
            ]
        else:
            aten = [e for e in prof.events() if e.name.startswith("aten::")]
            leaf = [e for e in aten if not any(c.name.startswith("aten::") for c in e.cpu_children)]
            ev = [(e.name, e.self_cpu_time_total) for e in leaf]
        by_name: dict[str, float] = {}
        for kernel, us in ev:
            by_name[kernel] = by_name.get(kernel, 0.0) + us
        top = sorted(by_name.items(), key=lambda kv: -kv[1])[:3]
        rows.append(
            {
                "loss": name,
                "step_ms": round(statistics.median(walls), 3),
                "kernels": len(ev),
                "kernel_ms": round(sum(us for _, us in ev) / 1e3, 3),
                "longest": "; ".join(f"{k[:60]} {us / 1e3:.3f} ms" for k, us in top),
            }
        )
    return rows


# --- 4. parallel runs ---------------------------------------------------------------------------------
def child(model: str, dev: str, epochs: int, pack: int = 1) -> int:
    """One process of the parallel parts: ``pack`` whole train() runs of VSE++ (seeds 0..pack-1) side by side, one
    thread each on its own stream, from splits loaded once (as a driver's worker does); one JSON line a finished
    run, each failure on stderr and exit status 1 if there was one."""
    cfgs = [
        vsepp_config(model, dev, epochs=epochs, warmup_epochs=0, early_stop_patience=epochs + 1, seed=i)
        for i in range(pack)
    ]
    splits = data_mod.load_splits(cfgs[0].data, scale=cfgs[0].data_scale, seed=cfgs[0].data_seed) if pack > 1 else None

    def timed(i: int) -> dict:
        t0 = time.perf_counter()
        res = T.train(cfgs[i], splits=splits, progress=False)
        return {"train_s": time.perf_counter() - t0, "epochs": len(res.history)}

    rows = side_by_side(timed, pack)
    for r in rows:
        if isinstance(r, BaseException):
            print(f"run failed: {type(r).__name__}: {r}", file=sys.stderr, flush=True)
        else:
            print(json.dumps(r), flush=True)
    return 1 if any(isinstance(r, BaseException) for r in rows) else 0


def parallel(dev: str, plan: list[tuple], epochs: int) -> list[dict]:
    """``plan``: (model, processes) or (model, processes, engine) with engine ``graph`` (default) or ``eager``,
    or (model, processes, engine, runs side by side in each process)."""
    rows = []
    for model, n, *rest in plan:
        engine = rest[0] if rest else "graph"
        pack = rest[1] if len(rest) > 1 else 1
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        env["COHERENT_ITR_CUDA_GRAPHS"] = "1" if engine == "graph" else "0"
        cmd = [sys.executable, __file__, "--child", model, "--device", dev, "--epochs", str(epochs)]
        cmd += ["--pack", str(pack)]
        t0 = time.perf_counter()
        procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) for _ in range(n)]
        outs = [p.communicate() for p in procs]
        wall = time.perf_counter() - t0
        done = [json.loads(line) for o, _ in outs for line in o.decode().strip().splitlines() if line.startswith("{")]
        errors = [e.decode()[-400:] for (o, e), p in zip(outs, procs) if p.returncode != 0]
        mean_train = statistics.mean(d["train_s"] for d in done) if done else float("nan")
        rows.append(
            {
                "model": model,
                "processes": n,
                "runs_per_process": pack,
                "engine": engine if dev == "cuda" else "eager (CPU)",
                "epochs_each": epochs,
                "finished": len(done),
                "wall_s": wall,
                "train_s_mean": mean_train,
                "epochs_per_hour": 3600 * sum(d["epochs"] for d in done) / wall,
                "errors": errors,
            }
        )
    return rows


def packed_identity(dev: str) -> list[dict]:
    """A smoke run of VSE++ alone, then the same run in a pack of three (seeds s, s + 1, s + 2, one thread and
    stream each): the same validation history and test embeddings?"""
    _, base = next(smoke_configs(dev))
    cfgs = [base.replace(seed=base.seed + i) for i in range(3)]
    splits = data_mod.load_splits(base.data, scale=base.data_scale, seed=base.data_seed)
    alone = T.train(cfgs[0], splits=splits, progress=False)
    packed = side_by_side(lambda i: T.train(cfgs[i], splits=splits, progress=False), 3)
    errors = [f"{type(r).__name__}: {r}" for r in packed if isinstance(r, BaseException)]
    p = None if isinstance(packed[0], BaseException) else packed[0]
    return [
        {
            "loss": base.loss,
            "device": dev,
            "val_rsum_alone": alone.history[-1]["val_rsum"],
            "val_rsum_packed": p.history[-1]["val_rsum"] if p else None,
            "same_history": bool(p) and [h["val_rsum"] for h in alone.history] == [h["val_rsum"] for h in p.history],
            "test_embedding_max_diff": float(
                max(np.abs(alone.arrays[k] - p.arrays[k]).max() for k in ("test_img", "test_cap"))
            )
            if p
            else None,
            "engine": (p.record.get("engine") or {}).get("step") if p else None,
            "errors": errors,
        }
    ]


# --- report -------------------------------------------------------------------------------------------
def environment(dev: str) -> dict:
    env = {
        "date": dt.datetime.now().isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "device": dev,
    }
    if dev == "cuda":
        env.update(gpu=torch.cuda.get_device_name(0), cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version())
    try:
        env["commit"] = subprocess.check_output(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], text=True
        ).strip()
    except (OSError, subprocess.CalledProcessError):
        env["commit"] = "unknown"
    return env


def _table(rows: list[dict], cols: list[str]) -> list[str]:
    def cell(v):
        if isinstance(v, float):
            return f"{v:.3g}" if abs(v) < 1e-2 and v != 0 else f"{v:.2f}"
        return str(v).replace("|", "\\|")

    return ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)] + [
        "| " + " | ".join(cell(r.get(c, "")) for c in cols) + " |" for r in rows
    ]


def _largest(rows: list[dict]) -> str:
    """The largest value and gradient differences of a loss comparison, in words."""
    dv = max(r.get("value_diff", 0) for r in rows)
    dg = max(r.get("grad_max_diff", 0) for r in rows)
    return f"largest value difference {dv:.2e}, largest gradient difference {dg:.2e}"


def write(out: Path, report: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    e = report["environment"]
    lines = [
        "# The CUDA path: losses against CPU, tiny runs, step time, parallel runs",
        "",
        f"{e['date']}; {e.get('gpu', e['device'])}, CUDA {e.get('cuda', '—')}, cuDNN {e.get('cudnn', '—')}, "
        f"torch {e['torch']}, {e['cpus']} CPUs, load average {tuple(round(x, 2) for x in e['load_average'])}, "
        f"commit {e['commit']}. Produced by `benchmarks/bench_cuda.py`.",
    ]
    if "losses" in report:
        rows = report["losses"]
        bad = [r for r in rows if not r["passed"]]
        lines += [
            "",
            f"## 1. Losses, CUDA against CPU (float32, TF32 off, B = 128): {len(rows) - len(bad)} of {len(rows)} "
            f"within {TOL:g} (relative to max(1, |x|))",
            "",
            *_table(bad, FAILED_LOSS_COLUMNS),
            "",
            f"{_largest(rows).capitalize()} (every row: `cuda.json`).",
        ]
    if "losses_float64" in report:
        rows = report["losses_float64"]
        bad = [r for r in rows if not r["passed"]]
        lines += [
            "",
            f"Float64 (tolerance {TOL64:g}): {len(rows) - len(bad)} of {len(rows)} agree; {_largest(rows)}.",
            *([""] + _table(bad, FAILED_LOSS_COLUMNS) if bad else []),
        ]
    if "determinism" in report:
        lines += ["", "## 2b. Same config and seed twice on the device (deterministic-kernel mode)", ""]
        lines += _table(
            report["determinism"],
            ["loss", "device", "val_rsum_a", "val_rsum_b", "same_history", "test_embedding_max_diff"],
        )
    if "tiny_runs" in report:
        lines += ["", "## 2. Tiny runs (smoke synthetic world, 3 epochs, seed 0)", ""]
        lines += _table(report["tiny_runs"], ["loss", "device", "epochs_run", "best_val_rsum", "test_rsum", "wall_s"])
    if "steps" in report:
        lines += ["", "## 3. One training step (VSE++, batch 128, synthetic default world; median ms)", ""]
        lines += _table(report["steps"], ["model", "sizes", "mode", "step_ms", "steps_timed", "steps_per_epoch"])
    for part in ("parallel", "parallel_graphs", "packed", "processes16"):
        if part not in report:
            continue
        lines += ["", "## 4. Runs in parallel on the one GPU (whole train() of VSE++, validation each epoch)", ""]
        lines += _table(
            report[part],
            [
                "model",
                "processes",
                "runs_per_process",
                "engine",
                "epochs_each",
                "finished",
                "wall_s",
                "train_s_mean",
                "epochs_per_hour",
            ],
        )
    if "packed_identity" in report:
        lines += ["", "## 4b. One run alone and in a pack of three (threads, a stream each)", ""]
        lines += _table(
            report["packed_identity"],
            [
                "loss",
                "device",
                "engine",
                "val_rsum_alone",
                "val_rsum_packed",
                "same_history",
                "test_embedding_max_diff",
            ],
        )
    if "graphs" in report:
        lines += ["", "## 5. The captured step against the eager step (VSE++, batch 128, float32; median ms)", ""]
        lines += _table(report["graphs"], ["model", "sizes", "step", "step_ms", "steps_timed", "graphs", "fallback"])
    if "graph_epochs" in report:
        lines += ["", "## 5b. Whole epochs each way (train() of VSE++, synthetic default world)", ""]
        lines += _table(
            report["graph_epochs"],
            [
                "model",
                "engine",
                "epochs",
                "steps_per_epoch",
                "train_s_per_epoch",
                "val_s_per_epoch",
                "ms_per_step",
                "val_rsum",
            ],
        )
    if "graph_runs" in report:
        lines += ["", "## 6. Captured runs against eager runs (smoke synthetic world, 3 epochs, seed 0)", ""]
        lines += _table(report["graph_runs"], GRAPH_ROW_COLUMNS)
    if "graph_losses" in report:
        lines += ["", "## 6b. Every overview arm's loss captured twice and eager (smoke world, true relevance)", ""]
        lines += _table(report["graph_losses"], GRAPH_ROW_COLUMNS)
    if "dp_chunk" in report:
        lines += [
            "",
            "## 7. The adaptive ladder's DP: the CPU's chunks against one chunk (B = 128, both directions)",
            "",
        ]
        lines += _table(
            report["dp_chunk"],
            ["seed", "levels_equal", "counts_equal", "rows_differing", "ms_cpu_chunks", "ms_one_chunk"],
        )
    if "loss_kernels" in report:
        on_gpu = report["environment"].get("device") == "cuda"
        lines += [
            "",
            "## 8. One loss step's kernels (eager forward + backward, B = 128, planted batch)",
            "",
            ("On the GPU: CUDA kernels" if on_gpu else "On the CPU standing in: leaf aten operations")
            + "; times from the profiler, the step's wall time synchronised (median).",
            "",
        ]
        lines += _table(report["loss_kernels"], ["loss", "step_ms", "kernels", "kernel_ms", "longest"])
    for part, err in report.get("errors", {}).items():
        lines += ["", f"**{part} failed**: `{err.splitlines()[-1] if err else ''}`"]
    for name, text in (("cuda.md", "\n".join(lines) + "\n"), ("cuda.json", json.dumps(report, indent=1, default=str))):
        tmp = out / f".{name}.tmp"
        tmp.write_text(text)
        tmp.replace(out / name)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "results" / "benchmarks"))
    ap.add_argument("--quick", action="store_true", help="fewer steps and processes (a check of the script)")
    ap.add_argument("--allow-cpu", action="store_true", help="CPU stands in for CUDA (checks the script only)")
    ap.add_argument("--parts", default="losses,losses_float64,tiny_runs,determinism,steps,parallel")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--device", default="cuda", help=argparse.SUPPRESS)
    ap.add_argument("--epochs", type=int, default=2, help=argparse.SUPPRESS)
    ap.add_argument("--pack", type=int, default=1, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    use_deterministic_kernels()
    if a.child:
        return child(a.child, a.device, a.epochs, a.pack)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    if dev == "cpu" and not a.allow_cpu:
        print("bench_cuda: no CUDA device here (torch.cuda.is_available() is False); nothing measured", file=sys.stderr)
        return 2
    report: dict = {"environment": environment(dev), "errors": {}}
    parts = {
        "losses": lambda: check_losses(dev),
        "losses_float64": lambda: check_losses(dev, torch.float64, TOL64),
        "determinism": lambda: determinism(dev),
        "tiny_runs": lambda: tiny_runs(dev),
        "steps": lambda: step_times(dev, n_steps=5 if a.quick else 40, warm=2 if a.quick else 10),
        "parallel": lambda: parallel(
            dev,
            [("default", 1), ("default", 2)]
            if a.quick
            else [("default", 1), ("default", 4), ("default", 8), ("default", 16), ("paper", 1), ("paper", 4)],
            epochs=1 if a.quick else 2,
        ),
        "parallel_graphs": lambda: parallel(
            dev,
            [("default", 1), ("default", 2, "eager")]
            if a.quick
            else [("default", 1), ("default", 16), ("default", 16, "eager"), ("paper", 16)],
            epochs=1 if a.quick else 2,
        ),
        "graphs": lambda: graph_steps(dev, n_steps=5 if a.quick else 40, warm=2 if a.quick else 10),
        "graph_epochs": lambda: graph_epochs(dev, epochs=1 if a.quick else 2),
        "graph_runs": lambda: graph_runs(dev),
        "graph_losses": lambda: graph_losses(dev, epochs=1 if a.quick else 2),
        "dp_chunk": lambda: dp_chunk(dev, n_rep=3 if a.quick else 50),
        "loss_kernels": lambda: loss_kernels(dev, n_rep=3 if a.quick else 20),
        "packed": lambda: parallel(
            dev,
            [("default", 1, "graph", 1), ("default", 1, "graph", 2)]
            if a.quick
            else [
                ("default", 16, "graph", 1),
                ("default", 4, "graph", 4),
                ("default", 2, "graph", 8),
                ("default", 1, "graph", 16),
            ],
            epochs=1 if a.quick else 6,
        ),
        "processes16": lambda: parallel(
            dev, [("default", 2 if a.quick else 16, "graph", 1)], epochs=1 if a.quick else 6
        ),  # packed's first row alone: e.g. once with CUDA MPS and once without
        "packed_identity": lambda: packed_identity(dev),
    }
    for name in a.parts.split(","):
        t0 = time.perf_counter()
        try:
            report[name] = parts[name]()
        except Exception:  # noqa: BLE001 — later parts still run; the report names the failure
            report["errors"][name] = traceback.format_exc()
            print(report["errors"][name], file=sys.stderr)
        print(f"bench_cuda: {name} {time.perf_counter() - t0:.1f} s", flush=True)
        write(Path(a.out), report)
    return 1 if report["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
