"""``python -m reproduce.bundle --data flickr8k --out DIR``: the data bundle for training on another machine.

The bundle (:mod:`coherent_itr.data.bundle`) holds the image features (float16), captions, splits,
every caption's Sentence-BERT embedding (float16) and the human judgement files, with a sha256
manifest — nothing else: no photo, no model. On the other machine ``FLICKR8K_DIR=DIR`` (or
``Config(data="flickr8k", data_dir=DIR)``) trains and evaluates from it.

What the study's arms train with is checked before anything is written: every relevance provider a
planned Flickr8k run (any profile) or the evaluation uses must be computable from the bundle —
Sentence-BERT from the stored embeddings, CIDEr-D from the captions (its pure-python tokenizer;
the ``"ptb"`` tokenizer needs Java and is refused). The captions of all splits are embedded in one
call, as :func:`reproduce.protocol.prepare.prepare` does, so the stored embeddings are the ones a run from the
release folder uses, rounded to float16.

Building costs the features of every photo (≈ 9 CPU-minutes cold for Flickr8k's 8,000 photos, then
cached under ``$COHERENT_ITR_CACHE``) and the Sentence-BERT embeddings of its 40,000 captions
(≈ 3 CPU-minutes cold, cached too). The Flickr8k bundle is ≈ 57 MB: 20.5 MB of features
(8,000 × 1,280 × 2 bytes), 30.7 MB of embeddings (40,000 × 384 × 2 bytes), captions and judgements.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from coherent_itr.data import bundle, flickr8k, sbert
from coherent_itr.data.features import encoder_key
from coherent_itr.evaluation import PSEUDO_PROVIDERS
from coherent_itr.runs import source_hash

from reproduce.spec import experiments
from reproduce.spec.profiles import PROFILES, profile_for

MAX_BYTES = 60 * 10**6  # what a bundle may weigh to travel to the GPU machine with the code
DATA_SETS = ("flickr8k",)


def planned_providers(data: str = "flickr8k") -> list[tuple[str, dict]]:
    """Every (relevance provider, parameters) that a planned run on ``data`` (any profile) trains with or
    the test evaluation uses, each once, in a stable order."""
    seen: dict[str, tuple[str, dict]] = {}
    for name in PROFILES:
        for cfg in experiments.plan(profile_for(name, data)):
            if cfg.relevance:
                seen.setdefault(
                    json.dumps([cfg.relevance, cfg.relevance_params], sort_keys=True),
                    (cfg.relevance, dict(cfg.relevance_params)),
                )
    for name, params in PSEUDO_PROVIDERS.items():
        seen.setdefault(json.dumps([name, params], sort_keys=True), (name, dict(params)))
    return [seen[k] for k in sorted(seen)]


def check_servable(providers: list[tuple[str, dict]]) -> None:
    """``ValueError`` naming any provider a bundle cannot compute (see the module docstring)."""
    for name, params in providers:
        if name == "cider" and params.get("tokenizer", "simple") == "ptb":
            raise ValueError("relevance cider with tokenizer='ptb' needs Java on the training machine; not bundled")
        if name not in ("sbert", "cider"):
            raise ValueError(f"relevance provider {name!r} (params {params}) cannot be computed from a bundle")


def build(data: str, out: str | Path, data_dir=None, cache_dir=None, progress: bool = True) -> dict:
    """Write the bundle of ``data`` into ``out`` (new or empty folder); returns its manifest."""
    if data not in DATA_SETS:
        raise ValueError(f"no bundle for data set {data!r}; choose one of {list(DATA_SETS)}")
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"--out {out} exists and is not an empty folder; choose a new or empty folder")
    if bundle.is_bundle(flickr8k.flickr8k_dir(data_dir)):
        raise ValueError(f"{flickr8k.flickr8k_dir(data_dir)} is itself a bundle; point --data-dir at the release")
    root = flickr8k.check_release(data_dir)  # a missing or wrong folder is said before any work
    providers = planned_providers(data)
    check_servable(providers)
    splits = flickr8k.load_flickr8k(root, cache_dir=cache_dir, progress=progress)
    parts = [splits.train, splits.dev, splits.test]
    emb = sbert.embed_captions([c for s in parts for c in s.captions], cache_dir=cache_dir, progress=progress)
    bounds = np.cumsum([0] + [s.n_captions for s in parts])
    per_split = {name: emb[bounds[k] : bounds[k + 1]] for k, name in enumerate(bundle.SPLITS)}
    judgements = [root / f for f in (flickr8k.EXPERT_FILE, flickr8k.CROWD_FILE) if (root / f).is_file()]
    bundle.write_bundle(
        out,
        splits,
        per_split,
        data=data,
        encoder=encoder_key(),
        sentence_model=sbert.model_id(),
        judgement_files=judgements,
        info={"built_by": "python -m reproduce.bundle", "library_source": source_hash(), "providers": providers},
    )
    return bundle.verify_bundle(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m reproduce.bundle",
        description="Write the data bundle for training on another machine: features, captions, splits, caption "
        "embeddings and judgements with a sha256 manifest (see the module docstring).",
    )
    ap.add_argument("--data", required=True, choices=DATA_SETS, help="the data set to bundle")
    ap.add_argument("--out", required=True, help="a new or empty folder for the bundle")
    ap.add_argument("--data-dir", default=None, help="the release folder (default: $FLICKR8K_DIR)")
    ap.add_argument("--quiet", action="store_true", help="no progress bars")
    args = ap.parse_args(argv)
    try:
        manifest = build(args.data, args.out, data_dir=args.data_dir, progress=not args.quiet)
    except (FileNotFoundError, ValueError) as exc:
        print(f"python -m reproduce.bundle: {exc}", file=sys.stderr)
        return 2
    total = sum(f["bytes"] for f in manifest["files"].values())
    for name, f in sorted(manifest["files"].items()):
        print(f"  {name:32s} {f['bytes'] / 1e6:8.2f} MB  sha256 {f['sha256'][:16]}…")
    print(f"bundle {args.out}: {len(manifest['files'])} files, {total / 1e6:.1f} MB (limit {MAX_BYTES / 1e6:.0f} MB)")
    if total > MAX_BYTES:
        print(f"python -m reproduce.bundle: the bundle exceeds {MAX_BYTES / 1e6:.0f} MB", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
