"""Operations and CPU time of one call of the adaptive ladder's level engine: the loss's torch back-end
(``adaptive_levels_torch``) against ``coherent_itr.kmeans1d.adaptive_levels`` (the same levels, tested).

At B = 128 the loss clusters rows of n = B − 1 = 127 off-diagonal relevances: 128 rows for one direction, 256
when a captured step clusters both directions stacked. Rows: unit-norm random features' clamped cosines, as in
``benchmarks/bench_step_ops.py``, with (L_MIN, L_MAX) = (2, 4). Two operation counts, both on the CPU and
proxies for the kernels a CUDA device launches: the profiler's leaf ``aten::`` operations (bench_step_ops.py's
measure, which counts allocations and views too) and the operations a ``TorchDispatchMode`` sees that are not
views or bare allocations. The reference is counted with the CPU's cache-sized DP chunks and with one chunk (a
CUDA device's). Each function is called once before counting, so cached shape constants are not counted. Writes
``results/benchmarks/kmeans1d_ops.md``.

    python benchmarks/bench_kmeans1d_ops.py
"""

from __future__ import annotations

import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from coherent_itr import kmeans1d  # noqa: E402
from coherent_itr.losses import adaptive_ladder  # noqa: E402

#: dispatched operations that launch no kernel
_NO_KERNEL = {"empty", "empty_strided", "empty_like", "new_empty", "new_empty_strided", "detach", "lift_fresh"}


class _Count(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not func.is_view and func.overloadpacket.__name__ not in _NO_KERNEL:
            self.n += 1
        return func(*args, **(kwargs or {}))


def leaf_ops(fn) -> int:
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    ev = [e for e in prof.events() if e.name.startswith("aten::")]
    return sum(1 for e in ev if not any(c.name.startswith("aten::") for c in e.cpu_children))


def dispatched_ops(fn) -> int:
    with _Count() as c:
        fn()
    return c.n


def wall_ms(fn, repeat: int = 25) -> tuple[float, float]:
    """Fastest and median of ``repeat`` single calls (the fastest is the least disturbed by other work)."""
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    times.sort()
    return 1e3 * times[0], 1e3 * times[len(times) // 2]


def main() -> int:
    torch.manual_seed(0)
    b, bounds = 128, (2, 4)
    f = torch.nn.functional.normalize(torch.rand(b, 384), dim=1)
    rel = (f @ f.T).clamp(0, 1)
    off = ~torch.eye(b, dtype=torch.bool)
    one = rel[off].view(b, b - 1)
    g = torch.nn.functional.normalize(torch.rand(b, 384), dim=1)
    other = (f @ g.T).clamp(0, 1)[off].view(b, b - 1)  # a second direction's rows (an asymmetric relevance)
    cases = {"128 × 127 (one direction)": one, "256 × 127 (both directions)": torch.cat([one, other])}
    cpu_chunk = adaptive_ladder.DP_CHUNK_ELEMENTS
    rows = []
    for label, v in cases.items():
        variants = [
            ("adaptive_levels_torch, CPU DP chunks", cpu_chunk, adaptive_ladder.adaptive_levels_torch),
            ("adaptive_levels_torch, one DP chunk", adaptive_ladder.DP_CHUNK_ELEMENTS_CUDA, None),
            ("kmeans1d.adaptive_levels", cpu_chunk, kmeans1d.adaptive_levels),
        ]
        for name, chunk, fn in variants:
            fn = fn or adaptive_ladder.adaptive_levels_torch
            adaptive_ladder.DP_CHUNK_ELEMENTS = chunk
            try:
                call = lambda fn=fn, v=v: fn(v, *bounds)  # noqa: E731
                call()
                rows.append((label, name, leaf_ops(call), dispatched_ops(call), wall_ms(call)))
            finally:
                adaptive_ladder.DP_CHUNK_ELEMENTS = cpu_chunk
        ref, new = adaptive_ladder.adaptive_levels_torch(v, *bounds), kmeans1d.adaptive_levels(v, *bounds)
        assert all(torch.equal(x, y) for x, y in zip(ref, new)), "the engines disagree"
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    lines = [
        "# The adaptive ladder's level engine: operations and CPU time per call (B = 128, (L_MIN, L_MAX) = (2, 4))",
        "",
        "Produced by `benchmarks/bench_kmeans1d_ops.py`. Both functions return the same levels and numbers of",
        "levels (checked here and in `tests/lib/test_kmeans1d.py`). Operations: leaf `aten::` ops under the profiler",
        "(`bench_step_ops.py`'s measure, allocations and views included) and dispatched non-view, non-allocation ops",
        "(closer to the kernels a CUDA device launches). Time: fastest and median of 25 single calls.",
        "",
        f"Machine: {platform.processor() or platform.machine()}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads; load average (1/5/15 min) {load} while measuring (other work ran "
        "beside it; with a load above the core count the medians mostly measure that work, compare the fastest).",
        "",
        "| rows × n | engine | leaf aten ops | dispatched ops | CPU ms per call (fastest / median) |",
        "|---|---|---|---|---|",
        *[f"| {r} | {e} | {a} | {d} | {t[0]:.1f} / {t[1]:.1f} |" for r, e, a, d, t in rows],
    ]
    text = "\n".join(lines) + "\n"
    out = ROOT / "results" / "benchmarks" / "kmeans1d_ops.md"
    out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
