"""What tests of several folders share: the repository's paths and a fake Flickr8k release.

Importable from every test as ``helpers`` (``tests/`` is on the path: the root ``conftest.py`` lives there).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from coherent_itr.data import flickr8k as f8

ROOT = Path(__file__).resolve().parent.parent  # the repository
TESTS = ROOT / "tests"
DATA = TESTS / "data"  # generated pinned numbers


def load_benchmark(name: str):
    """The script ``benchmarks/<name>.py`` as a module (the benchmarks are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# a fake release: 2 train, 1 dev, 2 test images (tiny JPEGs), judgements, and the bogus image
SPLITS = {"train": ["10_a.jpg", "11_b.jpg"], "dev": ["20_c.jpg"], "test": ["30_d.jpg", "31_e.jpg"]}


def make_release(root: Path) -> Path:
    """A fake Flickr8k release under ``root``: :data:`SPLITS`' images (tiny JPEGs, one needing a resize), an unlisted
    image, captions (with the real release's bogus caption line), expert and crowd judgements (one malformed line)."""
    from PIL import Image

    (root / "images").mkdir(parents=True)
    rng = np.random.default_rng(0)
    names = [n for ns in SPLITS.values() for n in ns] + ["99_unlisted.jpg"]
    for k, n in enumerate(names):
        size = (224, 224) if k % 2 == 0 else (300, 200)  # one needs resizing
        arr = (rng.random((size[1], size[0], 3)) * 255).astype(np.uint8)
        Image.fromarray(arr).save(root / "images" / n, quality=90)
    for s, f in f8.SPLIT_FILES.items():
        (root / f).write_text("".join(n + "\n" for n in SPLITS[s]))
    lines = []
    for n in names + ["2258277193_586949ec62.jpg.1"]:
        for k in range(5):
            lines.append(f"{n}#{k}\tA caption {k} of {n} .")
    (root / f8.TOKEN_FILE).write_text("\n".join(lines) + "\n")
    (root / f8.EXPERT_FILE).write_text(
        "30_d.jpg\t30_d.jpg#2\t4\t4\t3\n"
        "30_d.jpg\t31_e.jpg#0\t1\t2\t2\n"
        "31_e.jpg\t10_a.jpg#1\t1\t1\t1\n"  # caption of a train image: not aligned to test
        "31_e.jpg\t30_d.jpg#4\t2\t3\t3\n"
    )
    (root / f8.CROWD_FILE).write_bytes(
        b"30_d.jpg\t31_e.jpg#3\t0.333333333333333\t1\t2\n"
        b"3\xff\xfe garbage \x00\n"
        b"10_a.jpg\t11_b.jpg#0\t0.5\t2\t2\n"
        b"31_e.jpg\t31_e.jpg#1\t1\t3\t0\n"
    )
    return root
