"""The lines ``asyncz dev`` offers to try run as printed from a second terminal in the same
folder: the CLI is named by a path that exists, not by a bare name the PATH may not have."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import pytest

from asyncz.local.banner import banner, cli_command
from asyncz.local.config import DevOptions
from asyncz.local.servers.embedded import ServerUrls

pytestmark = pytest.mark.unit

IN_A_VENV = sys.prefix != sys.base_prefix
BIN = Path(sys.executable).parent


def runnable(command: str, cwd: Path) -> bool:
    first = shlex.split(command)[0]
    path = Path(first) if os.sep in first else None
    return path is not None and (cwd / path).is_file() and os.access(cwd / path, os.X_OK)


@pytest.mark.skipif(not IN_A_VENV, reason="the tests run from the project's .venv")
def test_a_venv_cli_is_named_by_its_path_even_while_the_venv_is_on_the_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    project = BIN.parent.parent  # the folder the venv lives in
    assert cli_command(project) == os.path.join(".", BIN.relative_to(project), "asyncz")
    assert runnable(cli_command(project), project)


@pytest.mark.skipif(not IN_A_VENV, reason="the tests run from the project's .venv")
def test_from_another_folder_the_cli_is_named_by_its_absolute_path(tmp_path: Path) -> None:
    assert cli_command(tmp_path) == str(BIN / "asyncz")
    assert runnable(cli_command(tmp_path), tmp_path)


def test_the_banner_offers_the_canonical_body_and_a_cli_line_that_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    urls = ServerUrls("postgresql://db", "redis://r", embedded_postgres=True, embedded_redis=False)
    text = banner(DevOptions(data_dir=tmp_path / ".asyncz"), "http://127.0.0.1:8000", urls,
                  "az_key", "written to .asyncz/api-key")  # fmt: skip
    assert '{"task": "email_send", "payload": {"user_id": 42}}' in text
    (submit,) = [line.strip() for line in text.splitlines() if " submit echo " in line]
    assert not submit.startswith("asyncz ") or not IN_A_VENV, submit
    assert runnable(submit, tmp_path), submit
