"""Fixtures of the integration tests that start ``asyncz dev``."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from tests.support import devrun
from tests.support.databases import empty_backends


@pytest.fixture
def fresh_backends() -> tuple[str, str]:
    """An empty database and an empty Redis db of the ``asyncz dev`` tests' own."""
    return empty_backends("dev", 8)


@pytest.fixture
def dev_env(fresh_backends: tuple[str, str]) -> dict[str, str]:
    """The environment of a quick-cycling ``asyncz dev`` on fresh backends, two api sandboxes."""
    env = devrun.dev_env(*fresh_backends, devrun.API_KEY)
    env["ASYNCZ_DEV_API_SANDBOXES"] = "2"
    return env


@pytest.fixture
def runs() -> Iterator[list[devrun.DevRun]]:
    """The runs a test starts; each still running at the end is killed with its group."""
    started: list[devrun.DevRun] = []
    yield started
    for run in started:  # never leave a run behind, whatever the test did
        if run.proc.poll() is None:
            os.killpg(run.pgid, signal.SIGKILL)
            run.proc.wait(10)
