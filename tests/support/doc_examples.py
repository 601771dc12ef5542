"""The Python examples of a doc page, run the way a newcomer runs them: the page's task
module (the block whose first line names its file) written to a fresh folder outside the
repo, ``asyncz dev`` started there with the command the page prints, and each other block
run as a script from that folder in a newcomer's environment.

Substitutions, the only ones: the test servers' databases (``ASYNCZ_DATABASE_URL`` and
``ASYNCZ_REDIS_URL``, the runner's documented alternative to its embedded ones) and a free
port instead of 8000 (``ASYNCZ_DEV_PORT`` for the runner, ``ASYNCZ_API_URL`` for the
client). The key is the one ``asyncz dev`` writes and the client finds by itself."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.databases import empty_backends
from tests.support.devrun import DevRun
from tests.support.newcomer import VENV_BIN, newcomer_env

_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
_RUNNER = re.compile(r"`(asyncz dev --tasks [\w,]+)`")


def module_and_examples(doc: Path, module_file: str) -> tuple[str, list[str]]:
    """The page's task module (its block starts with ``# <module_file>``) and the other
    Python blocks, in order."""
    found = _BLOCK.findall(doc.read_text())
    modules = [b for b in found if b.startswith(f"# {module_file}")]
    assert len(modules) == 1, f"{doc.name} shows its task module once"
    return modules[0], [b for b in found if b is not modules[0]]


def runner_command(doc: Path) -> str:
    """The one ``asyncz dev --tasks ...`` command the page tells the reader to start."""
    commands = set(_RUNNER.findall(doc.read_text()))
    assert len(commands) == 1, f"{doc.name} names one way to start the runner: {commands}"
    return commands.pop()


@contextmanager
def dev_as_documented(doc: Path, module_file: str, folder: Path) -> Iterator[DevRun]:
    """The page's task module in ``folder`` and ``asyncz dev`` started there as the page
    says; its key read from where it wrote it. Stopped at the end."""
    module, _ = module_and_examples(doc, module_file)
    (folder / module_file).write_text(module)
    database_url, redis_url = empty_backends("dev", 1)
    env = newcomer_env(VENV_BIN)
    env |= {"ASYNCZ_DATABASE_URL": database_url, "ASYNCZ_REDIS_URL": redis_url}
    run = DevRun(folder / ".asyncz", env, "", shell_command=runner_command(doc), cwd=folder)
    try:
        run.wait_healthy(timeout=120)
        run.api_key = (folder / ".asyncz" / "api-key").read_text().strip()
        yield run
    finally:
        run.stop()


def run_example(code: str, dev: DevRun, cwd: Path) -> None:
    """Run ``code`` as a script from ``cwd`` (where ``dev`` was started) in a newcomer's
    environment; fails the test with its stderr and the end of the runner's log."""
    env = newcomer_env(VENV_BIN) | {"ASYNCZ_API_URL": dev.url}  # the port, not 8000
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True,
        timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, f"example failed:\n{done.stderr}\n{dev.log()[-3000:]}"
