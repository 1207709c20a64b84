"""Operations a training update launches per run: the solo engine against the packed engine at E members.

A step on the GPU is bound by launches, not arithmetic (``results/benchmarks/gpu/README.md``), so the kernels a run
needs per update are what a pack can divide by E. This counts, with the profiler on the CPU, the leaf ``aten::``
operations of one whole update — encoders forward, similarities, loss, backward, gradient clip, Adam — at the
default model (B = 128, 128/128/128, 1,280-d image features, captions of 8–16 tokens) for the solo engine
(``nn.GRU``, ``torch.optim.Adam``) and for :mod:`coherent_itr.packed` at E = 1, 8, 32, split into the part the pack
shares (encoders, clip, Adam: one set of operations for all members) and the part it repeats per member (each
member's loss module). Also the CPU time of one update (median of 5, one thread) — on this small CPU a pack is not
faster, which is why the CPU keeps the solo engine. A proxy for the GPU's kernel count, not a GPU timing.

    python benchmarks/bench_packed_ops.py      # → results/benchmarks/packed_ops.md
"""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

import torch  # noqa: E402

from benchmarks.bench_kmeans1d_ops import leaf_ops, wall_ms  # noqa: E402  (the operation count and the timing)
from coherent_itr import losses  # noqa: E402
from coherent_itr.determinism import cpu_identity  # noqa: E402
from coherent_itr.io import atomic_write_text  # noqa: E402
from coherent_itr.models import VSEModel  # noqa: E402
from coherent_itr.packed import PackedAdam, PackedVSE, clip_per_member  # noqa: E402

B, D, W, H, F, V = 128, 128, 128, 128, 1280, 2000
WIDTHS = (1, 8, 32)
LOSSES = ("triplet", "sndcg")


def _batch(e: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    feats = torch.randn(e, B, F, generator=g)
    lens = torch.randint(8, 17, (e, B), generator=g)
    tok = torch.randint(4, V, (e, B, 16), generator=g)
    tok[torch.arange(16).view(1, 1, -1) >= lens.unsqueeze(-1)] = 0
    f = torch.nn.functional.normalize(torch.rand(e, B, 64, generator=g), dim=-1)
    rel = (f @ f.transpose(1, 2)).clamp(0, 1)
    return feats, tok, lens, rel


def solo_update(loss: str):
    torch.manual_seed(0)
    model, crit = VSEModel(F, V, D, W, H), losses.build(loss)
    opt = torch.optim.Adam(model.parameters(), lr=2e-4)
    feats, tok, lens, rel = _batch(1)

    def update():
        v, t = model(feats[0], tok[0], lens[0])
        out = crit(v @ t.T, None if loss == "triplet" else rel[0])
        opt.zero_grad(set_to_none=True)
        out.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 2.0)
        opt.step()

    return update


def packed_update(loss: str, e: int):
    torch.manual_seed(0)
    model = PackedVSE([VSEModel(F, V, D, W, H) for _ in range(e)])
    crits = [losses.build(loss) for _ in range(e)]
    params = list(model.parameters())
    opt = PackedAdam(params)
    feats, tok, lens, rel = _batch(e)
    active = torch.ones(e, dtype=torch.bool)

    def update():
        sim = torch.bmm(model.image(feats), model.text(tok, lens).transpose(1, 2))
        out = torch.stack([c(sim[k], None if loss == "triplet" else rel[k]) for k, c in enumerate(crits)])
        opt.zero_grad()
        out.sum().backward()
        clip_per_member(params, [2.0] * e)
        opt.step([2e-4] * e, active)

    return update


def update_ops(update) -> int:
    """Leaf operations of one update, after a first one that builds Adam's state."""
    update()
    return leaf_ops(update)


def loss_ops(loss: str) -> int:
    crit = losses.build(loss)
    s = torch.randn(B, B, requires_grad=True)
    rel = torch.rand(B, B)
    return leaf_ops(lambda: (crit(s) if loss == "triplet" else crit(s, rel)).backward())


def ms_per_update(update, repeats: int = 5) -> float:
    """Median wall time of ``repeats`` updates after a first one."""
    return wall_ms(update, repeats)[1]


def main() -> int:
    torch.set_num_threads(1)
    rows = []
    for loss in LOSSES:
        solo = solo_update(loss)
        per_loss = loss_ops(loss)
        rows.append((loss, "solo", 1, update_ops(solo), per_loss, ms_per_update(solo)))
        for e in WIDTHS:
            upd = packed_update(loss, e)
            rows.append((loss, "packed", e, update_ops(upd), per_loss, ms_per_update(upd, 3 if e > 8 else 5)))
    lines = [
        "# Operations per run of one training update: solo against packed (leaf aten ops, counted on the CPU)",
        "",
        "Produced by `benchmarks/bench_packed_ops.py` (method: its docstring) on "
        f"{cpu_identity()}, torch {torch.__version__}, python {platform.python_version()}, one thread, load average "
        f"{os.getloadavg()[0]:.2f} when it ended (other processes shared the 2 cores: the times are indicative). "
        f"B = {B}, {D}/{W}/{H}, captions of 8–16 tokens. *Loss ops per member*: the loss's own forward and backward, "
        "which the pack repeats for every member; the rest of the update is one set of operations for the pack.",
        "",
        "| loss | engine | members E | ops per update | ops per run | of which the loss's (per member) | "
        "CPU ms per update | CPU ms per run |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for loss, engine, e, ops, per_loss, ms in rows:
        lines.append(f"| {loss} | {engine} | {e} | {ops} | {ops / e:.0f} | {per_loss} | {ms:.1f} | {ms / e:.1f} |")
    lines += [
        "",
        "On the CPU `nn.GRU` runs as operations per time step too (counted here); on a GPU it is a few cuDNN kernels "
        "and the solo step is captured as a CUDA graph, which the packed step is not yet — so this is the count a "
        "pack divides, not a GPU timing. The packed GRU's operations per time step serve the whole pack; what a pack "
        "does not divide is each member's loss (the last column, repeated E times): a loss over `[E, B, B]` "
        "similarities (batched or `vmap`ped) is the next step. On this CPU an update is no faster per run in a "
        "pack than solo (the last column): the CPU keeps the solo engine.",
        "",
    ]
    out = ROOT / "results" / "benchmarks" / "packed_ops.md"
    atomic_write_text(out, "\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
