"""The layers hold (docs/design.md, "Layers"): no import cycles among upkeep's modules, the
local engine never reaches up into Spark, nothing outside the local engine touches its
private names, and tests reach project code through imports, not ``sys.path`` edits.

Read from the source with :mod:`ast`; imports under ``if TYPE_CHECKING:`` do not run and
are not counted.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "upkeep"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def _runtime_nodes(tree: ast.AST):
    """Every node except those under ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING",
                                                                  "typing.TYPE_CHECKING"):
            stack.extend(node.orelse)
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def imports_of(module: str) -> set[str]:
    """The upkeep modules ``module`` imports (at import time or lazily in a function)."""
    path = MODULES[module]
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    out: set[str] = set()
    for node in _runtime_nodes(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                target = ".".join(base + (node.module.split(".") if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                if candidate in MODULES:
                    out.add(candidate)
                elif target in MODULES:
                    out.add(target)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in MODULES}
    out.discard(module)
    return out


GRAPH = {m: imports_of(m) for m in MODULES}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
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
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def reachable(start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(GRAPH[m])
    return seen


def test_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles() -> None:
    assert cycles(GRAPH) == []


@pytest.mark.parametrize("start", ["upkeep", "upkeep.local", "upkeep.engine",
                                   "upkeep.pipeline.runner"])
def test_spark_is_not_reached_from_below(start: str) -> None:
    """The package root, the local engine, the contract and the pipeline runner never
    import Spark (the engine registry names it by module path; only the command line and
    ``upkeep explain --engine spark`` ask for Spark by name)."""
    assert not {m for m in reachable(start) if m.startswith("upkeep.spark")}


def test_spark_reads_records_and_sinks_from_the_io_layer() -> None:
    """Only the Spark pipeline runner (which runs a pipeline file) imports the pipeline
    package; everything else on Spark reads records, formats and sinks from upkeep.io."""
    offenders = {m: sorted(i for i in GRAPH[m] if i.startswith("upkeep.pipeline"))
                 for m in GRAPH if m.startswith("upkeep.spark") and m != "upkeep.spark.pipeline"}
    assert {m: i for m, i in offenders.items() if i} == {}
    assert not {m for m in reachable("upkeep.io") if m.startswith(("upkeep.pipeline",
                                                                   "upkeep.spark"))}


def _private_names_of_local_engine() -> set[str]:
    names: set[str] = set()
    for module, path in MODULES.items():
        if not module.startswith("upkeep.local"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                    and not node.attr.startswith("__"):
                names.add(node.attr)
            elif isinstance(node, ast.FunctionDef) and node.name.startswith("_") \
                    and not node.name.startswith("__"):
                names.add(node.name)
    return names


def test_nothing_outside_the_local_engine_touches_its_private_names() -> None:
    private = _private_names_of_local_engine()
    assert "_catalog" in private  # the check reads what it should
    offenders = []
    for module, path in MODULES.items():
        if module.startswith("upkeep.local"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Attribute) and node.attr in private):
                continue
            base = node.value
            if isinstance(base, ast.Name) and base.id in ("self", "cls"):
                continue
            if isinstance(base, ast.Call) and ast.unparse(base.func) == "super":
                continue
            if isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name) \
                    and base.value.id == "self" and base.attr == "_db":
                continue  # a handle reaching its own engine, in that engine's module
            offenders.append(f"{module}:{node.lineno}: {ast.unparse(node)}")
    assert offenders == []


def test_tests_do_not_edit_sys_path() -> None:
    edits = [p.name for p in (ROOT / "tests").glob("*.py")
             if p.name != Path(__file__).name and "sys.path" in p.read_text()]
    assert edits == []


def test_docstrings_point_at_sections_that_exist() -> None:
    """Every ``design.md, "Section"`` a module cites is a heading of docs/design.md."""
    import re

    headings = {line.lstrip("#").strip()
                for line in (ROOT / "docs" / "design.md").read_text().splitlines()
                if line.startswith("#")}
    cited = []
    for module, path in MODULES.items():
        text = " ".join(path.read_text().split())  # a citation may wrap across lines
        cited += [(module, m) for m in re.findall(r'design\.md, "([^"]+)"', text)]
    assert cited, "the check found no citations to read"
    assert [(module, section) for module, section in cited if section not in headings] == []
