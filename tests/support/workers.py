"""The tests' one worker launcher: ``asyncz.worker.standalone`` in a process group of its own,
configured by the settings' environment form."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from asyncz.settings import Settings
from tests.support.settings import settings_env

REPO = Path(__file__).resolve().parents[2]


def start_worker(
    settings: Settings,
    *,
    idle_exit: float = 0,
    seconds: float = 600,
    concurrency: int | None = None,
    env: dict[str, str] | None = None,
    stdout: IO[Any] | int = subprocess.PIPE,
    stderr: IO[Any] | int = subprocess.PIPE,
    text: bool = True,
    preexec_fn: Callable[[], None] | None = None,
) -> subprocess.Popen[Any]:
    """Start one standalone worker; ``env`` adds to the settings' variables."""
    cmd = [
        sys.executable,
        "-m",
        "asyncz.worker.standalone",
        "--seconds",
        str(seconds),
        "--idle-exit",
        str(idle_exit),
    ]
    if concurrency:
        cmd += ["--concurrency", str(concurrency)]
    return subprocess.Popen(
        cmd,
        env={**settings_env(settings), **(env or {})},
        cwd=REPO,
        stdout=stdout,
        stderr=stderr,
        text=text,
        start_new_session=True,
        preexec_fn=preexec_fn,
    )


def stop_worker(proc: subprocess.Popen[str], timeout: float = 30) -> str:
    """Terminate a worker started by :func:`start_worker` (its whole group if it lingers);
    returns its stdout and stderr."""
    if proc.poll() is None:
        proc.terminate()
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, err = proc.communicate()
    return f"{out}\n{err}"
