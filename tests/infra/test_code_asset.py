"""The functions' code asset: our package plus the user's task folder, minus tooling."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest

from asyncz_cdk.code_asset import TaskCodeError, excluded, stage_code
from asyncz_cdk.constructs.function_defaults import CODE_EXCLUDES

pytestmark = pytest.mark.infra


@pytest.mark.parametrize(
    ("path", "patterns", "expected"),
    [
        ("asyncz/tests/x.py", ["**/tests"], True),
        ("asyncz/api/tests", ["**/tests"], True),
        ("asyncz/api/handler.py", ["**/tests"], False),
        ("deep/README.md", ["*.md"], True),
        ("asyncz/local", ["asyncz/local"], True),
        ("other/asyncz/local", ["asyncz/local"], False),
        ("cdk.out", ["cdk.out"], True),
        (".venv-3.12", [".venv*"], True),
    ],
)
def test_exclude_globs_follow_cdk(path: str, patterns: list[str], expected: bool) -> None:
    assert excluded(PurePosixPath(path), patterns) is expected


def test_staged_code_holds_package_and_tasks_and_is_reused(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "lib").mkdir(parents=True)
    (project / "mytasks.py").write_text("X = 1\n")
    (project / "lib" / "helpers.py").write_text("")
    for tooling in ("cdk.out", ".venv", "node_modules", ".asyncz"):
        (project / tooling).mkdir()
        (project / tooling / "big.bin").write_bytes(b"x")
    cache = tmp_path / "cache"
    staged = stage_code(cache, package_excludes=CODE_EXCLUDES, task_code=project)
    assert (staged / "mytasks.py").read_text() == "X = 1\n"
    assert (staged / "lib" / "helpers.py").is_file()
    assert (staged / "asyncz" / "api" / "handler.py").is_file()
    assert not list(staged.rglob("__pycache__"))
    assert {p.name for p in staged.iterdir()} == {"asyncz", "lib", "mytasks.py"}
    assert stage_code(cache, package_excludes=CODE_EXCLUDES, task_code=project) == staged
    (project / "mytasks.py").write_text("X = 2\n")
    changed = stage_code(cache, package_excludes=CODE_EXCLUDES, task_code=project)
    assert changed != staged and (changed / "mytasks.py").read_text() == "X = 2\n"


def test_a_task_folder_cannot_shadow_the_package(tmp_path: Path) -> None:
    (tmp_path / "asyncz").mkdir()
    (tmp_path / "asyncz" / "__init__.py").write_text("")
    with pytest.raises(TaskCodeError, match="would shadow"):
        stage_code(tmp_path / "cache", package_excludes=CODE_EXCLUDES, task_code=tmp_path)
