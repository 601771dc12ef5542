"""The README's quickstart, run as written against a started ``asyncz dev``: the
bash block line for line (but its first line, ``scripts/dev``, which the test starts itself)
and the Python block, so the README cannot drift from what works. Only the port differs:
the run listens on a free one, and the CLI is told so through ``ASYNCZ_API_URL``."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.databases import empty_backends
from tests.support.devrun import API_KEY, DevRun, free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]
README_URL = "http://127.0.0.1:8000"


def quickstart_blocks() -> tuple[str, str]:
    """The quickstart's bash and python blocks."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("### Quickstart") :]
    section = section[: section.index("\n## ")]
    bash = re.search(r"```bash\n(.*?)```", section, re.S)
    python = re.search(r"```python\n(.*?)```", section, re.S)
    assert bash and python, "the quickstart lost its code blocks"
    return bash.group(1), python.group(1)


@pytest.fixture
def project(tmp_path: Path) -> Iterator[tuple[Path, str, dict[str, str]]]:
    """A user's folder with ``asyncz dev`` started in it (it writes .asyncz/api-key)."""
    database_url, redis_url = empty_backends("dev", 1)
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / ".venv").symlink_to(sys.prefix)  # this checkout's .venv
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASYNCZ_")}
    dev_env = {**env, "ASYNCZ_DATABASE_URL": database_url, "ASYNCZ_REDIS_URL": redis_url,
               "ASYNCZ_DEV_API_SANDBOXES": "2"}  # fmt: skip
    run = DevRun(folder / ".asyncz", dev_env, API_KEY, port=free_port(), args=["--workers", "2"])
    try:
        run.wait_healthy()
        assert (folder / ".asyncz" / "api-key").is_file()
        yield folder, run.url, {**env, "ASYNCZ_API_URL": run.url}
    finally:
        if run.proc.poll() is None:
            os.killpg(run.pgid, signal.SIGKILL)
            run.proc.wait(10)


def test_the_readme_quickstart_runs_as_written(project: tuple[Path, str, dict[str, str]]) -> None:
    folder, url, env = project
    bash, python = quickstart_blocks()
    first, rest = bash.split("\n", 1)
    assert first.startswith("scripts/dev"), "the quickstart starts with scripts/dev"
    assert README_URL in rest
    script = "set -euo pipefail\n" + rest.replace(README_URL, url)
    out = subprocess.run(["bash", "-c", script], cwd=folder, env=env, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, f"stdout:\n{out.stdout}\nstderr:\n{out.stderr}"
    assert '"status":"queued"' in out.stdout  # the first curl's 202
    assert re.search(r"status\s+completed", out.stdout)  # asyncz status --wait
    assert "submitted 3 jobs" in out.stdout  # asyncz submit --file
    assert "pdf_generate" in out.stdout  # asyncz list

    py = subprocess.run([sys.executable, "-c", python.replace(README_URL, url)], cwd=folder,
                        env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert py.returncode == 0, py.stderr
    assert py.stdout.splitlines() == [
        "{'hello': 'world'}",
        "TaskFailedError: task failed on purpose",
    ]
