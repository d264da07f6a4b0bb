"""The layering as a test (docs/design.md): imports run one way, down, and no two modules import each other.

Layers, bottom to top: ``kvexact.spec`` <- ``kvexact.reference`` <- ``kvexact.kernels`` <-
``kvexact.conformance`` <- the front (``kvexact`` itself: ``kvexact.cli``, ``kvexact.gate``). Every
``import`` and ``from ... import`` counts, at module level or inside a function (a lazy import is still a
dependency), and so does ``importlib.import_module("a.literal.name")``. The graph is read from the source
with the standard library's ``ast`` (grimp and import-linter need every subpackage under its parent's
folder, which the ``package-dir`` layout does not have); cycles are found with ``graphlib``.
"""

from __future__ import annotations

import ast
import graphlib
import importlib.util
from pathlib import Path

LAYERS = ("kvexact.spec", "kvexact.reference", "kvexact.kernels", "kvexact.conformance", "kvexact")


def layer_of(module: str) -> int:
    """The index in :data:`LAYERS` of the innermost layer that holds ``module``."""
    return next(i for i, root in enumerate(LAYERS) if module == root or module.startswith(root + "."))


def project_sources() -> dict[str, tuple[str, bool]]:
    """Module name -> (source, is a package) for every module of the installed project."""
    out: dict[str, tuple[str, bool]] = {}
    for index, root in enumerate(LAYERS):
        spec = importlib.util.find_spec(root)
        assert spec is not None and spec.submodule_search_locations, root
        folder = Path(next(iter(spec.submodule_search_locations)))
        for path in sorted(folder.rglob("*.py")):
            parts = [p for p in path.relative_to(folder).with_suffix("").parts if p != "__init__"]
            name = ".".join([root, *parts])
            if layer_of(name) == index:
                out[name] = (path.read_text(encoding="utf-8"), path.name == "__init__.py")
    return out


def imports_of(name: str, source: str, is_package: bool, known: set[str]) -> set[str]:
    """The project modules ``name`` imports (a name imported from a package counts as its submodule when
    there is one, else as the package)."""
    package = name if is_package else name.rpartition(".")[0]

    def resolve(module: str) -> str | None:
        while module and module not in known:
            module = module.rpartition(".")[0]
        return module or None

    found: set[str | None] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(resolve(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.add(full if full in known else resolve(base))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)):
            found.add(resolve(node.args[0].value))
    return {m for m in found if m is not None and m != name}


def import_graph(sources: dict[str, tuple[str, bool]]) -> dict[str, set[str]]:
    known = set(sources)
    return {name: imports_of(name, src, is_package, known) for name, (src, is_package) in sources.items()}


def upward_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Every (importer, imported) pair where the imported module sits in a higher layer."""
    return sorted((a, b) for a, targets in graph.items() for b in targets if layer_of(b) > layer_of(a))


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One import cycle per layer that has one (an upward import is reported by :func:`upward_imports`)."""
    found = []
    for index in range(len(LAYERS)):
        inside = {a: {b for b in targets if layer_of(b) == index} for a, targets in graph.items()
                  if layer_of(a) == index}
        try:
            tuple(graphlib.TopologicalSorter(inside).static_order())
        except graphlib.CycleError as exc:
            found.append(list(exc.args[1]))
    return found


def test_no_layer_imports_a_layer_above_it():
    assert upward_imports(import_graph(project_sources())) == []


def test_no_two_modules_import_each_other():
    assert cycles(import_graph(project_sources())) == []


def test_every_layer_is_seen():
    graph = import_graph(project_sources())
    assert {layer_of(m) for m in graph} == set(range(len(LAYERS)))
    assert "kvexact.cli" in graph and "kvexact.reference.labs" in graph and "kvexact.spec.checker.model" in graph


def test_the_check_catches_an_upward_import_a_lazy_one_and_a_cycle():
    synthetic = {
        "kvexact.spec.low": ("import kvexact.conformance.high\n", False),
        "kvexact.reference.a": ("def f():\n    from kvexact.reference import b\n", False),
        "kvexact.reference.b": ("import importlib\nimportlib.import_module('kvexact.reference.a')\n", False),
        "kvexact.conformance.high": ("from kvexact.spec import low\n", False),
        "kvexact.cli": ("from kvexact.conformance.high import x\n", True),
    }
    graph = import_graph(synthetic)
    assert upward_imports(graph) == [("kvexact.spec.low", "kvexact.conformance.high")]
    assert [sorted(set(c)) for c in cycles(graph)] == [["kvexact.reference.a", "kvexact.reference.b"]]
