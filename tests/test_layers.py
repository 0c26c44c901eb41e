"""The package's import graph against its declared layer order (docs/architecture.md).

Read statically (``ast``; every import counts, also those inside functions and
``TYPE_CHECKING`` blocks): a module may import its own layer and the layers below
it, never a higher one; no two modules import each other, directly or through a
cycle; no module is longer than 600 lines.  Each failure names the offending
edge as ``importer:line -> imported``.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE = "spyre_rules"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE
MAX_LINES = 600

#: Bottom first.  A module belongs to the layer of the longest prefix naming it.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    # torch-free leaves every layer may use: error classes, settings, package data.
    ("floor", ("spyre_rules.errors", "spyre_rules._lazy", "spyre_rules.config",
               "spyre_rules.resources")),
    # the bundled example models: torch only, so any layer (explain's programs) may build them.
    ("examples", ("spyre_rules.examples",)),
    # what every stage that reads or edits Inductor IR shares (graph state, IR edits, DimHint).
    ("ir", ("spyre_rules.ir",)),
    ("lang", ("spyre_rules.lang",)),
    ("facts", ("spyre_rules.facts",)),
    # the public facades of the layout model and spans (re-exports of facts).
    ("facades", ("spyre_rules.layout", "spyre_rules.spans")),
    # OpSpec / LoopSpec / TensorArg, the memory map, the pointwise vocabulary; a
    # TensorArg names its device DataFormat, so it sits on the layout facts.
    ("program", ("spyre_rules.program",)),
    ("engine", ("spyre_rules.engine",)),
    ("hints", ("spyre_rules.hints",)),
    ("passes", ("spyre_rules.passes",)),
    ("scheduler", ("spyre_rules.scheduler",)),
    ("codegen", ("spyre_rules.codegen",)),
    ("executor", ("spyre_rules.executor",)),
    # the composition root: wires every pass into Inductor, declares the pass lists.
    ("backend", ("spyre_rules.backend",)),
    # the public package root (lazy names, backend registration).
    ("api", ("spyre_rules",)),
    ("commands", ("spyre_rules.commands", "spyre_rules.cli", "spyre_rules.__main__")),
]


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path = ROOT) -> dict[str, Path]:
    return {_module_name(root, p): p for p in sorted(root.rglob("*.py"))}


def _resolve(mods: dict[str, Path], importer: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = importer.split(".")
    base = base if mods[importer].name == "__init__.py" else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def edges(root: Path = ROOT) -> list[tuple[str, int, str]]:
    """``(importer, line, imported)`` for every import of a package module."""
    mods = modules(root)
    found = []
    for importer, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                source = _resolve(mods, importer, node)
                # ``from pkg import mod`` imports the module pkg.mod; otherwise a name of pkg.
                targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in mods else source
                           for a in node.names]
            for target in dict.fromkeys(targets):
                if target == PACKAGE or target.startswith(PACKAGE + "."):
                    while target not in mods:  # ``import a.b.c`` of a name: its module
                        target = target.rsplit(".", 1)[0]
                    if target != importer:
                        found.append((importer, node.lineno, target))
    return found


@functools.cache
def _package_edges() -> tuple[tuple[str, int, str], ...]:
    return tuple(edges())


def layer_of(module: str) -> int | None:
    best: tuple[int, int] | None = None
    for rank, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), rank)
    return None if best is None else best[1]


def upward_edges(found: list[tuple[str, int, str]] | tuple, root: Path = ROOT) -> list[str]:
    """``path:line importer -> imported (low imports high)`` for every upward edge."""
    out = []
    for importer, line, imported in found:
        low, high = layer_of(importer), layer_of(imported)
        if low is not None and high is not None and high > low:
            out.append(f"{_where(root, importer, line)} {importer} -> {imported} "
                       f"({LAYERS[low][0]} imports {LAYERS[high][0]})")
    return out


def _where(root: Path, importer: str, line: int) -> str:
    return f"{modules(root)[importer].relative_to(root.parent)}:{line}"


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def circular_edges(found: list[tuple[str, int, str]] | tuple, root: Path = ROOT) -> list[list[str]]:
    """Per import cycle, every edge inside it as ``path:line importer -> imported``."""
    graph: dict[str, set[str]] = {}
    lines: dict[tuple[str, str], int] = {}
    for importer, line, imported in found:
        graph.setdefault(importer, set()).add(imported)
        lines.setdefault((importer, imported), line)
    return [sorted(f"{_where(root, a, lines[a, b])} {a} -> {b}"
                   for a in component for b in graph.get(a, ()) if b in set(component))
            for component in cycles(graph)]


def test_every_module_has_a_declared_layer():
    assert [m for m in modules() if layer_of(m) is None] == []


def test_no_import_reaches_a_higher_layer():
    assert upward_edges(_package_edges()) == []


def test_no_circular_imports():
    assert circular_edges(_package_edges()) == []


def test_the_architecture_doc_lists_the_declared_layers_in_order():
    text = (ROOT.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    table = text.split("## Layers", 1)[1].split("\n\n**", 1)[0]
    rows = [line.split("|")[1].strip() for line in table.splitlines()
            if line.startswith("| ") and not line.startswith("| layer") and "---" not in line]
    assert rows == [name for name, _ in LAYERS]


def long_modules(root: Path = ROOT) -> dict[str, int]:
    """Every module longer than ``MAX_LINES`` lines -> its line count."""
    return {name: n for name, path in modules(root).items()
            if (n := len(path.read_text().splitlines())) > MAX_LINES}


def test_no_module_over_600_lines():
    assert long_modules() == {}


def test_the_walk_names_upward_and_circular_edges_also_inside_functions(tmp_path):
    root = tmp_path / PACKAGE
    for folder in ("", "ir", "backend"):
        (root / folder).mkdir(exist_ok=True)
        (root / folder / "__init__.py").write_text("")
    (root / "ir" / "state.py").write_text(
        "import os\n\n\ndef later():\n    from spyre_rules.backend import compile\n")
    (root / "backend" / "compile.py").write_text("from ..ir.state import later\n")
    found = edges(root)
    assert sorted(found) == [("spyre_rules.backend.compile", 1, "spyre_rules.ir.state"),
                             ("spyre_rules.ir.state", 5, "spyre_rules.backend.compile")]
    assert upward_edges(found, root) == [
        "spyre_rules/ir/state.py:5 spyre_rules.ir.state -> spyre_rules.backend.compile "
        "(ir imports backend)"]
    assert circular_edges(found, root) == [[
        "spyre_rules/backend/compile.py:1 spyre_rules.backend.compile -> spyre_rules.ir.state",
        "spyre_rules/ir/state.py:5 spyre_rules.ir.state -> spyre_rules.backend.compile"]]


def test_a_cycle_inside_one_layer_fails_without_any_upward_edge(tmp_path):
    """The cycle check stands on its own: two modules of one layer importing each
    other break no layer rule, and are still named."""
    root = tmp_path / PACKAGE
    for folder in ("", "facts"):
        (root / folder).mkdir(exist_ok=True)
        (root / folder / "__init__.py").write_text("")
    (root / "facts" / "alpha.py").write_text("from spyre_rules.facts import beta\n")
    (root / "facts" / "beta.py").write_text("import os\n\nfrom .alpha import thing\n")
    found = edges(root)
    assert upward_edges(found, root) == []
    assert circular_edges(found, root) == [[
        "spyre_rules/facts/alpha.py:1 spyre_rules.facts.alpha -> spyre_rules.facts.beta",
        "spyre_rules/facts/beta.py:3 spyre_rules.facts.beta -> spyre_rules.facts.alpha"]]


def test_a_module_over_600_lines_is_named(tmp_path):
    root = tmp_path / PACKAGE
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "short.py").write_text("x = 1\n" * MAX_LINES)
    (root / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    assert long_modules(root) == {"spyre_rules.long": MAX_LINES + 1}
