"""The functions' code asset ships the package, not the dev tools (issue 15, part 2)."""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
import pytest

from infra.constructs.runtime import CODE_EXCLUDES

pytestmark = pytest.mark.infra

FUNCTIONS = Path(__file__).resolve().parents[2] / "functions"


def test_the_code_asset_holds_neither_the_local_runner_nor_the_cli(tmp_path: Path) -> None:
    # CDK's own copy, with the excludes the stacks give Code.from_asset
    cdk.FileSystem.copy_directory(
        str(FUNCTIONS), str(tmp_path), options=cdk.CopyOptions(exclude=CODE_EXCLUDES)
    )
    shipped = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()}
    assert "asyncz/api/handler.py" in shipped and "asyncz/worker/handler.py" in shipped
    assert "asyncz/store/sql/queries.sql" in shipped
    assert not [p for p in shipped if p.startswith("asyncz/local/")], "the local runner ships"
    assert "asyncz/cli.py" not in shipped and "asyncz/__main__.py" not in shipped
    assert not [p for p in shipped if "__pycache__" in p]
