"""The shell blocks of docs/first-task.md, by part (```bash first-task:<part>)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "first-task.md"
_BLOCK = re.compile(r"^```bash first-task:(\S+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def blocks(part: str) -> str:
    """Every block of ``part``, in order, as one script."""
    found = [body for name, body in _BLOCK.findall(DOC.read_text()) if name == part]
    assert found, f"docs/first-task.md has no `bash first-task:{part}` block"
    return "".join(found)


def parts() -> set[str]:
    return {name for name, _ in _BLOCK.findall(DOC.read_text())}


def block_with(part: str, needle: str) -> str:
    """The one block of ``part`` that contains ``needle``."""
    (found,) = [
        body for name, body in _BLOCK.findall(DOC.read_text()) if name == part and needle in body
    ]
    return str(found)


def run_script(script: str, cwd: Path, env: dict[str, str], timeout: float) -> tuple[int, str]:
    """(exit status, stdout and stderr) of ``script`` run by ``bash`` with ``set -euo
    pipefail`` in a session of its own, whose processes are all killed at the end."""
    proc = subprocess.Popen(
        ["bash", "-c", "set -euo pipefail\n" + script], cwd=cwd, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # what the script left running (asyncz dev)
    return proc.returncode, out
