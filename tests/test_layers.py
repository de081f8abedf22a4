"""The package's layers (docs/architecture.md, "Package layout and layers"): every import points down or stays
in its own subpackage, no two modules import each other through any chain, no module
reaches into another subpackage's private (``_``) names, no module imports snakemake, and every
subpackage's ``__init__`` says what it owns and which layers it may import (a "May import:"
paragraph equal to :data:`LAYERS`' rule).

Reads the source with :mod:`ast` (nothing is imported), counting every import: absolute and
relative (resolved against the importing module's package), module level, inside functions
(lazy) and under ``TYPE_CHECKING``, since each couples the two modules. The checks are
functions of source text, so the tests at the end run each on a synthetic module to show it
can fail.
"""

from __future__ import annotations

import ast
import re
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
#: what the package never imports (docs/architecture.md: workflow/scripts are the only bridge)
FORBIDDEN = "snakemake"

Import = tuple[str, list[str], int]  # (absolute module, names taken from it, line)


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def absolute(module: str | None, level: int, importer: str, package: bool) -> str:
    """The absolute name ``from <level dots><module> import ...`` means in ``importer`` (an
    ``__init__`` when ``package``), as :func:`importlib.util.resolve_name` resolves it; a
    relative import that climbs above the top package resolves from the empty name."""
    if level == 0:
        return module or ""
    parts = importer.split(".") if package else importer.split(".")[:-1]
    base = parts[: max(len(parts) - (level - 1), 0)]
    return ".".join([*base, *([module] if module else [])])


def all_imports(source: str, importer: str, package: bool) -> list[Import]:
    """Every import statement of ``source`` (the module ``importer``), absolute names."""
    found: list[Import] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            target = absolute(node.module, node.level, importer, package)
            found.append((target, [a.name for a in node.names], node.lineno))
        elif isinstance(node, ast.Import):
            found.extend((alias.name, [], node.lineno) for alias in node.names)
    return found


def imports_of(source: str, importer: str, package: bool) -> list[Import]:
    """The imports of mastif modules, absolute and relative alike."""
    return [i for i in all_imports(source, importer, package) if i[0].split(".")[0] == "mastif"]


def forbidden_imports(source: str, importer: str, package: bool) -> list[str]:
    """Where ``source`` imports :data:`FORBIDDEN`: an import statement (absolute or relative)
    or ``importlib.import_module`` / ``__import__`` of a string literal."""
    hits = []
    for target, names, line in all_imports(source, importer, package):
        # "from ... import snakemake" climbing above mastif names it as an imported name
        full = [target, *(f"{target}.{n}" if target else n for n in names)]
        hits += [f"line {line}: import {m}" for m in full if m.split(".")[0] == FORBIDDEN][:1]
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and node.args):
            continue
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        arg = node.args[0]
        if (
            called in {"import_module", "__import__"}
            and isinstance(arg, ast.Constant)
            and isinstance(arg.value, str)
            and arg.value.split(".")[0] == FORBIDDEN
        ):
            hits.append(f"line {node.lineno}: {called}({arg.value!r})")
    return sorted(set(hits))


def subpackage(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def edges_of(
    importer: str, source: str, package: bool, modules: set[str] | dict[str, Path]
) -> list[tuple[str, str, list[str], int]]:
    """(importer, imported module, names taken from it, line) for each import of a mastif
    module; ``modules`` tells a submodule imported by name from a name in its package."""
    edges = []
    for target, names, line in imports_of(source, importer, package):
        # "from mastif.tools import base" imports the module mastif.tools.base
        resolved = [f"{target}.{n}" for n in names if f"{target}.{n}" in modules]
        for t in resolved or [target]:
            edges.append((importer, t, names if not resolved else [], line))
    return edges


def against_the_layers(edges: list[tuple[str, str, list[str], int]]) -> list[str]:
    """The edges that import a subpackage of the same or a higher layer."""
    wrong = []
    for source, target, _, line in edges:
        src_pkg, dst_pkg = subpackage(source), subpackage(target)
        if source in ROOT_MODULES or src_pkg == dst_pkg or dst_pkg is None:
            continue
        if dst_pkg not in RANK or RANK[dst_pkg] >= RANK[src_pkg]:
            where = "up" if RANK.get(dst_pkg, len(LAYERS)) > RANK[src_pkg] else "across"
            wrong.append(f"{source}:{line} imports {target} ({where})")
    return wrong


def may_import(pkg: str) -> set[str]:
    """The layer rule: the subpackages of every lower layer, as ``mastif.<name>``."""
    return {f"mastif.{p}" for p, rank in RANK.items() if rank < RANK[pkg]}


MAY_IMPORT = re.compile(r"^May import:(.*?)(?:\n\s*\n|\Z)", re.MULTILINE | re.DOTALL)


def names_module(docstring: str, name: str) -> bool:
    """Whether the docstring names module ``name`` (``name.py``, ``name/``, ````name````
    or ``:mod:`...name```)."""
    n = re.escape(name)
    return bool(
        re.search(rf"(?<![\w/.]){n}(\.py|/)(?!\w)", docstring)
        or re.search(rf"``{n}``", docstring)
        or re.search(rf":mod:`~?(?:[\w.]*\.)?{n}`", docstring)
    )


def init_problems(package: str, docstring: str | None, owned: list[str]) -> list[str]:
    """What the ``__init__`` docstring of ``package`` lacks: a word on each module it owns
    (``owned``: its modules and subpackages, by last name) and a "May import:" paragraph
    naming exactly the subpackages :func:`may_import` allows (its own may be named too)."""
    if not docstring:
        return [f"{package}: no docstring"]
    problems = [
        f"{package}: the docstring does not name its module {m!r}"
        for m in owned
        if not names_module(docstring, m)
    ]
    found = MAY_IMPORT.findall(docstring)
    pkg = subpackage(package)
    if len(found) != 1:
        problems.append(f"{package}: {len(found)} 'May import:' paragraphs, not one")
    elif pkg in RANK:
        said = {f"mastif.{m}" for m in re.findall(r"\bmastif\.(\w+)", found[0])}
        said.discard(f"mastif.{pkg}")
        expected = may_import(pkg)
        if said != expected:
            problems.append(
                f"{package}: 'May import:' does not say what the layers allow: it names "
                f"{sorted(said - expected)} they forbid and leaves out {sorted(expected - said)}"
            )
    return problems


def package_graph() -> tuple[dict[str, Path], list[tuple[str, str, list[str], int]]]:
    modules = {module_name(p): p for p in (SRC / "mastif").rglob("*.py")}
    edges = []
    for name, path in modules.items():
        edges += edges_of(name, path.read_text(encoding="utf-8"), is_package(path), modules)
    return modules, edges


MODULES, EDGES = package_graph()
PACKAGES = sorted(m for m, p in MODULES.items() if is_package(p) and m not in ROOT_MODULES)


def test_every_subpackage_has_a_layer():
    packages = {subpackage(m) for m in MODULES} - {None, "_compat"}
    assert packages <= set(RANK), f"subpackages without a layer: {packages - set(RANK)}"


def test_no_import_against_the_layers():
    upward = against_the_layers(EDGES)
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


def test_the_package_never_imports_snakemake():
    found = [
        f"{path.relative_to(SRC)}: {hit}"
        for name, path in MODULES.items()
        for hit in forbidden_imports(path.read_text(encoding="utf-8"), name, is_package(path))
    ]
    assert not found, f"{FORBIDDEN} imported:\n  " + "\n  ".join(found)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_each_module_has_a_docstring(module):
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    assert ast.get_docstring(tree), f"{module} has no docstring saying what it owns"


@pytest.mark.parametrize("package", PACKAGES)
def test_each_init_says_what_it_owns_and_may_import(package):
    path = MODULES[package]
    owned = sorted(
        p.stem if p.suffix == ".py" else p.name
        for p in path.parent.iterdir()
        if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").is_file()
    )
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    problems = init_problems(package, docstring, owned)
    assert not problems, "\n".join(problems)


# -- each check can fail: the checkers on synthetic modules ----------------------------------


@pytest.mark.parametrize(
    ("module", "level", "importer", "package", "expected"),
    [
        (None, 1, "mastif.analysis.stats", False, "mastif.analysis"),
        ("stats", 1, "mastif.analysis", True, "mastif.analysis.stats"),
        ("core", 2, "mastif.analysis.stats", False, "mastif.core"),
        ("core.trace", 2, "mastif.analysis", True, "mastif.core.trace"),
        ("viewer.site", 1, "mastif.reporting.plots", False, "mastif.reporting.viewer.site"),
        (None, 3, "mastif.reporting.viewer.site", False, "mastif"),
        ("mastif.core", 0, "mastif.analysis.stats", False, "mastif.core"),
    ],
)
def test_relative_imports_resolve_against_the_package(module, level, importer, package, expected):
    assert absolute(module, level, importer, package) == expected


def test_a_relative_import_against_the_layers_is_caught():
    source = "from ..reporting import plots\nfrom . import blocked\nfrom ..core.trace import Run\n"
    modules = {"mastif.reporting.plots", "mastif.analysis.blocked", "mastif.core.trace"}
    edges = edges_of("mastif.analysis.stats", source, False, modules)
    assert {t for _, t, _, _ in edges} == modules
    assert against_the_layers(edges) == [
        "mastif.analysis.stats:1 imports mastif.reporting.plots (up)"
    ]
    # across one layer, from a package's __init__ (its package is itself)
    source = "from .base import Tool\nfrom ..web import store\n"
    edges = edges_of("mastif.tools", source, True, set())
    assert against_the_layers(edges) == ["mastif.tools:2 imports mastif.web (across)"]


@pytest.mark.parametrize(
    "source",
    [
        "import snakemake",
        "import snakemake.utils as su",
        "from snakemake.utils import validate",
        "from snakemake import shell",
        "def f():\n    import snakemake\n",
        "import importlib\nimportlib.import_module('snakemake.io')",
        "from importlib import import_module\nimport_module('snakemake')",
        "__import__('snakemake')",
        "from ... import snakemake",  # climbs above mastif: the top-level module
    ],
)
def test_a_snakemake_import_is_caught(source):
    assert forbidden_imports(source, "mastif.core.config", False)


def test_a_snakemake_mention_is_not_an_import():
    source = '"""the package never imports snakemake"""\nimport snakemake_like\nx = "snakemake"\n'
    assert not forbidden_imports(source, "mastif.core.config", False)


def test_an_init_with_a_wrong_may_import_line_is_caught():
    owned = ["blocked", "stats"]
    lower = sorted(may_import("analysis"), key=lambda m: RANK[m.split(".")[1]])
    owns = "Statistics: ``blocked`` and ``stats``."
    line = "May import: " + ", ".join(lower) + "."

    def problems(docstring: str | None) -> str:
        return "\n".join(init_problems("mastif.analysis", docstring, owned))

    assert problems(f"{owns}\n\n{line}") == ""
    assert problems(f"{owns}\n\n{line}\n\nMore text naming mastif.reporting.") == ""
    # a layer left out, a layer too many, no line, two lines, a module not named, no docstring
    assert "what the layers allow" in problems(f"{owns}\n\n{line.replace('mastif.core, ', '')}")
    assert "what the layers allow" in problems(f"{owns}\n\n{line[:-1]}, mastif.reporting.")
    assert "not one" in problems(owns)
    assert "not one" in problems(f"{owns}\n\n{line}\n\n{line}")
    assert "module 'stats'" in problems(f"Statistics: ``blocked`` and tests.\n\n{line}")
    assert problems(None) == "mastif.analysis: no docstring"
    # the lowest layer may import no other subpackage; naming its own is no error
    assert init_problems("mastif.core", "May import: no subpackage but mastif.core.", []) == []
    assert init_problems("mastif.core", "May import: mastif.tools.", [])
