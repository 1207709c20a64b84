"""Tiny training runs whose numbers ``tests/lib/test_code_identity.py`` pins bit for bit: the guard of the frozen run
keys (:mod:`coherent_itr.code_identity`).

One run per loss of the study, each with the relevance its arms train with (Sentence-BERT, CIDEr-D or none), on
the toy data set (the train loop, models, losses, relevance providers), plus one smoke-size run of the synthetic
world (its generator) and the test evaluation of one run (the metrics). A run is pinned by the sha256 of its
history (timings left out), of its test embeddings, and of its test metrics — bit for bit on the CPU that pinned
them — and by readable numbers (the last epoch's, the embeddings' mean |x|, the test RSUM) that a CPU with no pins
of its own must match, to a relative 1e-3, on some pinned CPU (float32 sums round differently across instruction
sets; the S-NDCG runs' last numbers differ by 0.4 % between the AMD EPYC (AVX2) and Intel Xeon (AVX-512) kernels,
so each CPU kind this study runs on keeps pins of its own: ``machines``, one entry per :func:`cpu_signature`).

``python tests/engine_pins.py`` rewrites this CPU's entry of ``tests/data/engine_pins.json`` (adding it when it has
none) — with the frozen code, to pin a new CPU kind, or when an edit is *meant* to change numbers, together with
``python -m reproduce.driver.code_identity --freeze FILE …`` (then every CPU's entry is pinned again, on its CPU,
or dropped).
"""

from __future__ import annotations

import hashlib
import json
import platform
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
PINS = HERE / "data" / "engine_pins.json"
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


def configs() -> dict:
    from coherent_itr.config import Config
    from tiny_run import tiny

    out = {
        f"toy/{loss}": Config(**tiny(epochs=2, loss=loss, loss_params=params, **rel))
        for loss, (params, rel) in LOSSES.items()
    }
    # the smoke synthetic world with the vocabulary's default minimum count
    wider = dict(batch_size=64, embed_dim=32, word_dim=32, text_hidden=32)
    out["synthetic/triplet"] = Config(**tiny(drop=("vocab_min_count",), data="synthetic", **wider))
    return out


def cpu_signature() -> dict:
    """What of this machine changes float32 bits (the pins are exact only where it is the same)."""
    import torch

    flags = ""
    try:
        text = Path("/proc/cpuinfo").read_text()
        model = next((ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("model name")), "")
        flags = next((ln.split(":", 1)[1] for ln in text.splitlines() if ln.startswith("flags")), "")
    except OSError:
        model = platform.processor()
    isa = sorted(f for f in flags.split() if f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "fma"))
    return {"cpu": model, "isa": isa, "torch": torch.__version__, "machine": platform.machine()}


def load() -> dict:
    """The pins: ``about`` and ``machines``, a list of ``{"machine": cpu_signature(), "runs": {name: pin}}``."""
    return json.loads(PINS.read_text())


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


def compute(cache_dir) -> dict:
    from coherent_itr import evaluation, runs
    from coherent_itr.train import train

    out = {}
    with runs.pinned_threads(1):
        for name, cfg in configs().items():
            res = train(cfg, progress=False, cache_dir=str(cache_dir))
            test = evaluation.evaluate_run(res, cache_dir=str(cache_dir)) if name == "toy/bcls" else None
            out[name] = pin(res, test)
    return out


if __name__ == "__main__":
    import tempfile

    sys.path.insert(0, str(HERE))
    here = cpu_signature()
    with tempfile.TemporaryDirectory() as d:
        entry = {"machine": here, "runs": compute(d)}
    machines = [m for m in load()["machines"] if m["machine"] != here] if PINS.exists() else []
    pins = {"about": __doc__.split("\n\n")[0], "machines": [*machines, entry]}
    PINS.write_text(json.dumps(pins, indent=1, sort_keys=True) + "\n")
    print(
        f"{PINS}: {len(entry['runs'])} runs pinned on {here['cpu']} ({', '.join(here['isa'])}); "
        f"{len(machines)} other CPU(s) kept"
    )
