"""The Python examples of a doc page, for tests that run them as written: the page's task
module (the block whose first line names its file) and its other blocks, each run as a
script with the client pointed at an ``asyncz dev``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.support.devrun import DevRun

_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def module_and_examples(doc: Path, module_file: str) -> tuple[str, list[str]]:
    """The page's task module (its block starts with ``# <module_file>``) and the other
    Python blocks, in order."""
    found = _BLOCK.findall(doc.read_text())
    modules = [b for b in found if b.startswith(f"# {module_file}")]
    assert len(modules) == 1, f"{doc.name} shows its task module once"
    return modules[0], [b for b in found if b is not modules[0]]


def run_example(code: str, dev: DevRun, cwd: Path, pythonpath: Path | None = None) -> None:
    """Run ``code`` as a script with ``ASYNCZ_API_URL``/``ASYNCZ_API_KEY`` set for ``dev``;
    fails the test with its stderr and the end of the runner's log."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASYNCZ_")}
    env |= {"ASYNCZ_API_URL": dev.url, "ASYNCZ_API_KEY": dev.api_key}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, f"example failed:\n{done.stderr}\n{dev.log()[-3000:]}"
