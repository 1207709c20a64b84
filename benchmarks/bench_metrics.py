"""Benchmark of ``coherent_itr.metrics.evaluate``: wall time and peak memory at the 1K
(1,000 images × 5,000 captions) and 5K (5,000 × 25,000) sizes.

Every case runs in a fresh subprocess so that its peak resident memory (Linux ``VmHWM``, reset
after the inputs are built via ``/proc/self/clear_refs``) belongs to that case alone. Inputs are
float32 like a model's output: a similarity matrix from noisy embeddings, a continuous pseudo
relevance in [0, 1], a discrete "true" relevance (ties), and 6,000 sparse expert judgements
(Flickr8k has 5,822).

Cases:
* ``full`` — every metric (binary, i2t mAP, CS@K, τ, NDCG, NCS, SR, human agreement and human
  positives) against pseudo and true relevance; CS@{100, 200, 1000} at 1K (ladder Table I) and
  CS@{500, 5000} at 5K (ladder Table II);
* ``coherence/<backend>`` (1K only) — CS@{100, 200, 1000} and τ alone (and binary recall), with
  the default ``fast`` backend (the numba one-pass discordant-pair counter) and with ``scipy``
  (public ``scipy.stats.kendalltau`` per query and per K).

The machine may be shared: run it alone, and compare the ``seconds`` column with care.

Usage: ``python benchmarks/bench_metrics.py [--sizes 1k 5k] [--out results/benchmarks]``
Writes ``metrics.csv`` and ``metrics.md`` atomically.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

SIZES = {"1k": (1000, 5000), "5k": (5000, 25000)}
ROOT = Path(__file__).resolve().parents[1]


def _status_mb(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def make_inputs(n_img: int, n_cap: int, seed: int = 0):
    import numpy as np

    from coherent_itr.metrics import HumanJudgements

    rng = np.random.default_rng(seed)
    cpi = n_cap // n_img
    img = np.arange(n_cap) // cpi
    d = 64
    z = rng.standard_normal((n_img, d), dtype=np.float32)
    zn = z / np.linalg.norm(z, axis=1, keepdims=True)
    iv = z + 1.0 * rng.standard_normal((n_img, d), dtype=np.float32)
    cv = z[img] + 1.2 * rng.standard_normal((n_cap, d), dtype=np.float32)
    iv /= np.linalg.norm(iv, axis=1, keepdims=True)
    cv /= np.linalg.norm(cv, axis=1, keepdims=True)
    sim = iv @ cv.T  # float32, n_img × n_cap
    zc = zn[img] + 0.3 * rng.standard_normal((n_cap, d), dtype=np.float32)
    zc /= np.linalg.norm(zc, axis=1, keepdims=True)
    pseudo = zn @ zc.T
    pseudo += 1.0
    pseudo *= 0.5  # (1 + cos) / 2 in [0, 1]
    true = zn @ zn[img].T
    true += 1.0
    true *= 5.0
    np.round(true, out=true)
    true /= 10.0  # 11 levels: many ties
    k = 6000
    h = HumanJudgements.expert(
        rng.integers(0, n_img, k), rng.integers(0, n_cap, k), rng.integers(3, 13, k) / 3.0
    )  # means of 3 scores on 1–4
    return sim, img, pseudo, true, h


def child(size: str, case: str) -> dict:
    import numpy as np

    from coherent_itr.metrics import evaluate

    n_img, n_cap = SIZES[size]
    sim, img, pseudo, true, h = make_inputs(n_img, n_cap)
    inputs_mb = (sim.nbytes + pseudo.nbytes + true.nbytes) / 2**20
    reset = _reset_peak()
    rss0 = _status_mb("VmRSS")
    t0 = time.perf_counter()
    if case == "full":
        cs_ks = (100, 200, 1000) if size == "1k" else (500, 5000)
        out = evaluate(sim, img, pseudo, true, h, cs_ks=cs_ks)
    else:  # coherence only: CS@{100, 200, 1000} and τ over all candidates (plus the cheap binary recall)
        out = evaluate(
            sim,
            img,
            pseudo,
            true,
            cs_ks=(100, 200, 1000),
            ndcg_ks=(),
            ncs_ks=(),
            sr_ks=(),
            kendall_backend=case.split("/")[1],
        )
    secs = time.perf_counter() - t0
    peak = _status_mb("VmHWM")
    assert all(np.isfinite(v) for v in out.values())
    return {
        "size": size,
        "case": case,
        "n_images": n_img,
        "n_captions": n_cap,
        "seconds": round(secs, 2),
        "peak_rss_mb": round(peak),
        "rss_before_mb": round(rss0),
        "eval_extra_mb": round(peak - rss0),
        "inputs_mb": round(inputs_mb),
        "peak_reset": reset,
        "n_keys": len(out),
        "rsum": round(out["rsum"], 2) if "rsum" in out else "",
        "cs1000_t2i_pseudo": round(out["cs1000_t2i_pseudo"], 4) if "cs1000_t2i_pseudo" in out else "",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    ap.add_argument("--out", default=str(ROOT / "results" / "benchmarks"))
    ap.add_argument("--child", nargs=2, metavar=("SIZE", "CASE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    from coherent_itr.io import atomic_write_text

    cases = []
    for size in args.sizes:
        cases.append((size, "full"))
        if size == "1k":
            cases += [(size, "coherence/fast"), (size, "coherence/scipy")]
    rows = []
    for size, case in cases:
        print(f"[bench_metrics] {size} {case} …", file=sys.stderr, flush=True)
        r = subprocess.run(
            [sys.executable, __file__, "--child", size, case],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
        if r.returncode:
            sys.stderr.write(r.stderr)
            raise SystemExit(f"benchmark case {size} {case} failed")
        rows.append(json.loads(r.stdout.strip().splitlines()[-1]))
        print(f"  {rows[-1]}", file=sys.stderr, flush=True)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    cols = list(rows[0])
    csv = ",".join(cols) + "\n" + "".join(",".join(str(r[c]) for c in cols) + "\n" for r in rows)
    md = [
        f"# Metrics benchmark ({stamp}; {machine})",
        "",
        "`evaluate(...)` on float32 inputs; peak = resident-set high-water mark of a fresh process, "
        "reset after building the inputs; `eval_extra_mb` = peak − RSS before the call.",
        "",
        "| " + " | ".join(cols) + " |",
        "|" + "---|" * len(cols),
    ]
    md += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows]
    out = Path(args.out)
    atomic_write_text(out / "metrics.csv", csv)
    atomic_write_text(out / "metrics.md", "\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
