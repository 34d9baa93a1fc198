"""The import contract: layers import only downward, and no two modules import each other (directly or in a cycle);
within a package, no two of its parts (modules or subpackages) do either, and geometry's parts keep their floors.

The layers, bottom to top, are the README's Development section. Every ``import`` statement counts, at module level or
inside a function.
"""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "ntpbias"

#: bottom to top; a module may import its own layer and the layers below it
LAYERS = [
    ("plumbing", {"errors", "_lazy", "_tensor", "_repr", "io", "config", "limits", "threads", "signals", "progress",
                  "stats", "parallel"}),
    ("data", {"data"}),
    ("models", {"models"}),
    ("geometry", {"geometry"}),
    ("metrics", {"metrics"}),
    ("training", {"training"}),
    ("results", {"results"}),
    ("experiments", {"experiments"}),
    ("report", {"report"}),
    ("api", {"api"}),
    ("sweep", {"sweep"}),
    ("cli", {"cli", "__main__"}),
]
LAYER_OF = {name: i for i, (_, names) in enumerate(LAYERS) for name in names}
#: geometry's floors, bottom to top (the README's Development section): a part imports only its floor and those below
GEOMETRY_LAYERS = [
    ("foundations", {"config", "constraints", "norms", "scaling"}),
    ("solver machinery", {"solvers"}),
    ("paper A's objects, the max-margin programs", {"linear", "margins"}),
    ("separability, each paper's objects", {"separability", "attention", "transformer", "ufm"}),
    ("everything for one dataset", {"analysis"}),
    ("a model read on its own features", {"lm"}),
]
GEOMETRY_LAYER_OF = {name: i for i, (_, names) in enumerate(GEOMETRY_LAYERS) for name in names}


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in SRC.rglob("*.py")}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The ntpbias modules ``name`` imports (a ``from pkg import sub`` of a submodule counts as importing it)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets = [mod] + [f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in known]
        else:
            continue
        out.update(t for t in targets if t in known and t != name)
    return out


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {name: _imports(name, path, set(mods)) for name, path in mods.items()}


def _layer(module: str) -> int | None:
    parts = module.split(".")
    return None if len(parts) == 1 else LAYER_OF.get(parts[1])


def test_every_module_has_a_layer():
    unplaced = sorted(m for m in _modules() if m != "ntpbias" and _layer(m) is None)
    assert not unplaced, f"add these modules to a layer of the contract (and the README): {unplaced}"


def test_no_upward_imports():
    upward = sorted(f"{m} -> {t}" for m, targets in _graph().items() for t in targets
                    if m != "ntpbias" and t != "ntpbias" and _layer(t) > _layer(m))
    assert not upward, "imports that point up the layers:\n" + "\n".join(upward)


def test_no_import_cycles():
    graph = _graph()
    graph["ntpbias"] = set()  # the package root only re-exports, lazily (see its module docstring)
    cycles = _cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for t in sorted(graph.get(node, ())):
            if state.get(t) == 1:
                cycles.append(stack[stack.index(t):] + [t])
            elif t not in state:
                visit(t, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    return cycles


def _part_of(package: str, module: str) -> str | None:
    """The module or subpackage of ``package`` that holds ``module`` (None outside it, or for its ``__init__``)."""
    parts = module.split(".")
    depth = package.count(".") + 1
    return ".".join(parts[:depth + 1]) if module.startswith(package + ".") and len(parts) > depth else None


def test_no_cycles_between_sibling_packages():
    """Within every package, its modules and subpackages (each with everything inside it) import each other without a
    cycle: ``geometry.margins`` may use ``geometry.solvers`` or the reverse, never both."""
    graph = _graph()
    packages = {m for m, path in _modules().items() if path.name == "__init__.py"}
    found = []
    for package in sorted(packages):
        siblings: dict[str, set[str]] = {}
        for m, targets in graph.items():
            a = _part_of(package, m)
            if a is not None:
                siblings.setdefault(a, set()).update(b for t in targets if (b := _part_of(package, t)) not in (None, a))
        found += _cycles(siblings)
    assert not found, "cycles between the parts of a package:\n" + "\n".join(" -> ".join(c) for c in found)


def test_geometry_parts_import_only_downward():
    parts = {m: m.split(".")[2] for m in _modules() if m.startswith("ntpbias.geometry.")}
    unplaced = sorted({p for p in parts.values() if p not in GEOMETRY_LAYER_OF})
    assert not unplaced, f"add these parts of geometry to GEOMETRY_LAYERS (and the README): {unplaced}"
    upward = sorted(f"{m} -> {t}" for m, targets in _graph().items() if m in parts for t in targets
                    if t in parts and GEOMETRY_LAYER_OF[parts[t]] > GEOMETRY_LAYER_OF[parts[m]])
    assert not upward, "geometry imports that point up its floors:\n" + "\n".join(upward)


@pytest.mark.parametrize("module", sorted(_modules()))
def test_no_module_is_much_over_500_lines(module):
    lines = len(_modules()[module].read_text(encoding="utf-8").splitlines())
    assert lines <= 550, f"{module} has {lines} lines: split it by concept"
