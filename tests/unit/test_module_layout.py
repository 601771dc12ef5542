"""The shape of functions/asyncz: no import cycle, short modules, one name per concept."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2] / "functions"
PACKAGE = ROOT / "asyncz"
MAX_LINES = 350
RETIRED_NAMES = {"flow"}  # flow control is `limits` in every layer
# A migration's file name is its version in schema_migrations: renaming one would apply it again.
MIGRATIONS = PACKAGE / "store" / "sql" / "migrations"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Every asyncz module `name` imports, wherever the import sits (TYPE_CHECKING, functions)."""
    is_package = path.name == "__init__.py"
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")
                anchor = anchor if is_package else anchor[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:  # `from pkg import submodule` imports the submodule
                sub = f"{base}.{alias.name}"
                targets.add(sub if sub in known else base)
    return {t for t in targets if t in known and t != name}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(name, path, known) for name, path in modules.items()}


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as a closed path, or None (iterative depth-first search)."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    for start in sorted(graph):
        if start in state:
            continue
        path: list[str] = [start]
        todo: list[list[str]] = [sorted(graph[start])]
        state[start] = 1
        while path:
            if not todo[-1]:
                state[path.pop()] = 2
                todo.pop()
                continue
            nxt = todo[-1].pop()
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                todo.append(sorted(graph[nxt]))
    return None


def test_no_module_of_asyncz_imports_itself_through_a_cycle() -> None:
    cycle = _find_cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_finder_names_a_cycle_it_is_given() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert _find_cycle(graph) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_module_of_asyncz_is_over_the_line_budget() -> None:
    long = {
        name: n
        for name, path in _modules().items()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_no_path_under_functions_carries_a_retired_name() -> None:
    carriers = [
        str(p.relative_to(ROOT))
        for p in ROOT.rglob("*")
        if "__pycache__" not in p.parts
        and MIGRATIONS not in p.parents
        and RETIRED_NAMES & set(re.split(r"[^a-z]+", str(p.relative_to(ROOT)).lower()))
    ]
    assert not carriers, f"paths carrying a retired name: {carriers}"
