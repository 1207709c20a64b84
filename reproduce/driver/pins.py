"""``python -m reproduce.driver.pins``: the pins that check the code lock (:mod:`coherent_itr.code_identity`), one
harness and one file (``reproduce/data/pins.json``).

* **Engine pins** — one tiny training run per loss of the study, each with the relevance its arms train with
  (Sentence-BERT, CIDEr-D or none), on the toy data set (the train loop, models, losses, relevance providers), one
  smoke-size run of the synthetic world (its generator) and the test evaluation of one run (the metrics). A run is
  pinned by the sha256 of its history (timings left out), of its test embeddings and of its test metrics — bit for
  bit on the CPU that pinned them — and by readable numbers (the last epoch's, the embeddings' mean |x|, the test
  RSUM) that a CPU with no pins of its own must match, to a relative 1e-3, on some pinned CPU (float32 sums round
  differently across instruction sets: the S-NDCG runs' last numbers differ by 0.4 % between AVX2 and AVX-512
  kernels, so each CPU kind keeps pins of its own: ``machines``, one entry per :func:`cpu_signature`).
* **View pins** — the arrays a run archive carries for the views, from pinned inputs: a
  :class:`~reproduce.present.rankings.Ranking` of a similarity matrix full of ties (exact: indices and copied
  similarities, the same on every CPU) and listwise Fig. 7 (b)'s errors of a small made-up split (float arithmetic:
  to a relative 1e-3).

``python -m reproduce.driver.code_identity --accept FILE WHY`` runs the pins of the runs that execute FILE
(:func:`engine_pins_for`, :func:`view_pins_for`) and refuses when one moves; ``tests/lib/test_code_identity.py`` and
``tests/reproduce/present/test_view_code.py`` run them all. ``python -m reproduce.driver.pins`` pins again — this
CPU's engine entry (added when it has none) and the view arrays: with the frozen code to pin a new CPU kind, or after
``--bump`` (an edit *meant* to change numbers; then every CPU's entry is pinned again on its CPU, or dropped).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from coherent_itr import evaluation, runs
from coherent_itr.config import Config
from coherent_itr.train import train

from reproduce.present import rankings
from reproduce.present.analyses import sndcg_error

PINS = Path(__file__).resolve().parents[1] / "data" / "pins.json"

# The smallest training run: the toy data set, tiny encoders, one epoch (seconds); the tests share it.
TINY = dict(
    data="toy",
    data_scale="smoke",
    embed_dim=16,
    word_dim=8,
    text_hidden=16,
    epochs=1,
    batch_size=32,
    lr=2e-3,
    lr_decay_epoch=1,
    vocab_min_count=1,
    grad_diag_every=0,
)
SBERT = {"relevance": "sbert", "relevance_params": {"mode": "paired", "scale": "cosine"}}
SBERT_UNIT = {"relevance": "sbert", "relevance_params": {"mode": "paired", "scale": "unit"}}
CIDER = {"relevance": "cider", "relevance_params": {"include_candidate": True}}
SAM = {"tau": 3.0, "sampling": "SN", "keep_triplet": True, "seed": 0}
LOSSES = {
    "triplet": ({}, {}),
    "triplet_sn": ({}, {}),
    "vlc": ({"gamma": 60.0}, {}),
    "unified": ({"margin": 0.2, "gamma": 60.0}, {}),
    "bcls": ({}, SBERT),
    "ladder": ({}, SBERT),
    "adaptive_ladder": ({}, SBERT),
    "kendall_sw_hs": ({}, SBERT),
    "sam": (SAM, CIDER),
    "sam_authors": (SAM, CIDER),
    "listwise": ({}, SBERT_UNIT),
    "sndcg": ({}, SBERT_UNIT),
}
EVALUATED = "toy/bcls"  # the run whose test evaluation is pinned too
RANKS = {"image": 8, "caption": 10}  # the depths the study's views store (reproduce/spec/views.py): SAM 8, others 10


def tiny(drop: tuple[str, ...] = (), **over) -> dict:
    """:data:`TINY` with the fields ``over`` changed and the fields ``drop`` left at the Config's defaults."""
    return {**{k: v for k, v in TINY.items() if k not in drop}, **over}


def configs() -> dict[str, Config]:
    """The pinned runs by name: ``toy/<loss>`` for every loss of :data:`LOSSES`, ``synthetic/triplet``."""
    out = {
        f"toy/{loss}": Config(**tiny(epochs=2, loss=loss, loss_params=params, **rel))
        for loss, (params, rel) in LOSSES.items()
    }
    # the smoke synthetic world with the vocabulary's default minimum count
    wider = dict(batch_size=64, embed_dim=32, word_dim=32, text_hidden=32)
    out["synthetic/triplet"] = Config(**tiny(drop=("vocab_min_count",), data="synthetic", **wider))
    return out


def engine_pins_for(rel: str) -> list[str]:
    """The engine pins that execute the library file ``rel`` (package-relative): the runs whose training files hold
    it, and the evaluated run when it is evaluation code."""
    names = [name for name, cfg in configs().items() if rel in runs.training_files(cfg)]
    if rel in runs.evaluation_files() and EVALUATED not in names:
        names.append(EVALUATED)
    return names


def view_pins_for(name: str) -> list[str]:
    """The view pins of a stored view set (``ranking``, ``fig7b``): itself, when it is pinned."""
    return [name] if name in VIEW_ARRAYS else []


def cpu_signature() -> dict:
    """What of this machine changes float32 bits (the engine pins are exact only where it is the same)."""
    flags = ""
    try:
        text = Path("/proc/cpuinfo").read_text()
        model = next((ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("model name")), "")
        flags = next((ln.split(":", 1)[1] for ln in text.splitlines() if ln.startswith("flags")), "")
    except OSError:
        model = platform.processor()
    isa = sorted(f for f in flags.split() if f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "fma"))
    return {"cpu": model, "isa": isa, "torch": torch.__version__, "machine": platform.machine()}


def load(path: Path = PINS) -> dict:
    """The pins: ``about``, ``machines`` (a list of ``{"machine": cpu_signature(), "runs": {name: pin}}``) and
    ``views`` (``{name: pin}``)."""
    return json.loads(path.read_text())


# ----------------------------------------------------------------------------------------------------- engine pins
def _sha(obj) -> str:
    if isinstance(obj, np.ndarray):
        return hashlib.sha256(np.ascontiguousarray(obj).tobytes()).hexdigest()[:16]
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


def pin(result, test: dict | None = None) -> dict:
    """The pin of one run: sha256 of its history (timings out) and test embeddings, and readable numbers."""
    hist = [{k: v for k, v in row.items() if not k.endswith("_s") and k != "time"} for row in result.history]
    out = {
        "history": _sha(hist),
        "test_img": _sha(result.arrays["test_img"]),
        "test_cap": _sha(result.arrays["test_cap"]),
        "last": {k: hist[-1][k] for k in sorted(hist[-1]) if isinstance(hist[-1][k], float)},
        "mean_abs": {k: float(np.abs(result.arrays[k]).astype(np.float64).mean()) for k in ("test_img", "test_cap")},
    }
    if test is not None:
        out["test"] = _sha(test)
        out["rsum"] = test["rsum"]
    return out


def _profiled(fn, seen: set[str]):
    """``fn()`` with every library source file that has a function called during it added to ``seen``."""
    pkg = str(runs.PACKAGE_DIR) + os.sep

    def prof(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(pkg):
            seen.add(frame.f_code.co_filename[len(pkg) :])

    sys.setprofile(prof)
    try:
        return fn()
    finally:
        sys.setprofile(None)


def compute(cache_dir, names: list[str] | None = None, executed: dict | None = None) -> dict:
    """The engine pins of the runs ``names`` (default: every one) under this checkout's code, one thread; with
    ``executed`` (a dict), each run's training also fills ``executed[name]`` with the package-relative library files
    it called into (the check that its key hashes every file it runs)."""
    out = {}
    with runs.pinned_threads(1):
        for name, cfg in configs().items():
            if names is not None and name not in names:
                continue
            run = lambda: train(cfg, progress=False, cache_dir=str(cache_dir))  # noqa: E731
            res = run() if executed is None else _profiled(run, executed.setdefault(name, set()))
            test = evaluation.evaluate_run(res, cache_dir=str(cache_dir)) if name == EVALUATED else None
            out[name] = pin(res, test)
    return out


def _readable(p: dict) -> dict:
    out = {f"last.{k}": v for k, v in p["last"].items()}
    out.update({f"mean_abs.{k}": v for k, v in p["mean_abs"].items()})
    if "rsum" in p:
        out["rsum"] = p["rsum"]
    return out


def moved(pinned: dict, got: dict, exact: bool) -> dict:
    """The pinned runs of ``got`` whose numbers it does not keep: every hash (``exact``), else the readable numbers
    to a relative 1e-3."""
    out = {}
    for name, have in got.items():
        want = pinned.get(name)
        if want is None:
            out[name] = {"pinned": "no pin of this run"}
            continue
        if exact:
            diff = {k: (want[k], have.get(k)) for k in ("history", "test_img", "test_cap", "test") if k in want}
            diff = {k: v for k, v in diff.items() if v[0] != v[1]}
        else:
            w, h = _readable(want), _readable(have)
            diff = {k: (v, h.get(k)) for k, v in w.items() if not np.isclose(h.get(k, np.nan), v, rtol=1e-3, atol=1e-6)}
        if diff:
            w, h = _readable(want), _readable(have)
            out[name] = {**diff, "readable (pinned, now)": {k: (v, h.get(k)) for k, v in w.items() if v != h.get(k)}}
    return out


def own_pins(pins: dict | None = None) -> dict | None:
    """This CPU's engine pins (``{name: pin}``), or ``None`` when it has none of its own."""
    here = cpu_signature()
    own = [m for m in (pins or load())["machines"] if m["machine"] == here]
    return own[0]["runs"] if own else None


def check_engine(
    names: list[str] | None, cache_dir, exact_only: bool = False, executed: dict | None = None
) -> tuple[dict, str]:
    """``(moved, how)``: the engine pins ``names`` (default: all) that this checkout does not keep — bit for bit on
    a CPU that pinned them; on a CPU with no pins of its own, to a relative 1e-3 on the closest pinned CPU, unless
    ``exact_only`` (then every run is reported as unpinned here). ``executed``: as :func:`compute`'s."""
    pins = load()
    here, own = cpu_signature(), own_pins(pins)
    if own is None and exact_only:
        return {n: {"pinned": f"no pins for this CPU ({here['cpu']})"} for n in names or configs()}, "not pinned here"
    got = compute(cache_dir, names, executed)
    if own is not None:
        return moved(own, got, exact=True), f"bit for bit, pinned on this CPU ({here['cpu']})"
    diffs, near = min(
        ((moved(m["runs"], got, exact=False), m["machine"]) for m in pins["machines"]), key=lambda x: len(x[0])
    )
    return diffs, f"to 1e-3 on the closest pinned CPU, {near['cpu']} ({', '.join(near['isa'])}); none pinned for {here}"


# ------------------------------------------------------------------------------------------------------- view pins
def digest(arrays: dict) -> str:
    """sha256 of named arrays: names, dtypes, shapes and bytes, in name order."""
    h = hashlib.sha256()
    for k in sorted(arrays):
        a = np.ascontiguousarray(arrays[k])
        h.update(f"{k}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def ranking_arrays() -> dict:
    """The stored ranking of a 30 × 150 similarity matrix rounded to one decimal: most rows tie at their top 10."""
    sim = np.round(np.random.default_rng(7).normal(size=(30, 150)), 1).astype(np.float32)
    return rankings.Ranking.of_similarity(sim).to_arrays(RANKS)


def fig7b_arrays() -> dict:
    """Fig. 7 (b)'s stored errors of seed 3 on a made-up split of 16 images × 5 captions (8-d unit embeddings,
    relevance a fixed matrix in [0, 1]), batches of 8."""
    rng = np.random.default_rng(11)
    unit = lambda x: (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)  # noqa: E731
    vi, vc = unit(rng.normal(size=(16, 8))), unit(rng.normal(size=(80, 8)))
    rel = rng.uniform(size=(16, 80))
    test = SimpleNamespace(n_images=16, n_captions=80, captions_per_image=5)
    return sndcg_error.error_arrays(3, vi, vc, test, lambda i, c: rel[np.ix_(i, c)], batch_size=8, n_batches=2)


def _ranking_pin() -> dict:
    rk = ranking_arrays()
    code = f"{rankings.PREFIX}{rankings.Ranking.NAME}_code"
    return {"code": str(rk[code]), "sha256": digest({k: v for k, v in rk.items() if k != code})}


def _fig7b_pin() -> dict:
    f7 = fig7b_arrays()
    return {
        "code": str(f7[f"{rankings.PREFIX}{sndcg_error.FIG7B}_code"]),
        "error": f7["view_fig7b_error"].ravel().tolist(),
    }


VIEW_ARRAYS = {rankings.Ranking.NAME: _ranking_pin, sndcg_error.FIG7B: _fig7b_pin}


def compute_views(names: list[str] | None = None) -> dict:
    """``{"ranking": {"code", "sha256"}, "fig7b": {"code", "error"}}`` under this checkout's code: the code each
    set names and its arrays (the ranking's digest leaves its code out, so that an edit is judged by its arrays)."""
    return {name: f() for name, f in VIEW_ARRAYS.items() if names is None or name in names}


def views_moved(pinned: dict, got: dict) -> dict:
    """The view sets of ``got`` whose arrays are not as pinned: the ranking exactly, Fig. 7 (b) to 1e-3."""
    out = {}
    for name, have in got.items():
        want = pinned.get(name)
        if want is None:
            out[name] = "no pin of this set"
        elif "sha256" in want and have["sha256"] != want["sha256"]:
            out[name] = f"arrays {have['sha256'][:16]} ≠ pinned {want['sha256'][:16]}"
        elif "error" in want and not np.allclose(have["error"], want["error"], rtol=1e-3, atol=1e-6):
            out[name] = "errors moved beyond a relative 1e-3"
    return out


# ------------------------------------------------------------------------------------------------------- pinning
def pin_again(path: Path = PINS) -> str:
    """Rewrite this CPU's engine entry (adding it when it has none; every other CPU's kept) and the view pins."""
    here = cpu_signature()
    with tempfile.TemporaryDirectory() as d:
        entry = {"machine": here, "runs": compute(d)}
    old = load(path) if path.exists() else {"machines": []}
    machines = [m for m in old["machines"] if m["machine"] != here]
    pins = {"about": __doc__.split("\n\n")[0], "machines": [*machines, entry], "views": compute_views()}
    path.write_text(json.dumps(pins, indent=1, sort_keys=True) + "\n")
    return (
        f"{path}: {len(entry['runs'])} runs pinned on {here['cpu']} ({', '.join(here['isa'])}); "
        f"{len(machines)} other CPU(s) kept; {len(pins['views'])} view sets pinned"
    )


def main(argv=None) -> int:
    argparse.ArgumentParser(prog="python -m reproduce.driver.pins", description=__doc__.split("\n\n")[0]).parse_args(
        argv
    )
    print(pin_again())
    return 0


if __name__ == "__main__":
    sys.exit(main())
