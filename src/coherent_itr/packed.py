"""Many runs as one model: E training runs that share a data set, a model shape and a loss, trained together with a
leading member dimension so that every kernel serves all of them (HFTA, Wang et al., MLSys 2021; PyTorch's model
ensembling recipe). A GPU engine: on a small CPU a pack is slower per run than the solo loop's fused GRU kernel,
and the CPU keeps :func:`coherent_itr.train.train` and its run keys.

What each member keeps of its own (as in :func:`coherent_itr.train.train`, run by run):

* its parameters, drawn from its seed exactly as the solo run draws them (:class:`PackedVSE` stacks one
  :class:`coherent_itr.models.VSEModel` per member);
* its batch order, from its own generator seeded as the solo run's (:func:`coherent_itr.train._batches`);
* its loss, a module of its own (its parameters, its warm-up switch, its random draws): the pack's similarities are
  ``[E, B, B]`` and member e's loss reads ``sim[e]`` only — computed for every member at once over ``[E, B, B]``
  where the loss has a batched form (:mod:`coherent_itr.packed_losses`: equal to the member's module, bit for bit on
  the CPU), else by each member's module in turn; its relevance gathered on the device where the provider is a
  table;
* its Adam state, learning rate and schedule, step count and gradient-norm clip (:class:`PackedAdam`,
  :func:`clip_per_member`);
* its selection and early stopping: a member that stops is frozen (its update masked), its best checkpoint kept
  on the device; validation of every member in one pass.

**Numerics.** A member's numbers must not depend on its neighbours or its slot. Every operation is per member
(batched matrix products, element-wise arithmetic, reductions along a member's own row); the GRU runs one time
step at a time with each step's input projection of fixed shape (B × W), so the width of the pack's longest
caption changes how many steps run, never the arithmetic of a member's own steps (a GRU is causal; the steps
after a caption's last token get exactly zero gradient). Packs are padded to a fixed width with dummy members
(replicas of the first member, discarded) so that the pack's shape is the same whoever is in it.
``tests/lib/test_packed.py`` holds one config's record and embeddings bit-equal in different packs and slots.

The packed GRU is the recurrence of :class:`torch.nn.GRU` written as matrix products, not its fused kernel: a
packed run is not bit-equal to its solo run, and a packed run's key must name the engine and the pack width (a
packed result is never served for a solo key, nor the reverse). A member's record is a solo run's: its history
with the losses' per-step diagnostics averaged per epoch, the sampled steps' tangent-gradient statistics
(``grad_diag_every``) in its iterations. Not packed: bf16 autocast and a training subset (``train_fraction`` < 1
gives each seed its own vocabulary); :func:`solo_reason` says why, and such a config trains solo.
"""

from __future__ import annotations

import math
import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
from torch import nn
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

from . import data as data_mod
from . import health, losses, metrics, packed_losses
from .config import Config
from .determinism import resolve_device, seed_everything, use_deterministic_kernels
from .gradients import tangent_gradient_stats
from .models import VSEModel, Vocabulary
from .runs.identity import hash_files
from .packed_model import PackedAdam, PackedVSE, clip_per_member
from .train import RunResult, _batches, _selected_health, _Selector

#: fields every member of a pack shares (the data, the model's shape, the batches' shape, the loss's name)
SHARED_FIELDS = (
    "data",
    "data_scale",
    "data_dir",
    "data_seed",
    "train_fraction",
    "relevance",
    "relevance_params",
    "embed_dim",
    "word_dim",
    "text_hidden",
    "vocab_min_count",
    "loss",
    "batch_size",
    "sampling",
    "device",
    "bf16",
    "eval_fold_size",
    "grad_diag_every",
    "max_eval_captions",
)
DEFAULT_WIDTH = 8  # members per pack, dummies included
# what a member's _Selector copies as its checkpoint: nothing — the pack keeps every member's best weights itself
_NO_WEIGHTS = nn.Module()


#: the modules a packed run executes beside the solo run's frozen files (relative to the package): their sources are
#: the ``source`` of a packed run's key, in no solo run's key
ENGINE_FILES = (
    "packed.py",
    "packed_model.py",
    "packed_losses.py",
    "packed_base.py",
    "packed_graded.py",
    "packed_relevance.py",
    "kmeans1d.py",
)


def engine_source(root: Path | None = None) -> str:
    """sha256 (16 digits) of :data:`ENGINE_FILES` under ``root`` (default: this package), each file's name and
    bytes in that order: :func:`coherent_itr.runs.hash_files`, the hash of a solo run's file set."""
    return hash_files(Path(__file__).parent if root is None else Path(root), ENGINE_FILES)


@lru_cache(maxsize=None)
def engine_identity(width: int) -> dict:
    """What a packed run's key names beside its config and machine (:func:`coherent_itr.runs.run_key`): the engine,
    the pack's width (which fixes the shapes every kernel sees) and the source of the modules it executes
    (:func:`engine_source`). The member's slot is not part of it: the tests hold a member's numbers equal in every
    slot."""
    if not (isinstance(width, int) and width >= 1):
        raise ValueError(f"pack width must be an integer ≥ 1, got {width!r}")
    return {"step": "packed", "width": width, "source": engine_source()}


def signature(config: Config) -> str:
    """The values of :data:`SHARED_FIELDS` of ``config``: configs with equal signatures can share a pack."""
    return repr([(name, getattr(config, name)) for name in SHARED_FIELDS])


def pack_groups(configs: Sequence[Config], width: int) -> list[list[int]]:
    """Indices of ``configs`` in packs of at most ``width`` that can each train together (equal
    :func:`signature`), in the order of each pack's first config; within a pack, the configs' order. A config the
    packed engine cannot train (:func:`solo_reason`) is a group of its own: it trains solo."""
    groups: dict[str, list[list[int]]] = {}
    order: list[list[int]] = []
    for i, c in enumerate(configs):
        if solo_reason(c) is not None:
            order.append([i])
            continue
        packs = groups.setdefault(signature(c), [])
        if not packs or len(packs[-1]) >= width:
            packs.append([])
            order.append(packs[-1])
        packs[-1].append(i)
    return order


def check_packable(configs: Sequence[Config]) -> None:
    """Raise ``ValueError`` naming the field, the members and their values when ``configs`` cannot share a pack."""
    if not configs:
        raise ValueError("a pack needs at least one config")
    first = configs[0]
    for name in SHARED_FIELDS:
        values = [getattr(c, name) for c in configs]
        if any(v != values[0] for v in values):
            odd = [i for i, v in enumerate(values) if v != values[0]]
            raise ValueError(
                f"configs cannot share a pack: {name} differs (member 0: {values[0]!r}; members {odd}: "
                f"{[values[i] for i in odd]!r}); a pack shares {', '.join(SHARED_FIELDS)}"
            )
    why = solo_reason(first)
    if why is not None:
        raise ValueError(f"the packed engine cannot train these runs: {why}; train them solo")


def solo_reason(config: Config) -> str | None:
    """Why the packed engine cannot train ``config`` (it then trains solo, under its solo key), or ``None``."""
    if config.bf16:
        return "bf16=True (the packed engine has no bf16 autocast)"
    if config.train_fraction < 1.0:
        return f"train_fraction={config.train_fraction:g} (each seed draws its own training subset and vocabulary)"
    return None


@dataclass
class _Member:
    config: Config
    generator: torch.Generator
    crit: nn.Module
    # the solo loop's selection and patience rule; the pack keeps the checkpoints, on the device (_NO_WEIGHTS)
    sel: _Selector
    history: list
    stopped: bool = False
    iterations: list = field(default_factory=list)  # the sampled steps' diagnostics (Config.grad_diag_every)
    sums: dict = field(default_factory=dict)  # this epoch's per-step stats, summed
    counts: dict = field(default_factory=dict)


def _lr(c: Config, epoch: int) -> float:
    """VSE++ schedule (:func:`coherent_itr.train._set_lr`): lr · decay^(epoch // lr_decay_epoch), 0-based epoch."""
    return c.lr * c.lr_decay ** (epoch // max(1, c.lr_decay_epoch))


@torch.no_grad()
def _encode(model: PackedVSE, split, vocab: Vocabulary, device, batch: int = 512) -> tuple[torch.Tensor, torch.Tensor]:
    """Every member's embeddings of ``split``'s images and captions, ``[E, n, D]`` on the device."""
    e = model.members
    feats = torch.from_numpy(np.ascontiguousarray(split.features, dtype=np.float32)).to(device)
    img = torch.cat([model.image(feats[s : s + batch].expand(e, -1, -1)) for s in range(0, len(feats), batch)], 1)
    caps = []
    for s in range(0, split.n_captions, batch):
        tok, lens = vocab.encode_batch(split.captions[s : s + batch])
        caps.append(model.text(tok.to(device).expand(e, -1, -1), lens.expand(e, -1)))
    return img, torch.cat(caps, 1)


def _validate(model: PackedVSE, dev, vocab, device, chance: float) -> list[dict]:
    """Per member: validation R@K / RSUM and the health values, as :func:`coherent_itr.train._validate`."""
    img, cap = _encode(model, dev, vocab, device)
    sims = torch.bmm(img, cap.transpose(1, 2)).cpu().numpy()  # one host read for the whole pack
    rows = []
    for sim in sims:
        val = {f"val_{k}": v for k, v in metrics.retrieval_metrics(sim, dev.image_of_caption).items()}
        val.update(health.similarity_health(sim, dev.image_of_caption))
        val["val_rsum_chance"] = chance
        val.update(health.epoch_health(val))
        rows.append(val)
    return rows


def _relevance(provider, device):
    """``(img_idx, cap_idx) -> [E, B, B]`` relevance on the device: one gather from the provider's table where it is
    one (:func:`coherent_itr.packed_losses.device_relevance`), else ``provider.batch`` per member on the host;
    ``None`` without a provider."""
    if provider is None:
        return None
    table = packed_losses.device_relevance(provider, device)
    if table is not None:
        return table.gather
    return lambda img, cap: packed_losses.host_relevance(provider, img, cap, device)


def _train_step(model, members, pairs, tokens, lengths, feats, relevance, crit, device, step: int) -> tuple[list, bool]:
    """One packed forward and backward (gradients clipped per member; the optimiser steps after): per member its
    step's loss, its loss's scalar diagnostics and, every ``grad_diag_every``-th step, the tangent-gradient
    statistics of :func:`coherent_itr.gradients.tangent_gradient_stats` — what
    :func:`coherent_itr.train._train_step` returns for a solo run; and whether this step was a sampled one.
    ``relevance(img_idx, cap_idx)`` gives the pack's ``[E, B, B]`` relevance on the device (``None``: the config
    has none); ``crit`` is the members' losses over the pack (:class:`coherent_itr.packed_losses.PackedLoss`)."""
    every = members[0].config.grad_diag_every
    diagnose = every > 0 and step % every == 0
    img_idx = torch.stack([p[0] for p in pairs])  # [E, B]
    cap_idx = torch.stack([p[1] for p in pairs])
    len_b = lengths[cap_idx]
    tok_b = tokens[cap_idx][:, :, : int(len_b.max())]
    v = model.image(feats[img_idx.to(device)])
    t = model.text(tok_b.to(device), len_b)
    if diagnose:
        v.retain_grad()
    sim = torch.bmm(v, t.transpose(1, 2))
    if diagnose:
        sim.retain_grad()
    rel = None if relevance is None else relevance(img_idx, cap_idx)
    loss, out = crit(sim, rel)  # one host read for the pack
    loss.sum().backward()
    clip_per_member(list(model.parameters()), [m.config.grad_clip for m in members])
    if diagnose:
        for k, st in enumerate(out):
            st.update(tangent_gradient_stats(v[k].detach(), t[k].detach(), sim[k].detach(), sim.grad[k], v.grad[k]))
    return out, diagnose


def train_packed(
    configs: Sequence[Config],
    splits: data_mod.DataSplits | None = None,
    width: int | None = None,
    progress: bool = True,
    cache_dir: str | None = None,
) -> list[RunResult]:
    """Train ``configs`` (they share :data:`SHARED_FIELDS`; seeds, learning rates, schedules, clip, warm-up,
    patience, epochs and loss parameters are each member's own) as one packed model of ``width`` members (at least
    as many as configs; default :data:`DEFAULT_WIDTH`, or the number of configs if larger) and keep each member's
    best-validation checkpoint. Returns one :class:`coherent_itr.train.RunResult` per config, in order; each
    record's ``engine`` names the packed engine (:func:`engine_identity`), the member's slot and the pack's size."""
    check_packable(configs)
    t_start = time.perf_counter()
    width = width or max(len(configs), DEFAULT_WIDTH)
    if len(configs) > width:
        raise ValueError(f"{len(configs)} configs do not fit a pack of width {width} (pack_groups splits them)")
    members_cfg = list(configs) + [configs[0]] * (width - len(configs))
    first = configs[0]
    use_deterministic_kernels()
    device = resolve_device(first.device)
    if splits is None:
        splits = data_mod.load_splits(
            first.data, data_dir=first.data_dir, scale=first.data_scale, seed=first.data_seed, cache_dir=cache_dir
        )
    tr, dev = splits.train, splits.dev
    if first.max_eval_captions and dev.n_captions > first.max_eval_captions:
        dev = dev.subset_images(np.arange(first.max_eval_captions // dev.captions_per_image))
    vocab = Vocabulary.build(tr.captions, first.vocab_min_count)
    within = [c for s in (splits.train, splits.dev, splits.test) for c in s.captions]
    provider = (
        data_mod.relevance_provider(first.relevance, tr, cache_dir=cache_dir, within=within, **first.relevance_params)
        if first.relevance
        else None
    )
    relevance = _relevance(provider, device)
    tokens, lengths = vocab.encode_batch(tr.captions)
    feats = torch.from_numpy(np.ascontiguousarray(tr.features, dtype=np.float32)).to(device)
    members, models = [], []
    for c in members_cfg:  # each member's weights and generator drawn as its solo run draws them
        g = seed_everything(c.seed)
        models.append(VSEModel(tr.features.shape[1], len(vocab), c.embed_dim, c.word_dim, c.text_hidden))
        crit = losses.build(c.loss, **c.loss_params).to(device)
        warm = c.warmup_epochs if getattr(crit, "honours_warmup", False) else 0
        members.append(_Member(c, g, crit, _Selector(c.early_stop_patience, first_epoch=warm + 1), []))
    model = PackedVSE(models).to(device)
    crit = packed_losses.PackedLoss([m.crit for m in members], first.batch_size, device)
    params = list(model.parameters())
    opt = PackedAdam(params)
    best = [p.detach().clone() for p in params]
    chance = health.chance_rsum(dev.image_of_caption)
    e_total = len(members)
    n_epochs = max(c.epochs for c in members_cfg)
    bar = tqdm(range(n_epochs), desc=f"pack of {len(configs)} ({first.loss})", disable=not progress, leave=False)
    t_train = t_val = 0.0
    step = 0  # updates so far, shared by the members (0-based index of the next one)
    blas = threadpool_limits(limits=1, user_api="blas")  # as the solo loop: numpy's small calls beside torch's
    try:
        for epoch in bar:
            for m in members:
                if m.config.epochs <= epoch:
                    m.stopped = True
            active = torch.tensor([not m.stopped for m in members])
            if not bool(active[: len(configs)].any()):
                break
            lrs = [_lr(m.config, epoch) for m in members]
            for m in members:  # every ITRLoss; a loss without hardest negatives ignores the switch
                if hasattr(m.crit, "set_warmup"):
                    m.crit.set_warmup(epoch < m.config.warmup_epochs)
            t0 = time.perf_counter()
            for m in members:
                m.sums, m.counts = {}, {}
            batches = [_batches(tr.n_images, tr.captions_per_image, m.config, m.generator) for m in members]
            for pairs in zip(*batches):
                opt.zero_grad()
                stats, sampled = _train_step(
                    model, members, pairs, tokens, lengths, feats, relevance, crit, device, step
                )
                opt.step(lrs, active)
                warm_now = [epoch < m.config.warmup_epochs for m in members]
                for k, (m, st) in enumerate(zip(members, stats)):
                    if m.stopped:
                        continue
                    if not math.isfinite(st["train_loss"]) and k < len(configs):
                        raise FloatingPointError(
                            f"non-finite loss {st['train_loss']} at step {step} for pack member {k} "
                            f"(seed {m.config.seed}, loss={m.config.loss}, params={m.config.loss_params})"
                        )
                    if sampled:
                        m.iterations.append({"step": step, "epoch": epoch + 1, "warmup": warm_now[k], **st})
                    for key, val in st.items():
                        m.sums[key] = m.sums.get(key, 0.0) + val
                        m.counts[key] = m.counts.get(key, 0) + 1
                step += 1
            t1 = time.perf_counter()
            vals = _validate(model, dev, vocab, device, chance)
            t_val += time.perf_counter() - t1
            t_train += t1 - t0
            improved = torch.zeros(e_total, dtype=torch.bool)
            for k, m in enumerate(members):
                if m.stopped:
                    continue
                means = {key: m.sums[key] / m.counts[key] for key in m.sums}
                row = {
                    "epoch": epoch + 1,
                    "epoch_time_s": t1 - t0,
                    "lr": lrs[k],
                    **means,
                    "warmup": epoch < m.config.warmup_epochs,
                    "n_steps": m.counts.get("train_loss", 0),
                    "n_grad_samples": m.counts.get("grad_anchor", 0),
                    **vals[k],
                }
                m.history.append(row)
                m.sel.update(_NO_WEIGHTS, epoch + 1, row)
                improved[k] = m.sel.best_epoch == epoch + 1  # this epoch's checkpoint is the one kept
                m.stopped = m.sel.should_stop(epoch + 1)
            with torch.no_grad():
                for b, p in zip(best, params):
                    b.copy_(torch.where(improved.to(p.device).view((-1,) + (1,) * (p.dim() - 1)), p, b))
            real = [m.history[-1]["val_rsum"] for m in members[: len(configs)] if m.history]
            if real:
                bar.set_postfix(rsum=f"{max(real):.1f}")
    finally:
        blas.restore_original_limits()
    with torch.no_grad():
        for b, p in zip(best, params):
            p.copy_(b)
    t0 = time.perf_counter()
    img_e, cap_e = _encode(model, splits.test, vocab, device)
    img_e, cap_e = img_e.float().cpu().numpy(), cap_e.float().cpu().numpy()
    test_encode_s = time.perf_counter() - t0
    total_s = time.perf_counter() - t_start
    out = []
    for k, m in enumerate(members[: len(configs)]):
        record = {
            "config": m.config.to_dict(),
            "history": m.history,
            "best_epoch": m.sel.best_epoch,
            "epochs_run": len(m.history),
            "health": _selected_health(m.sel),
            "warmup": {
                "epochs": [h["epoch"] for h in m.history if h["warmup"]],
                "applies": bool(getattr(m.crit, "honours_warmup", False)),
            },
            "iterations": m.iterations,
            "timing": {  # the pack's seconds, shared by its members
                "total_s": total_s,
                "train_s": t_train,
                "train_s_per_epoch": t_train / max(1, len(m.history)),
                "val_s": t_val,
                "test_encode_s": test_encode_s,
            },
            "data": {
                "train": tr.name,
                "n_train_images": tr.n_images,
                "dev": dev.name,
                "n_dev_images": dev.n_images,
                "test": splits.test.name,
                "n_test_images": splits.test.n_images,
                "vocab_size": len(vocab),
            },
            "machine": {
                "device": str(device),
                "torch": torch.__version__,
                "python": platform.python_version(),
                "threads": torch.get_num_threads(),
            },
            "engine": {**engine_identity(width), "slot": k, "members": len(configs), "losses": crit.mode},
        }
        arrays = {"test_img": img_e[k].astype(np.float32), "test_cap": cap_e[k].astype(np.float32)}
        out.append(RunResult(record, arrays))
    return out
