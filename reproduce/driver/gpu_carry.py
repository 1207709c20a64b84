"""``python -m reproduce.driver.gpu_carry --out DIR [--profiles default,smoke]``: what a bare GPU machine needs
beside the code to train the synthetic world — the Sentence-BERT embeddings of its captions.

Such a machine (torch and the scientific stack; no sentence model, no network) cannot embed captions. This writes
``DIR/cache/sbert/<model>/<caption set>.npz``, exactly the files the study's preparation writes on this machine
(:func:`reproduce.protocol.prepare.prepare`, one call per world: every caption of every split), for each profile's
synthetic world; ``scripts/gpu_study.sh DIR OUT`` copies them into the GPU machine's run cache, where
:func:`coherent_itr.data.sbert.model_id` serves them without the model. Flickr8k travels as its bundle instead
(``python -m reproduce.bundle --data flickr8k --out DIR/flickr8k``: features and caption embeddings).

Sizes (float32): the default world's 22,380 distinct captions are 34 MB, the smoke world's 3,498 are 5.4 MB.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from coherent_itr import paths

from reproduce.protocol import prepare
from reproduce.spec import experiments
from reproduce.spec.profiles import PROFILES, profile_for


def seed_sentence_embeddings(out: str | Path, profiles: list[str], progress: bool = True) -> list[Path]:
    """Embed the captions of each profile's synthetic world into ``out/cache`` (the files preparation writes);
    returns the embedding files."""
    cache = Path(out) / "cache"
    before = os.environ.get(paths.CACHE_ENV)
    os.environ[paths.CACHE_ENV] = str(cache)
    try:
        for name in profiles:
            prepare.prepare(experiments.plan(profile_for(name, "synthetic")), progress=progress)
    finally:
        if before is None:
            os.environ.pop(paths.CACHE_ENV, None)
        else:
            os.environ[paths.CACHE_ENV] = before
    for sub in cache.iterdir():  # only the embeddings travel: the world itself is generated there
        if sub.name != "sbert":
            shutil.rmtree(sub) if sub.is_dir() else sub.unlink()
    return sorted((cache / "sbert").rglob("*.npz"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m reproduce.driver.gpu_carry", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="the folder that travels with the code (e.g. .gpu/)")
    ap.add_argument("--profiles", default="default,smoke", help=f"comma-separated from {', '.join(PROFILES)}")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    names = [p for p in args.profiles.split(",") if p]
    unknown = sorted(set(names) - set(PROFILES))
    if unknown:
        print(f"python -m reproduce.driver.gpu_carry: unknown profile(s) {unknown}; choose from {list(PROFILES)}")
        return 2
    files = seed_sentence_embeddings(args.out, names, progress=not args.quiet)
    for f in files:
        print(f"  {f}  {f.stat().st_size / 2**20:.1f} MiB")
    print(f"gpu_carry: {len(files)} caption-embedding file(s) in {Path(args.out) / 'cache'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
