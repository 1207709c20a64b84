"""``train(config)``: one seeded VSE++ training run with any loss, up to its selected checkpoint.

The loop follows VSE++ (Faghri et al.): Adam, lr × ``lr_decay`` every ``lr_decay_epoch``
epochs, gradient-norm clipping, and the checkpoint with the best validation RSUM is selected.
It is split into named steps, each readable at once:

* :func:`_setup` — data, vocabulary, relevance provider, model, loss, optimiser (:class:`_Run`);
* :func:`_train_epoch` / :func:`_train_step` — one epoch / one update (on CUDA, full batches of a capturable
  loss replay a captured graph of the whole update: :mod:`coherent_itr.cuda_graphs`). The first
  ``warmup_epochs`` epochs train every hardest-negative loss on all negatives (VSE∞ warm-up,
  :mod:`coherent_itr.losses.base`); every ``grad_diag_every``-th step also logs the tangent
  gradient diagnostics of :mod:`coherent_itr.gradients` (Unified Fig. 4) into
  ``record["iterations"]`` — the only steps that pay for ``retain_grad``;
* :func:`_validate` — validation RSUM (selection) and the health record (:mod:`coherent_itr.health`);
* :class:`_Selector` — best-RSUM checkpoint and early stopping (``early_stop_patience``), both
  counted from the first epoch after the warm-up;
* :func:`_record` — the JSON-able run record.

The result is a :class:`RunResult`: the record (config, per-epoch history, best epoch, epochs
run, health at the selected checkpoint, timing, data, machine — **no test metrics**: those come
from :func:`coherent_itr.evaluation.evaluate_run` on the stored embeddings) and the selected
checkpoint's test embeddings (float32), so any metric can be computed later without retraining.
"""

from __future__ import annotations

import copy
import platform
import threading
import time
from dataclasses import dataclass, field

import numpy as np
import torch
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

from . import cuda_graphs, health, losses, metrics
from . import data as data_mod
from .config import Config
from .determinism import resolve_device, seed_everything, use_deterministic_kernels
from .gradients import tangent_gradient_stats
from .models import VSEModel, Vocabulary


@dataclass
class RunResult:
    record: dict  # JSON-able: config, history, health, timing (+ "test" from the cache)
    arrays: dict = field(default_factory=dict)  # test embeddings (float32 numpy)

    @property
    def history(self) -> list[dict]:
        return self.record["history"]

    @property
    def test(self) -> dict:
        if "test" not in self.record:
            raise KeyError(
                "RunResult.test: this record holds no test metrics — train() does not evaluate the test "
                "split; use coherent_itr.evaluation.evaluate_run(result) or RunCache.get_or_train(config)"
            )
        return self.record["test"]


@torch.no_grad()
def encode_split(
    model: VSEModel, split: data_mod.CaptionedImages, vocab: Vocabulary, device, batch_size: int = 512
) -> tuple[np.ndarray, np.ndarray]:
    """L2-normalised embeddings (float32 numpy) of every image and every caption of ``split``."""
    model.eval()
    feats = torch.from_numpy(np.ascontiguousarray(split.features, dtype=np.float32))
    img = torch.cat([model.image(feats[s : s + batch_size].to(device)).cpu() for s in range(0, len(feats), batch_size)])
    caps = []
    for s in range(0, split.n_captions, batch_size):
        tok, lens = vocab.encode_batch(split.captions[s : s + batch_size])
        caps.append(model.text(tok.to(device), lens).cpu())
    return img.float().numpy(), torch.cat(caps).float().numpy()


def _train_subset(train: data_mod.CaptionedImages, fraction: float, seed: int) -> data_mod.CaptionedImages:
    """A random subset of ``fraction`` of the training images (seeded; the SAM authors took the first P%)."""
    if fraction >= 1.0:
        return train
    n = max(2, int(round(fraction * train.n_images)))
    idx = np.sort(np.random.default_rng([seed, 0x5AB]).choice(train.n_images, size=n, replace=False))
    return train.subset_images(idx, name=f"{train.name}[{fraction:g}]")


def _batches(n_images: int, cpi: int, config: Config, g: torch.Generator):
    """Yield (image_idx, caption_idx) LongTensors of one epoch.

    Batches are uniformly random (a fresh permutation per epoch from the run's seeded generator),
    as in VSE++: the in-batch negatives — and so every hardest-negative objective — depend on
    that. Length-bucketed batches would correlate the negatives with caption length and are not
    used (the packed GRU costs Σ lengths whatever the padding; results/benchmarks/run_profile.md).
    The indices live on the CPU, as the generator does, whatever the default device: the relevance
    providers read them as numpy arrays."""
    if config.sampling == "captions":
        order = torch.randperm(n_images * cpi, generator=g, device="cpu")
        for s in range(0, len(order), config.batch_size):
            cap = order[s : s + config.batch_size]
            if len(cap) >= 2:
                yield cap // cpi, cap
    else:
        order = torch.randperm(n_images, generator=g, device="cpu")
        pick = torch.randint(0, cpi, (n_images,), generator=g, device="cpu")
        for s in range(0, n_images, config.batch_size):
            img = order[s : s + config.batch_size]
            if len(img) >= 2:
                yield img, img * cpi + pick[img]


@dataclass
class _Run:
    """Everything :func:`train` sets up once and its steps share."""

    config: Config
    device: torch.device
    generator: torch.Generator
    splits: data_mod.DataSplits
    tr: data_mod.CaptionedImages
    dev: data_mod.CaptionedImages
    vocab: Vocabulary
    provider: object
    tokens: torch.Tensor
    lengths: torch.Tensor
    feats: torch.Tensor
    model: VSEModel
    crit: torch.nn.Module
    opt: torch.optim.Optimizer
    dev_chance_rsum: float
    step: int = 0  # updates done so far (0-based index of the next one)
    iterations: list = field(default_factory=list)
    graphs: cuda_graphs.GraphedSteps | None = None  # captured full-batch steps (CUDA, capturable loss)
    engine_note: str | None = None  # why a CUDA run's steps are not captured

    # the update, shared by the eager step (:func:`_train_step`) and the captured one (:mod:`coherent_itr.cuda_graphs`)
    def forward_loss(self, feats, tokens, lengths, rel, retain_grads: bool = False, autocast_cache=None):
        """The batch's loss, embeddings and similarities: the model under bf16 autocast when configured, then
        similarities and loss in float32 (``retain_grads``: keep the gradients of the embeddings and similarities
        for the diagnostics; ``autocast_cache=False`` inside a captured step)."""
        c, dev = self.config, self.device
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=c.bf16, cache_enabled=autocast_cache):
            v, t = self.model(feats, tokens, lengths)
        v, t = v.float(), t.float()  # similarities and loss always in float32
        if retain_grads:
            v.retain_grad()
        sim = v @ t.T
        if retain_grads:
            sim.retain_grad()
        return self.crit(sim, rel), v, t, sim

    def apply_update(self, loss: torch.Tensor) -> None:
        """Backward, gradient-norm clipping and the optimiser's step (the gradients were zeroed before)."""
        loss.backward()
        if self.config.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)
        self.opt.step()


# Runs trained side by side in one process (threads: ``reproduce.driver.executors``, runs per worker) share the
# process-wide generators that seeding resets and the model's initial weights are drawn from: one setup at a time,
# so each run starts from the weights of its own seed whatever the others do.
_SETUP_LOCK = threading.Lock()


def _setup(config: Config, splits, cache_dir, graph_backend=None) -> _Run:
    """Seed, load data, build vocabulary, relevance provider, model, loss and optimiser (and, where the steps are
    captured, the graphs' engine; ``graph_backend``: a stand-in backend, e.g. for tests on the CPU)."""
    g = seed_everything(config.seed)
    use_deterministic_kernels()
    device = resolve_device(config.device)
    if splits is None:
        splits = data_mod.load_splits(
            config.data, data_dir=config.data_dir, scale=config.data_scale, seed=config.data_seed, cache_dir=cache_dir
        )
    tr = _train_subset(splits.train, config.train_fraction, config.seed)
    dev = splits.dev
    if config.max_eval_captions and dev.n_captions > config.max_eval_captions:
        dev = dev.subset_images(np.arange(config.max_eval_captions // dev.captions_per_image))
    vocab = Vocabulary.build(tr.captions, config.vocab_min_count)
    # relevance of the training captions as the data set's every caption gives it (Sentence-BERT: their rows in
    # the embedding of all of them, the set the driver's preparation embeds), whatever the cache held before
    within = [c for s in (splits.train, splits.dev, splits.test) for c in s.captions]
    provider = (
        data_mod.relevance_provider(config.relevance, tr, cache_dir=cache_dir, within=within, **config.relevance_params)
        if config.relevance
        else None
    )
    tokens, lengths = vocab.encode_batch(tr.captions)
    feats = torch.from_numpy(np.ascontiguousarray(tr.features, dtype=np.float32)).to(device)
    model = VSEModel(tr.features.shape[1], len(vocab), config.embed_dim, config.word_dim, config.text_hidden).to(device)
    crit = losses.build(config.loss, **config.loss_params).to(device)
    blocker = "not a CUDA device"  # a CPU run never enters the graphs' module: its key does not hash it
    if device.type == "cuda" or graph_backend is not None:
        blocker = cuda_graphs.capture_blocker(device, crit, stand_in=graph_backend is not None)
    if blocker is None and device.type == "cuda":  # capturable Adam: state and learning rate on the device
        opt = torch.optim.Adam(model.parameters(), lr=torch.tensor(config.lr, device=device), capturable=True)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=config.lr)
    run = _Run(
        config,
        device,
        g,
        splits,
        tr,
        dev,
        vocab,
        provider,
        tokens,
        lengths,
        feats,
        model,
        crit,
        opt,
        health.chance_rsum(dev.image_of_caption),
    )
    if blocker is None:
        run.graphs = cuda_graphs.GraphedSteps(run, graph_backend)
    elif device.type == "cuda":
        run.engine_note = blocker
    return run


def _set_lr(run: _Run, epoch: int) -> float:
    """VSE++ schedule: lr · decay^(epoch // lr_decay_epoch) (0-based epoch); unchanged by early stopping."""
    c = run.config
    lr = c.lr * c.lr_decay ** (epoch // max(1, c.lr_decay_epoch))
    for group in run.opt.param_groups:
        if torch.is_tensor(group["lr"]):  # capturable Adam: the graphs read this tensor
            group["lr"].fill_(lr)
        else:
            group["lr"] = lr
    return lr


def _train_step(run: _Run, img_idx: torch.Tensor, cap_idx: torch.Tensor, diagnose: bool) -> dict[str, float]:
    """One update; returns the step's loss, the loss's scalar diagnostics and (if ``diagnose``) the
    tangent-gradient stats of :func:`coherent_itr.gradients.tangent_gradient_stats`."""
    c, dev = run.config, run.device
    len_b = run.lengths[cap_idx]
    tok_b = run.tokens[cap_idx][:, : int(len_b.max())]
    rel = None
    if run.provider is not None:
        rel = torch.as_tensor(run.provider.batch(img_idx.numpy(), cap_idx.numpy()), dtype=torch.float32, device=dev)
    loss, v, t, sim = run.forward_loss(run.feats[img_idx], tok_b.to(dev), len_b, rel, retain_grads=diagnose)
    loss_value = float(loss.detach())
    if not np.isfinite(loss_value):
        raise FloatingPointError(
            f"non-finite loss {loss_value} at step {run.step} (loss={c.loss}, params={c.loss_params})"
        )
    run.opt.zero_grad(set_to_none=True)
    run.apply_update(loss)
    stats = {"train_loss": loss_value}
    stats.update(
        {
            f"loss_{k}": float(x)
            for k, x in run.crit.diagnostics.items()
            if isinstance(x, (int, float)) and not isinstance(x, bool)
        }
    )
    if diagnose:
        stats.update(tangent_gradient_stats(v.detach(), t.detach(), sim.detach(), sim.grad, v.grad))
    return stats


def _train_epoch(run: _Run, epoch: int) -> dict[str, float]:
    """One epoch of updates; per-epoch means of every step stat (diagnostics: of the sampled steps)."""
    c = run.config
    warm = epoch < c.warmup_epochs
    if hasattr(run.crit, "set_warmup"):  # every ITRLoss; a foreign nn.Module loss has no warm-up
        run.crit.set_warmup(warm)
    run.model.train()
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for img_idx, cap_idx in _batches(run.tr.n_images, run.tr.captions_per_image, c, run.generator):
        diagnose = c.grad_diag_every > 0 and run.step % c.grad_diag_every == 0
        if not diagnose and run.graphs is not None and run.graphs.step(img_idx, cap_idx, warm, run.step):
            run.step += 1
            continue
        stats = _train_step(run, img_idx, cap_idx, diagnose)
        if diagnose:
            run.iterations.append({"step": run.step, "epoch": epoch + 1, "warmup": warm, **stats})
        for k, val in stats.items():
            sums[k] = sums.get(k, 0.0) + val
            counts[k] = counts.get(k, 0) + 1
        run.step += 1
    if run.graphs is not None:
        g_sums, g_counts = run.graphs.end_epoch()
        for k, val in g_sums.items():
            sums[k] = sums.get(k, 0.0) + val
            counts[k] = counts.get(k, 0) + g_counts[k]
    out = {k: sums[k] / counts[k] for k in sums}
    out["warmup"] = warm
    out["n_steps"] = counts.get("train_loss", 0)
    out["n_grad_samples"] = counts.get("grad_anchor", 0)
    return out


def _validate(run: _Run) -> dict[str, float]:
    """What selection and the health record need: validation R@K / RSUM, the mean positive and
    hardest-negative cosines, chance RSUM, and the health values (:func:`health.epoch_health`)."""
    img_e, cap_e = encode_split(run.model, run.dev, run.vocab, run.device)
    sim = img_e @ cap_e.T
    val = {f"val_{k}": v for k, v in metrics.retrieval_metrics(sim, run.dev.image_of_caption).items()}
    val.update(health.similarity_health(sim, run.dev.image_of_caption))
    val["val_rsum_chance"] = run.dev_chance_rsum
    val.update(health.epoch_health(val))
    return val


class _Selector:
    """Keeps the best-validation-RSUM checkpoint (first maximum) and decides early stopping.

    Only epochs from ``first_epoch`` on are candidates, and patience counts from there: with a
    warm-up (``warmup_epochs`` on all negatives) the run's own objective starts at epoch
    ``warmup_epochs + 1``, so a warm-up checkpoint — a model of another loss — is never the one
    kept, and the switch to max-violation (whose first epoch often dips) is not mistaken for a
    plateau. Decided before the protocol's results were read; the same rule for every
    arm, and a no-op for arms without warm-up. A run that ends before ``first_epoch`` (a cap not
    above the warm-up) keeps its last epoch."""

    def __init__(self, patience: int, first_epoch: int = 1) -> None:
        self.patience, self.first_epoch = patience, max(1, first_epoch)
        self.best_rsum, self.best_state, self.best_epoch, self.best_row = -np.inf, None, 0, None

    def update(self, model: torch.nn.Module, epoch: int, row: dict) -> None:
        if epoch < self.first_epoch:  # warm-up: kept only as the fallback of a run that never leaves it
            self.best_epoch, self.best_row = epoch, row
            self.best_state = copy.deepcopy(model.state_dict())
            return
        if epoch == self.first_epoch or row["val_rsum"] > self.best_rsum:
            self.best_rsum, self.best_epoch, self.best_row = row["val_rsum"], epoch, row
            self.best_state = copy.deepcopy(model.state_dict())

    def should_stop(self, epoch: int) -> bool:
        """True when ``patience`` epochs have passed without a new best (``patience`` 0: never)."""
        return self.patience > 0 and epoch >= self.first_epoch and epoch - self.best_epoch >= self.patience


def _selected_health(sel: _Selector) -> dict:
    h = {k: sel.best_row[k] for k in health.HEALTH_KEYS}
    collapsed, reason = health.is_collapsed(h)
    return {
        **h,
        "epoch": sel.best_epoch,
        "val_rsum": sel.best_row["val_rsum"],
        "val_rsum_chance": sel.best_row["val_rsum_chance"],
        "collapsed": collapsed,
        "reason": reason,
    }


def _record(run: _Run, history: list[dict], sel: _Selector, timing: dict) -> dict:
    c, tr, test = run.config, run.tr, run.splits.test
    return {
        "config": c.to_dict(),
        "history": history,
        "best_epoch": sel.best_epoch,
        "epochs_run": len(history),
        "health": _selected_health(sel),
        "warmup": {
            "epochs": [h["epoch"] for h in history if h["warmup"]],
            "applies": bool(getattr(run.crit, "honours_warmup", False)),
        },
        "iterations": run.iterations,
        "timing": timing,
        "data": {
            "train": tr.name,
            "n_train_images": tr.n_images,
            "dev": run.dev.name,
            "n_dev_images": run.dev.n_images,
            "test": test.name,
            "n_test_images": test.n_images,
            "vocab_size": len(run.vocab),
        },
        "machine": {
            "device": str(run.device),
            "torch": torch.__version__,
            "python": platform.python_version(),
            "threads": torch.get_num_threads(),
        },
        **_engine(run),
    }


def _engine(run: _Run) -> dict:
    """``{"engine": …}`` for a CUDA run or a run with a stand-in graph backend (how its steps ran); ``{}`` on a CPU,
    whose records are as they always were."""
    if run.graphs is not None:
        return {"engine": run.graphs.describe()}
    if run.engine_note is not None:
        return {"engine": {"step": "eager", "reason": run.engine_note}}
    return {}


def train(
    config: Config,
    splits: data_mod.DataSplits | None = None,
    progress: bool = True,
    cache_dir: str | None = None,
    graph_backend=None,
) -> RunResult:
    """Train a VSE++ model with ``config.loss`` and keep its best-validation checkpoint.

    Args:
        config: the run's settings (data, loss and its parameters, model size, optimiser, seed).
        splits: train/dev/test splits to use instead of loading ``config.data`` (tests pass the toy set).
        progress: show a progress bar over epochs.
        cache_dir: where data sources and relevance providers cache features and matrices.
        graph_backend: replay the full-batch steps through this stand-in for CUDA graphs
            (:class:`coherent_itr.cuda_graphs.ReplayBackend`: the captured path checked on a CPU); ``None``: CUDA
            graphs where the device and loss allow them (:func:`coherent_itr.cuda_graphs.capture_blocker`).

    Returns:
        A :class:`RunResult`: ``record`` (config, per-epoch history, selected epoch, health, timing) and
        ``arrays`` (the selected checkpoint's test embeddings ``test_img`` / ``test_cap``); test metrics
        come from :func:`coherent_itr.evaluation.evaluate_run`.
    """
    t_start = time.perf_counter()
    with _SETUP_LOCK:
        run = _setup(config, splits, cache_dir, graph_backend)
    warm = config.warmup_epochs if getattr(run.crit, "honours_warmup", False) else 0
    sel = _Selector(config.early_stop_patience, first_epoch=warm + 1)
    history: list[dict] = []
    t_train = t_val = 0.0
    bar = tqdm(range(config.epochs), desc=f"{config.loss} seed={config.seed}", disable=not progress, leave=False)
    # numpy work inside the loop (relevance providers, validation metrics) is small per call; a multi-threaded
    # OpenBLAS pool spinning between those calls fights torch's threads for the cores and made a BCLS epoch
    # 3.5x slower on 2 CPUs (14.2 s vs 4.1 s, results/benchmarks/blas_threads.md) — one BLAS thread here.
    with threadpool_limits(limits=1, user_api="blas"):
        for epoch in bar:
            lr = _set_lr(run, epoch)
            t0 = time.perf_counter()
            stats = _train_epoch(run, epoch)
            t1 = time.perf_counter()
            val = _validate(run)
            t_val += time.perf_counter() - t1
            t_train += t1 - t0
            row = {"epoch": epoch + 1, "epoch_time_s": t1 - t0, "lr": lr, **stats, **val}
            history.append(row)
            bar.set_postfix(loss=f"{row['train_loss']:.3f}", rsum=f"{val['val_rsum']:.1f}")
            sel.update(run.model, epoch + 1, row)
            if sel.should_stop(epoch + 1):
                break
        run.model.load_state_dict(sel.best_state)
        t0 = time.perf_counter()
        img_e, cap_e = encode_split(run.model, run.splits.test, run.vocab, run.device)
        test_encode_s = time.perf_counter() - t0
    timing = {
        "total_s": time.perf_counter() - t_start,
        "train_s": t_train,
        "train_s_per_epoch": t_train / len(history),
        "val_s": t_val,
        "test_encode_s": test_encode_s,
    }
    arrays = {"test_img": img_e.astype(np.float32), "test_cap": cap_e.astype(np.float32)}
    return RunResult(_record(run, history, sel, timing), arrays)
