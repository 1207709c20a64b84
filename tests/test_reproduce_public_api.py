"""The study driver uses the library's public API only: no ``reproduce/`` module imports a
``coherent_itr`` module whose name starts with ``_``; and the per-query values the ledger's bootstrap
and the SAM analysis read from ``coherent_itr.metrics.per_query`` are the ones they computed before
from the library's private engine (the earlier code is kept here as the reference)."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from coherent_itr.metrics import registry
from coherent_itr.metrics._engine import Plan, run
from coherent_itr.metrics.retrieval import i2t_ranks, t2i_ranks
from reproduce.protocol import ledger
from reproduce.present.analyses import sam

REPRODUCE = Path(ledger.__file__).parent


def _private_imports(tree: ast.AST) -> list[str]:
    """``coherent_itr`` modules (or names imported from one) with a ``_``-prefixed part, anywhere in the tree."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            mods = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for mod in mods:
            parts = mod.split(".")
            if parts[0] == "coherent_itr" and any(p.startswith("_") and not p.startswith("__") for p in parts[1:]):
                out.append(mod)
    return out


def test_the_scan_finds_private_imports():
    src = "import coherent_itr.metrics._engine\nfrom coherent_itr.metrics import _blocks\ndef f():\n"
    src += "    from coherent_itr.metrics._orders import x\n    from coherent_itr import metrics\n"
    found = _private_imports(ast.parse(src))
    assert found == [
        "coherent_itr.metrics._engine",
        "coherent_itr.metrics._blocks",
        "coherent_itr.metrics._orders",
        "coherent_itr.metrics._orders.x",
    ]


def test_reproduce_imports_no_private_library_module():
    files = sorted(REPRODUCE.rglob("*.py"))
    assert len(files) > 10
    bad = {str(f.relative_to(REPRODUCE)): _private_imports(ast.parse(f.read_text())) for f in files}
    assert {f: m for f, m in bad.items() if m} == {}


# --- the earlier implementations (private engine, ranks) as the reference --------------------------------
def _old_per_query_recall(img_emb, cap_emb, image_of_caption, ks=(1, 5, 10)):
    sim = np.asarray(img_emb, dtype=np.float32) @ np.asarray(cap_emb, dtype=np.float32).T
    ks = np.asarray(ks)
    ri, rt = i2t_ranks(sim, image_of_caption), t2i_ranks(sim, image_of_caption)
    return {"i2t": 100.0 * (ri[:, None] < ks[None, :]), "t2i": 100.0 * (rt[:, None] < ks[None, :])}


def _old_ncs_per_query(sim, image_of_caption, rel, k=5, direction="i2t"):
    opts = {"ncs_ks": (int(k),), "ncs_remove_gt": (False,), "ncs_restrict_to_ideal": False}
    plan = Plan(rels={"r": rel}, metrics=((registry.get("ncs"), opts),), directions=(direction,))
    values, ok = run(np.asarray(sim), np.asarray(image_of_caption, dtype=np.int64), plan)[f"ncs{k}_{direction}_r"]
    return np.where(ok, values, np.nan)


def _planted(seed: int):
    rng = np.random.default_rng(seed)
    n_img, cpi = int(rng.integers(3, 30)), int(rng.integers(1, 6))
    ioc = np.repeat(np.arange(n_img), cpi)
    img = rng.normal(size=(n_img, 8))
    cap = img[ioc] + rng.normal(scale=1.5, size=(n_img * cpi, 8))
    img /= np.linalg.norm(img, axis=1, keepdims=True)
    cap /= np.linalg.norm(cap, axis=1, keepdims=True)
    if seed % 3 == 0:  # coarse embeddings: many tied similarities
        img, cap = np.round(img, 1), np.round(cap, 1)
    rel = rng.random((n_img, n_img * cpi))
    rel[0] = 0.0  # an undefined NCS query
    return img, cap, ioc, (np.round(rel, 1) if seed % 2 else rel)


@pytest.mark.parametrize("seed", range(8))
def test_ledger_per_query_recall_is_unchanged(seed):
    img, cap, ioc, _ = _planted(seed)
    old, new = _old_per_query_recall(img, cap, ioc), ledger.per_query_recall(img, cap, ioc)
    assert old.keys() == new.keys()
    for d in old:
        assert new[d].dtype == old[d].dtype and np.array_equal(new[d], old[d])
    assert ledger.rsum_of(new) == ledger.rsum_of(old)


@pytest.mark.parametrize("seed", range(8))
def test_sam_ncs_per_query_is_unchanged(seed):
    img, cap, ioc, rel = _planted(seed)
    sim = img.astype(np.float32) @ cap.astype(np.float32).T
    for k in (1, 5, 10):
        for d in ("i2t", "t2i"):
            assert np.array_equal(
                sam.ncs_per_query(sim, ioc, rel, k, d), _old_ncs_per_query(sim, ioc, rel, k, d), equal_nan=True
            )
