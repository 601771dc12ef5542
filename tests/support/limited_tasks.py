"""Tasks with flow-control limits, loaded by workers via ``ASYNCZ_TASK_MODULES``."""

from __future__ import annotations

import time
from typing import Any

from asyncz.tasks import task


@task("keyed_sleep", key_concurrency=2)
def keyed_sleep(payload: dict[str, Any]) -> None:
    """At most two of one ``concurrency_key`` at once; sleeps ``payload.seconds``."""
    time.sleep(float(payload.get("seconds", 0.1)))


@task("rated_noop", rate="10/s")
def rated_noop(payload: dict[str, Any]) -> None:
    """At most ten starts in any second, fleet-wide."""


@task("fair_sleep", key_concurrency=1)
def fair_sleep(payload: dict[str, Any]) -> None:
    """One at a time per key: many keys are served in turn."""
    time.sleep(float(payload.get("seconds", 0.01)))


@task("overrunning_call", concurrency=1, timeout_seconds=1, max_retries=0)
def overrunning_call(payload: dict[str, Any]) -> None:
    """One at a time; runs ``payload.seconds`` past its one-second timeout, as a provider call
    that cannot be cut short, and appends ``start <name>`` and ``end <name>`` to
    ``payload.log`` (appends are ordered: the file says which call overlapped which)."""
    note(payload["log"], f"start {payload['name']}")
    time.sleep(float(payload["seconds"]))
    note(payload["log"], f"end {payload['name']}")


def note(path: str, line: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")
