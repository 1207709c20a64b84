"""Benchmark: forward + backward time of every registered loss (issue 4; claims B7, N5, X3).

For each device (CPU, and CUDA when present), batch size and loss in
``coherent_itr.losses.available()`` (built with its paper defaults), times ``loss(sim, rel)`` plus
``backward()`` to the B×B similarity matrix: median over ``--reps`` repetitions after ``--warmup``
runs, and the ratio to Triplet-HN (``triplet``, max violation) at the same size and device.

With ``--step`` it also times a whole VSE++ training step (image/text encoders forward, loss,
backward, gradient clipping, Adam step) with each loss, relative to the Triplet-HN step.

Inputs are synthetic but realistic: image/caption embeddings whose matched pairs are more
similar; relevance = cosine of simulated caption embeddings with cluster structure, r_ii = 1, in
[−1, 1] (S-BERT-like, as BCLS and the ladder thresholds use). A loss that rejects that range
gets the listwise mapping (1 + r)/2 ∈ [0, 1]; the input used is recorded.

Writes ``results/benchmarks/losses.csv`` and ``results/benchmarks/losses.md`` (atomically).

    .venv/bin/python benchmarks/bench_losses.py                 # loss-only, B = 128 and 512
    .venv/bin/python benchmarks/bench_losses.py --step          # + whole training step
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import io
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

from coherent_itr import losses
from coherent_itr.io import atomic_write_text

ROOT = Path(__file__).resolve().parents[1]

# parameters for losses that have a required argument (no paper default)
REQUIRED_EXAMPLES = {
    "weighted_sum": {"terms": [{"name": "triplet", "weight": 1.0}, {"name": "kendall_sw_hs", "weight": 1.0}]},
}


def make_inputs(b: int, device, seed: int = 0, dim: int = 256):
    g = torch.Generator().manual_seed(seed)
    img = torch.nn.functional.normalize(torch.randn(b, dim, generator=g), dim=1)
    txt = torch.nn.functional.normalize(img + 1.2 * torch.randn(b, dim, generator=g) / dim**0.5, dim=1)
    sim = (img @ txt.T).to(device)
    # caption "sentence embeddings": 12 topics, captions near their topic → relevance spread in [−1, 1]
    topics = torch.nn.functional.normalize(torch.randn(12, 64, generator=g), dim=1)
    which = torch.randint(0, 12, (b,), generator=g)
    cap = torch.nn.functional.normalize(topics[which] + 0.9 * torch.randn(b, 64, generator=g) / 8, dim=1)
    rel = (cap @ cap.T).clamp(-1, 1)
    rel.fill_diagonal_(1.0)
    return sim, rel.to(device)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_interleaved(fns: dict, device, reps: int, warmup: int, slow_s: float = 1.0) -> dict[str, list[float]]:
    """Time each closure ``reps`` times in round-robin order (so load drift on a shared machine
    hits every loss alike) after ``warmup`` calls each. A closure slower than ``slow_s`` on its
    first timed call is repeated only max(3, reps // 2) times."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    sync(device)
    times: dict[str, list[float]] = {k: [] for k in fns}
    budget = {k: reps for k in fns}
    for _ in range(reps):
        for k, fn in fns.items():
            if len(times[k]) >= budget[k]:
                continue
            t0 = time.perf_counter()
            fn()
            sync(device)
            times[k].append(time.perf_counter() - t0)
            if len(times[k]) == 1 and times[k][0] > slow_s:
                budget[k] = max(3, reps // 2)
    return times


# losses whose papers take relevance in [0, 1] (listwise RSC mapping; SAM's φ ≥ 0): tried with (1 + r)/2 first
PREFER_UNIT_INTERVAL = {"sndcg", "listwise", "sam"}


def choose_relevance(crit, sim, rel, name: str):
    """The relevance input the loss accepts: raw cosine in [−1, 1] or (1 + r)/2; None if not needed."""
    if not getattr(crit, "requires_relevance", False):
        return None, "none"
    options = [(rel, "cos[-1,1]"), ((1 + rel) / 2, "(1+cos)/2")]
    if name in PREFER_UNIT_INTERVAL:
        options.reverse()
    for r, label in options:
        try:
            crit(sim.detach().clone().requires_grad_(True), r)
            return r, label
        except ValueError:
            continue
    raise ValueError("rejects both relevance ranges")


def loss_only_closure(name: str, b: int, device):
    """``loss(sim, rel).backward()`` on a fixed B×B leaf ``sim``; returns (closure, relevance label)."""
    sim0, rel0 = make_inputs(b, device)
    crit = losses.build(name, **REQUIRED_EXAMPLES.get(name, {})).to(device)
    rel, rel_label = choose_relevance(crit, sim0, rel0, name)
    sim = sim0.clone().requires_grad_(True)

    def run():
        sim.grad = None
        crit(sim, rel).backward()

    return run, rel_label


class StepBench:
    """One VSE++ model, optimiser and batch shared by every loss (a step's cost does not depend on
    the parameter values): encoders forward, ``loss(v tᵀ, rel)``, backward, clip 2.0, Adam step."""

    def __init__(self, b: int, device, model_kw: dict) -> None:
        from coherent_itr.models import VSEModel

        torch.manual_seed(0)
        self.model = VSEModel(**model_kw).to(device)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=2e-4)
        g = torch.Generator().manual_seed(1)
        self.feats = torch.randn(b, model_kw["feature_dim"], generator=g).to(device)
        self.lengths = torch.randint(8, 21, (b,), generator=g)
        tokens = torch.randint(1, model_kw["vocab_size"], (b, int(self.lengths.max())), generator=g)
        tokens[torch.arange(tokens.shape[1])[None, :] >= self.lengths[:, None]] = 0
        self.tokens = tokens.to(device)
        _, self.rel0 = make_inputs(b, device)
        self.device = device

    def closure(self, name: str):
        crit = losses.build(name, **REQUIRED_EXAMPLES.get(name, {})).to(self.device)
        with torch.no_grad():
            v, t = self.model(self.feats, self.tokens, self.lengths)
        rel, _ = choose_relevance(crit, v @ t.T, self.rel0, name)

        def run():
            v, t = self.model(self.feats, self.tokens, self.lengths)
            loss = crit(v @ t.T, rel)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 2.0)
            self.opt.step()

        return run


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[128, 512])
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--losses", nargs="+", default=None, help="subset of loss names (default: every registered)")
    ap.add_argument(
        "--device", choices=["auto", "cpu", "cuda"], default="auto", help="auto: CPU, plus CUDA when available"
    )
    ap.add_argument("--step", action="store_true", help="also time a whole VSE++ training step per loss")
    ap.add_argument("--step-sizes", type=int, nargs="+", default=[128])
    ap.add_argument("--step-reps", type=int, default=7)
    ap.add_argument("--embed-dim", type=int, default=1024)
    ap.add_argument("--text-hidden", type=int, default=1024)
    ap.add_argument("--feature-dim", type=int, default=1280)
    ap.add_argument("--vocab-size", type=int, default=3000)
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's choice)")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "results" / "benchmarks")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    load_start = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")

    names = args.losses or losses.available()
    unknown = sorted(set(names) - set(losses.available()))
    if unknown:
        ap.error(f"unknown loss(es) {unknown}; valid: {losses.available()}")
    if "triplet" not in names:
        names = ["triplet"] + list(names)
    devices = [torch.device("cpu")]
    if args.device in ("auto", "cuda") and torch.cuda.is_available():
        devices.append(torch.device("cuda"))
    if args.device == "cuda":
        if not torch.cuda.is_available():
            ap.error("--device cuda but CUDA is not available")
        devices = [torch.device("cuda")]
    model_kw = {
        "feature_dim": args.feature_dim,
        "vocab_size": args.vocab_size,
        "embed_dim": args.embed_dim,
        "word_dim": 300,
        "text_hidden": args.text_hidden,
    }

    rows = []
    for device in devices:
        for b in args.sizes:
            block: dict[str, dict] = {}
            fns = {}
            for name in names:
                row = block[name] = {
                    "device": device.type,
                    "B": b,
                    "loss": name,
                    "params": json.dumps(REQUIRED_EXAMPLES.get(name, {}), sort_keys=True),
                }
                try:
                    fns[name], row["rel_input"] = loss_only_closure(name, b, device)
                except Exception as exc:  # noqa: BLE001 - a broken loss is reported, the others still run
                    row["error"] = f"{type(exc).__name__}: {exc}"
            print(f"{device.type} B={b}: timing {len(fns)} losses …", flush=True)
            for name, t in time_interleaved(fns, device, args.reps, args.warmup).items():
                block[name].update({"median_ms": 1e3 * statistics.median(t), "min_ms": 1e3 * min(t), "reps": len(t)})
            if args.step and b in args.step_sizes:
                bench = StepBench(b, device, model_kw)
                step_fns = {}
                for name in fns:
                    try:
                        step_fns[name] = bench.closure(name)
                    except Exception as exc:  # noqa: BLE001
                        block[name]["error"] = f"step: {type(exc).__name__}: {exc}"
                print(f"{device.type} B={b}: timing a training step with {len(step_fns)} losses …", flush=True)
                for name, t in time_interleaved(step_fns, device, args.step_reps, 1).items():
                    block[name].update({"step_median_ms": 1e3 * statistics.median(t), "step_reps": len(t)})
            for name in names:
                row = block[name]
                rows.append(row)
                print(
                    f"{device.type:4s} B={b:4d} {name:16s} "
                    + (f"{row['median_ms']:9.2f} ms" if "median_ms" in row else row.get("error", ""))
                    + (f"   step {row['step_median_ms']:9.1f} ms" if "step_median_ms" in row else ""),
                    flush=True,
                )

    base = {(r["device"], r["B"]): r for r in rows if r["loss"] == "triplet" and "median_ms" in r}
    for r in rows:
        ref = base.get((r["device"], r["B"]))
        if ref and "median_ms" in r:
            r["rel_to_triplet_hn"] = r["median_ms"] / ref["median_ms"]
        if ref and "step_median_ms" in r and "step_median_ms" in ref:
            r["step_rel_to_triplet_hn"] = r["step_median_ms"] / ref["step_median_ms"]

    cols = [
        "device",
        "B",
        "loss",
        "median_ms",
        "min_ms",
        "reps",
        "rel_to_triplet_hn",
        "step_median_ms",
        "step_rel_to_triplet_hn",
        "step_reps",
        "rel_input",
        "params",
        "error",
    ]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in r.items()})
    out_csv = atomic_write_text(args.out_dir / "losses.csv", buf.getvalue())

    load_end = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    cpu_name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    md = [
        "# Loss benchmark: forward + backward of the loss on a B×B similarity matrix",
        "",
        f"{dt.date.today().isoformat()} · torch {torch.__version__} · {cpu_name} · "
        f"{torch.get_num_threads()} torch thread(s) · median of up to {args.reps} runs after {args.warmup} warm-up "
        f"(fewer for losses slower than 1 s), timed round-robin over the losses · 1-min load average "
        f"{load_start:.2f} at start, {load_end:.2f} at end (a shared machine: ratios are more reliable than "
        f"absolute times) · `{' '.join(['benchmarks/bench_losses.py'] + (argv or sys.argv[1:]))}`",
        "",
    ]
    step_cols = args.step
    head = (
        "| device | B | loss | median ms | × Triplet-HN |"
        + (" step ms | step × Triplet-HN |" if step_cols else "")
        + " relevance input |"
    )
    md += [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        if "error" in r:
            md.append(f"| {r['device']} | {r['B']} | `{r['loss']}` | error: {r['error']} |")
            continue
        line = (
            f"| {r['device']} | {r['B']} | `{r['loss']}` | {r['median_ms']:.2f} | "
            f"{r.get('rel_to_triplet_hn', float('nan')):.2f} |"
        )
        if step_cols:
            if "step_median_ms" in r:
                line += f" {r['step_median_ms']:.1f} | {r.get('step_rel_to_triplet_hn', float('nan')):.3f} |"
            else:
                line += " | |"
        md.append(line + f" {r['rel_input']} |")
    if step_cols:
        md += [
            "",
            f"Training step: VSE++ (image Linear {args.feature_dim}→{args.embed_dim}, word 300 + GRU "
            f"{args.text_hidden}, vocab {args.vocab_size}, captions of 8–20 tokens), Adam, grad clip 2.0.",
        ]
    out_md = atomic_write_text(args.out_dir / "losses.md", "\n".join(md) + "\n")
    print(f"wrote {out_csv} and {out_md}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
