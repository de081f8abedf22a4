"""The package's layers (docs/architecture.md, "Package layout and layers"): every import points down or stays
in its own subpackage, no two modules import each other through any chain, and no module
reaches into another subpackage's private (``_``) names.

Reads the source with :mod:`ast` (nothing is imported), counting every import: module level,
inside functions (lazy) and under ``TYPE_CHECKING``, since each couples the two modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

from tests.support.paths import REPO

SRC = REPO / "src"

#: lowest first; a subpackage may import its own modules and those of lower layers only.
#: Subpackages in one layer are independent of each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("core",),
    ("tools", "web"),
    ("tasks",),
    ("providers",),
    ("protocols",),
    ("frameworks",),
    ("evaluation",),
    ("execution",),
    ("analysis",),
    ("reporting",),
    ("importers",),
    ("cli",),
)
RANK = {pkg: rank for rank, layer in enumerate(LAYERS) for pkg in layer}
#: mastif/__init__.py: the version and the aliases of moved plugin-API modules (_compat)
ROOT_MODULES = {"mastif", "mastif._compat"}


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> list[tuple[str, list[str], int]]:
    """(imported module, names taken from it, line) for every import of a mastif module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] == "mastif":
                found.append((node.module, [a.name for a in node.names], node.lineno))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "mastif":
                    found.append((alias.name, [], node.lineno))
    return found


def subpackage(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def package_graph() -> tuple[dict[str, Path], list[tuple[str, str, list[str], int]]]:
    modules = {module_name(p): p for p in (SRC / "mastif").rglob("*.py")}
    edges = []
    for name, path in modules.items():
        for target, names, line in imports_of(path):
            # "from mastif.tools import base" imports the module mastif.tools.base
            resolved = [f"{target}.{n}" for n in names if f"{target}.{n}" in modules]
            for t in resolved or [target]:
                edges.append((name, t, names if not resolved else [], line))
    return modules, edges


MODULES, EDGES = package_graph()


def test_every_subpackage_has_a_layer():
    packages = {subpackage(m) for m in MODULES} - {None, "_compat"}
    assert packages <= set(RANK), f"subpackages without a layer: {packages - set(RANK)}"


def test_no_import_against_the_layers():
    upward = []
    for source, target, _, line in EDGES:
        src_pkg, dst_pkg = subpackage(source), subpackage(target)
        if source in ROOT_MODULES or src_pkg == dst_pkg or dst_pkg is None:
            continue
        if RANK[dst_pkg] >= RANK[src_pkg]:
            where = "up" if RANK[dst_pkg] > RANK[src_pkg] else "across"
            upward.append(f"{MODULES[source].relative_to(SRC)}:{line} imports {target} ({where})")
    assert not upward, "imports against the layers:\n  " + "\n  ".join(upward)


def test_no_import_circles():
    graph = nx.DiGraph((s, t) for s, t, _, _ in EDGES if s != t and t in MODULES)
    circles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert not circles, f"import circles: {circles}"


def test_no_private_names_across_subpackages():
    private = [
        f"{MODULES[s].relative_to(SRC)}:{line} takes {', '.join(n for n in names if n.startswith('_'))} "
        f"from {t}"
        for s, t, names, line in EDGES
        if subpackage(s) != subpackage(t) and any(n.startswith("_") for n in names)
    ]
    assert not private, "private names used across subpackages:\n  " + "\n  ".join(private)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_each_module_has_a_docstring(module):
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    assert ast.get_docstring(tree), f"{module} has no docstring saying what it owns"
