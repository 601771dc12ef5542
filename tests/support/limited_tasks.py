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
