"""The functions' code asset ships the package, not the dev tools."""

from __future__ import annotations

from pathlib import Path

import pytest

from asyncz_cdk.code_asset import stage_code
from asyncz_cdk.constructs.function_defaults import CODE_EXCLUDES

pytestmark = pytest.mark.infra


def test_the_code_asset_holds_neither_the_local_runner_nor_the_cli(tmp_path: Path) -> None:
    staged = stage_code(tmp_path, package_excludes=CODE_EXCLUDES)  # what the stacks ship
    shipped = {p.relative_to(staged).as_posix() for p in staged.rglob("*") if p.is_file()}
    assert "asyncz/api/handler.py" in shipped and "asyncz/worker/handler.py" in shipped
    assert "asyncz/store/sql/queries.sql" in shipped
    assert not [p for p in shipped if p.startswith("asyncz/local/")], "the local runner ships"
    assert not [p for p in shipped if p.startswith("asyncz/cli/")]
    assert not [p for p in shipped if p.startswith("asyncz/client/")]
    assert "asyncz/__main__.py" not in shipped
    assert not [p for p in shipped if p.startswith("asyncz/testing/")]
    assert not [p for p in shipped if "__pycache__" in p]
