"""Test helpers are shared through ``tests/support/`` only: no module under ``tests/`` imports a
test module or a tier's conftest (pytest gives fixtures to a tier's tests by itself)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

TESTS = Path(__file__).resolve().parents[1]
FORBIDDEN = re.compile(r"^tests\.[a-z_]+\.(test_[a-z0-9_]*|conftest)$")


def imported_modules(tree: ast.AST) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append((node.lineno, node.module))
            # `from tests.integration import test_api` imports a test module too
            found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
    return found


def test_no_module_under_tests_imports_a_test_module_or_a_conftest() -> None:
    offenders = [
        f"{path.relative_to(TESTS.parent)}:{line}: {module}"
        for path in sorted(TESTS.rglob("*.py"))
        for line, module in imported_modules(ast.parse(path.read_text(), str(path)))
        if FORBIDDEN.match(module)
    ]
    assert not offenders, "import shared helpers from tests/support/ instead:\n" + "\n".join(
        offenders
    )


@pytest.mark.parametrize(
    "source",
    [
        "from tests.integration.test_api import KEY",
        "from tests.chaos.conftest import Fleet",
        "from tests.integration import test_api",
        "import tests.browser.test_dashboard",
    ],
)
def test_the_check_sees_each_way_of_importing_a_test_module(source: str) -> None:
    assert any(FORBIDDEN.match(m) for _, m in imported_modules(ast.parse(source)))


def test_the_check_lets_support_modules_through() -> None:
    source = "from tests.support.chaos import chaos_settings\nimport tests.support.ledger"
    assert not any(FORBIDDEN.match(m) for _, m in imported_modules(ast.parse(source)))
