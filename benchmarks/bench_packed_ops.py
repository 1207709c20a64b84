"""Operations a training update launches per run: the solo engine against the packed engine at E members.

A step on the GPU is bound by launches, not arithmetic (``results/benchmarks/gpu/README.md``), so the kernels a run
needs per update are what a pack can divide by E. This counts, with the profiler on the CPU, the leaf ``aten::``
operations of one whole update — encoders forward, similarities, loss, backward, gradient clip, Adam — at the
default model (B = 128, 128/128/128, 1,280-d image features, captions of 8–16 tokens) for the solo engine
(``nn.GRU``, ``torch.optim.Adam``) and for :mod:`coherent_itr.packed` at E = 1, 8, 32, split into the part the pack
shares (encoders, clip, Adam: one set of operations for all members) and the loss. The packed update is counted
twice: with each member's own loss module called in turn (*loop*, E times a loss's operations) and with the
members' losses over ``[E, B, B]`` (*batched*, :class:`coherent_itr.packed_losses.PackedLoss`), beside the loss's
own operations (forward and backward) per member in a loop and per pack batched. Also, unless ``--no-time``, the
CPU time of one update (median of 5, one thread) — on this small CPU a pack is not faster, which is why the CPU
keeps the solo engine. A proxy for the GPU's kernel count, not a GPU timing.

    python benchmarks/bench_packed_ops.py [--out PATH] [--no-time]   # default → results/benchmarks/packed_ops.md
"""

from __future__ import annotations

import argparse
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
from coherent_itr.packed_losses import PackedLoss  # noqa: E402

B, D, W, H, F, V = 128, 128, 128, 128, 1280, 2000
WIDTHS = (1, 8, 32)
LOSSES = ("triplet", "sndcg", "ladder", "adaptive_ladder")


def _batch(e: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    feats = torch.randn(e, B, F, generator=g)
    lens = torch.randint(8, 17, (e, B), generator=g)
    tok = torch.randint(4, V, (e, B, 16), generator=g)
    tok[torch.arange(16).view(1, 1, -1) >= lens.unsqueeze(-1)] = 0
    f = torch.nn.functional.normalize(torch.rand(e, B, 64, generator=g), dim=-1)
    rel = (f @ f.transpose(1, 2)).clamp(0, 1)
    return feats, tok, lens, rel


def _rel_arg(loss: str, rel):
    return None if loss == "triplet" else rel


def solo_update(loss: str):
    torch.manual_seed(0)
    model, crit = VSEModel(F, V, D, W, H), losses.build(loss)
    opt = torch.optim.Adam(model.parameters(), lr=2e-4)
    feats, tok, lens, rel = _batch(1)

    def update():
        v, t = model(feats[0], tok[0], lens[0])
        out = crit(v @ t.T, _rel_arg(loss, rel[0]))
        opt.zero_grad(set_to_none=True)
        out.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 2.0)
        opt.step()

    return update


def packed_update(loss: str, e: int, batched: bool):
    """One packed update; the loss per member in a loop (``batched=False``) or over ``[E, B, B]``."""
    torch.manual_seed(0)
    model = PackedVSE([VSEModel(F, V, D, W, H) for _ in range(e)])
    crits = [losses.build(loss) for _ in range(e)]
    packed = PackedLoss(crits, B, "cpu")
    if batched and packed.mode != "batched":
        raise RuntimeError(f"{loss}: no batched form ({packed.reason})")
    params = list(model.parameters())
    opt = PackedAdam(params)
    feats, tok, lens, rel = _batch(e)
    active = torch.ones(e, dtype=torch.bool)

    def update():
        sim = torch.bmm(model.image(feats), model.text(tok, lens).transpose(1, 2))
        if batched:
            out = packed(sim, _rel_arg(loss, rel))[0]
        else:
            out = torch.stack([c(sim[k], _rel_arg(loss, rel[k])) for k, c in enumerate(crits)])
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
    """A member's loss module, forward and backward, on one B × B batch."""
    crit = losses.build(loss)
    s = torch.randn(B, B, requires_grad=True)
    rel = _batch(1)[3][0]  # the updates' relevance (symmetric, as Sentence-BERT's paired cosine)
    return leaf_ops(lambda: crit(s, _rel_arg(loss, rel)).backward())


def batched_loss_ops(loss: str, e: int) -> int:
    """The members' losses over ``[E, B, B]`` (:class:`PackedLoss`, its one host read included), forward and
    backward, after a first call (the k-means DP caches its index tensors per shape)."""
    packed = PackedLoss([losses.build(loss) for _ in range(e)], B, "cpu")
    s = torch.randn(e, B, B, requires_grad=True)
    rel = _batch(e)[3]

    def call():
        packed(s, _rel_arg(loss, rel))[0].sum().backward()

    call()
    return leaf_ops(call)


def ms_per_update(update, repeats: int = 5) -> float:
    """Median wall time of ``repeats`` updates after a first one."""
    return wall_ms(update, repeats)[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "results" / "benchmarks" / "packed_ops.md"), help="the report")
    ap.add_argument("--no-time", action="store_true", help="count operations only (no CPU timing)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)

    def ms(update, repeats):
        return None if args.no_time else ms_per_update(update, repeats)

    rows = []
    for loss in LOSSES:
        solo = solo_update(loss)
        per_loss = loss_ops(loss)
        rows.append((loss, "solo", 1, update_ops(solo), per_loss, "", ms(solo, 5)))
        for e in WIDTHS:
            for batched in (False, True):
                upd = packed_update(loss, e, batched)
                own = batched_loss_ops(loss, e) if batched else per_loss * e
                kind = "packed, batched loss" if batched else "packed, loss loop"
                rows.append((loss, kind, e, update_ops(upd), per_loss, own, ms(upd, 3 if e > 8 else 5)))
                del upd
    timed = "" if args.no_time else "one thread, "
    lines = [
        "# Operations per run of one training update: solo against packed (leaf aten ops, counted on the CPU)",
        "",
        "Produced by `benchmarks/bench_packed_ops.py` (method: its docstring) on "
        f"{cpu_identity()}, torch {torch.__version__}, python {platform.python_version()}, {timed}load average "
        f"{os.getloadavg()[0]:.2f} when it ended (other processes shared the 2 cores"
        + ("" if args.no_time else ": the times are indicative")
        + f"). B = {B}, {D}/{W}/{H}, captions of 8–16 tokens. *Loss ops, one member*: a member's loss module, "
        "forward and backward, on its B × B batch; *loss ops, whole pack*: what the pack's update spends on the "
        "losses — E times a member's in the loop, one `PackedLoss` call over `[E, B, B]` batched; the rest "
        "of the update is one set of operations for the pack.",
        "",
        "| loss | engine | members E | ops per update | ops per run | loss ops, one member | "
        "loss ops, whole pack | loss ops per run | CPU ms per update | CPU ms per run |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for loss, engine, e, ops, per_loss, own, t in rows:
        pack = per_loss if own == "" else own
        times = "— | —" if t is None else f"{t:.1f} | {t / e:.1f}"
        lines.append(
            f"| {loss} | {engine} | {e} | {ops} | {ops / e:.0f} | {per_loss} | {pack} | {pack / e:.0f} | {times} |"
        )
    lines += [
        "",
        "On the CPU `nn.GRU` runs as operations per time step too (counted here); on a GPU it is a few cuDNN kernels "
        "and the solo step is captured as a CUDA graph, which the packed step is not yet — so this is the count a "
        "pack divides, not a GPU timing. The packed GRU's operations per time step serve the whole pack; with the "
        "losses batched over `[E, B, B]` the loss's operations serve the whole pack too, so a run's operations per "
        "update fall with E for every loss above (the adaptive ladder's k-means DP included: one "
        "`kmeans1d.adaptive_levels` call for every row of every member).",
        "",
    ]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, "\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
