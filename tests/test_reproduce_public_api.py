"""The study driver uses the library's public API only: no ``reproduce/`` module imports a ``coherent_itr`` module
whose name starts with ``_``. (The per-query values the ledger's test-set variance and the SAM analysis read from
``coherent_itr.metrics.per_query`` are checked against loops of their definitions in ``tests/lib/test_per_query.py``
and ``tests/reproduce/present/analyses/test_analyses_sam.py``.)"""

from __future__ import annotations

import ast
from pathlib import Path


from reproduce.protocol import ledger

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
