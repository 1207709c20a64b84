"""``reproduce/`` is in import layers (:mod:`reproduce.layers`) with no import circle.

The import graph is read with ``ast`` from every ``import`` / ``from … import`` in each file — function-local ones
included, relative ones resolved — and checked for (a) circles, (b) imports of a higher layer, (c) modules missing
from the layer map (or named in it but absent), (d) imports of a ``coherent_itr`` module or name whose path has a
``_``-prefixed part (the library's private API) and (e) more than :data:`MAX_LOCAL` function-local imports, or one
without a comment saying why it is local. The checker is run on a planted package first, to show it can fail.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from reproduce import layers

REPRODUCE = Path(layers.__file__).resolve().parent
MAX_LOCAL = 30  # function-local imports in reproduce/: optional or heavy dependencies, light commands, workers


@dataclass
class Graph:
    modules: dict[str, Path]  # name relative to the package ("analyses.bcls", "__init__") → file
    edges: dict[str, dict[str, int]] = field(default_factory=dict)  # module → {imported module: first line}
    local: list[tuple[str, int, str, bool]] = field(default_factory=list)  # (module, line, source, commented)
    private: list[tuple[str, int, str]] = field(default_factory=list)  # (module, line, coherent_itr name)


def _relative_name(package_dir: Path, path: Path) -> str:
    parts = list(path.relative_to(package_dir).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def _full(package: str, rel: str) -> str:
    return package if rel == "__init__" else f"{package}.{rel}"


def _is_private(name: str) -> bool:
    parts = name.split(".")
    return parts[0] == "coherent_itr" and any(p.startswith("_") and not p.startswith("__") for p in parts[1:])


def _enclosing_function(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return True
    return False


def _comment_above(lineno: int, lines: list[str], spans: set[int]) -> bool:
    """A comment line right above the group of import lines (blank lines between them allowed) that holds line
    ``lineno``: one comment says why a group of local imports is local."""
    j = lineno - 1
    while j >= 1 and (j in spans or not lines[j - 1].strip()):
        j -= 1
    return j >= 1 and lines[j - 1].strip().startswith("#")


def import_graph(package_dir: Path, package: str) -> Graph:
    """The imports of every module of the package at ``package_dir`` (importable as ``package``)."""
    modules = {_relative_name(package_dir, p): p for p in sorted(package_dir.rglob("*.py"))}
    full_to_rel = {_full(package, r): r for r in modules}

    def internal(name: str) -> str | None:  # the package module ``name`` is, or lies in (longest prefix)
        parts = name.split(".")
        for n in range(len(parts), 0, -1):
            rel = full_to_rel.get(".".join(parts[:n]))
            if rel is not None:
                return rel
        return None

    g = Graph(modules)
    for rel, path in modules.items():
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        tree = ast.parse(source, filename=str(path))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        here = _full(package, rel)
        current = here if path.name == "__init__.py" else here.rpartition(".")[0]
        edges: dict[str, int] = {}
        spans = {
            n
            for node in ast.walk(tree)
            if isinstance(node, (ast.Import, ast.ImportFrom))
            for n in range(node.lineno, node.end_lineno + 1)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
                targets = [internal(n) for n in names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = current.split(".")[: len(current.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([node.module] if node.module else [])])
                names = [base, *(f"{base}.{a.name}" for a in node.names)]
                # ``from pkg import mod`` imports the module pkg.mod; ``from pkg.mod import name`` the module pkg.mod
                targets = [full_to_rel.get(f"{base}.{a.name}") or internal(base) for a in node.names]
            else:
                continue
            for t in targets:
                if t is not None and t != rel:
                    edges.setdefault(t, node.lineno)
            g.private += [(rel, node.lineno, n) for n in names if _is_private(n)]
            if _enclosing_function(node, parents):
                text = " ".join(ln.strip() for ln in lines[node.lineno - 1 : node.end_lineno])
                g.local.append((rel, node.lineno, text, "#" in text or _comment_above(node.lineno, lines, spans)))
        g.edges[rel] = edges
    return g


def _cycles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(out)


def layer_problems(
    package_dir: Path, package: str, layer_of: dict[str, str], order: tuple[str, ...], max_local: int = MAX_LOCAL
) -> list[str]:
    """Every violation of the rules in the module docstring, one readable line each (empty: none)."""
    g = import_graph(package_dir, package)
    problems = []
    for comp in _cycles(g.edges):
        inner = [f"{a} → {b} (line {g.edges[a][b]})" for a in comp for b in sorted(g.edges[a]) if b in comp]
        problems.append(f"import circle among {', '.join(comp)}: {'; '.join(inner)}")
    for m in sorted(set(g.modules) - set(layer_of)):
        problems.append(f"{package}.{m} is in no layer: add it to the layer map")
    for m in sorted(set(layer_of) - set(g.modules)):
        problems.append(f"the layer map names {m}, which is no module of {package}")
    rank = {name: i for i, name in enumerate(order)}
    for m, targets in sorted(g.edges.items()):
        for t, line in sorted(targets.items()):
            if m in layer_of and t in layer_of and rank[layer_of[t]] > rank[layer_of[m]]:
                problems.append(
                    f"upward import: {m} ({layer_of[m]}) imports {t} ({layer_of[t]}) at line {line}: "
                    f"move the code to the layer it belongs to"
                )
    for m, line, name in g.private:
        problems.append(f"{m} line {line} imports {name}: private to the library (a _-prefixed part)")
    if len(g.local) > max_local:
        listing = "\n".join(f"    {m}:{line}  {text}" for m, line, text, _ in g.local)
        problems.append(f"{len(g.local)} function-local imports (at most {max_local}):\n{listing}")
    for m, line, text, commented in g.local:
        if not commented:
            problems.append(f"{m} line {line}: function-local import without a comment saying why: {text}")
    return problems


# --- the checker can fail ------------------------------------------------------------------------------------------
def _plant(root: Path, files: dict[str, str]) -> Path:
    pkg = root / "planted"
    for name, text in files.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    return pkg


def test_the_checker_reports_circles_upward_imports_and_the_rest(tmp_path):
    pkg = _plant(
        tmp_path,
        {
            "__init__.py": "",
            "low.py": "def f():\n    from . import high  # planted\n    return high\n",  # upward, and a circle
            "high.py": "from . import low\nfrom .sub import b\n",
            "sub/__init__.py": "",
            "sub/a.py": "from planted.sub.b import g\n",  # a circle within one layer
            "sub/b.py": "import planted.sub.a\ndef g():\n    import coherent_itr.metrics._engine\n",
            "stray.py": "",
        },
    )
    layer_of = {"__init__": "low", "low": "low", "high": "high", "sub": "high", "sub.a": "high", "sub.b": "high"}
    problems = layer_problems(pkg, "planted", layer_of, ("low", "high"), max_local=1)
    text = "\n".join(problems)
    assert "import circle among high, low: high → low (line 1); low → high (line 2)" in text
    assert "import circle among sub.a, sub.b" in text
    assert "upward import: low (low) imports high (high) at line 2" in text
    assert "planted.stray is in no layer" in text
    assert "sub.b line 3 imports coherent_itr.metrics._engine" in text
    assert "2 function-local imports (at most 1)" in text and "low:2  from . import high  # planted" in text
    assert "sub.b line 3: function-local import without a comment" in text
    assert len(problems) == 7, text


def test_the_checker_passes_a_clean_package(tmp_path):
    pkg = _plant(tmp_path, {"__init__.py": "", "a.py": "import os\n", "b.py": "from . import a\nfrom .a import os\n"})
    assert layer_problems(pkg, "planted", {"__init__": "x", "a": "x", "b": "y"}, ("x", "y")) == []


# --- reproduce/ ----------------------------------------------------------------------------------------------------
def test_every_layer_is_a_folder_named_in_order():
    assert set(layers.FOLDERS.values()) == set(layers.ORDER) and set(layers.ROOT_MODULES.values()) <= set(layers.ORDER)
    assert all((REPRODUCE / folder / "__init__.py").is_file() for folder in layers.FOLDERS)
    assert layers.layer_of("present.analyses.bcls") == "presentation" and layers.layer_of("analyses") is None


def test_reproduce_is_in_layers_without_circles():
    modules = import_graph(REPRODUCE, "reproduce").modules
    problems = layer_problems(REPRODUCE, "reproduce", layers.layer_map(modules), layers.ORDER)
    assert not problems, "reproduce/ breaks its import layers (reproduce/layers.py):\n" + "\n".join(problems)
