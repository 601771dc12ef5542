"""A task that logs through the standard library, as a user's task does (loaded by workers
via ``ASYNCZ_TASK_MODULES``)."""

from __future__ import annotations

import logging
from typing import Any

from asyncz.tasks import task

log = logging.getLogger("user_tasks.report")


@task("log_and_return")
def log_and_return(payload: dict[str, Any]) -> dict[str, Any]:
    """Logs one INFO line, then returns its payload."""
    log.info("building the report for %s", payload.get("customer", "nobody"))
    return payload


@task("log_async")
async def log_async(payload: dict[str, Any]) -> None:
    """The same line from an ``async`` task (it runs on the worker's event loop)."""
    log.info("async report for %s", payload.get("customer", "nobody"))
