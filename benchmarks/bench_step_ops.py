"""How many operations one loss's forward and backward launches, on the path a captured CUDA step takes.

A captured step is launch-bound (``results/benchmarks/gpu/README.md``): its time grows with the number of kernels
its graph replays. This counts, with the profiler on the CPU, the leaf ``aten::`` operations of each loss's forward
and backward at B = 128 (relevance: unit-norm random features' clamped cosines), with the losses' capture-time
branches taken (``capturing()`` patched True), and for the adaptive ladder with the CPU's DP chunks and with one
chunk (what a CUDA device runs). A proxy for the GPU's kernel count, not a timing. Writes
``results/benchmarks/step_ops.md``.

    python benchmarks/bench_step_ops.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from coherent_itr import losses  # noqa: E402
from coherent_itr.losses import adaptive_ladder  # noqa: E402

LOSSES = ("triplet", "ladder", "adaptive_ladder", "sam", "listwise", "bcls", "sndcg")


def leaf_ops(crit, sim: torch.Tensor, rel: torch.Tensor | None) -> int:
    s = sim.clone().requires_grad_()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        (crit(s) if rel is None else crit(s, rel)).backward()
    ev = [e for e in prof.events() if e.name.startswith("aten::")]
    return sum(1 for e in ev if not any(c.name.startswith("aten::") for c in e.cpu_children))


def main() -> int:
    torch.manual_seed(0)
    b = 128
    sim = torch.randn(b, b)
    f = torch.nn.functional.normalize(torch.rand(b, 384), dim=1)
    rel = (f @ f.T).clamp(0, 1)
    for m in [m for n, m in sys.modules.items() if n.startswith("coherent_itr") and hasattr(m, "capturing")]:
        m.capturing = lambda: True  # the branches a captured step takes (no host reads)
    rows = []
    for name in LOSSES:
        crit = losses.build(name)
        rows.append((name, "", leaf_ops(crit, sim, None if name == "triplet" else rel)))
    adaptive_ladder.DP_CHUNK_ELEMENTS = adaptive_ladder.DP_CHUNK_ELEMENTS_CUDA
    rows.append(
        ("adaptive_ladder", "one DP chunk (a CUDA device's)", leaf_ops(losses.build("adaptive_ladder"), sim, rel))
    )
    lines = [
        "# Operations of one captured step's loss (forward + backward, B = 128; leaf aten ops, counted on the CPU)",
        "",
        "Produced by `benchmarks/bench_step_ops.py`. A proxy for the kernels a captured CUDA step replays.",
        "",
        "| loss | variant | operations |",
        "|---|---|---|",
        *[f"| {n} | {v} | {k} |" for n, v, k in rows],
    ]
    text = "\n".join(lines) + "\n"
    (ROOT / "results" / "benchmarks" / "step_ops.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
