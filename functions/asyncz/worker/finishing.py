"""How the worker writes an attempt's end: a write that meets a short outage is tried again;
past that, recovery re-runs the job (at least once), which the attempt log shows as ``lost``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from asyncz.durable.sleeping import Suspension
from asyncz.errors import DB_TRANSIENT, AsyncZError
from asyncz.jobs import JobStatus, Lease
from asyncz.service import JobService
from asyncz.worker.wakes import NextWake

log = logging.getLogger("asyncz.worker")

FINISH_TRIES = 3


async def retrying(call: Callable[[], Any]) -> Any:
    """``call()``'s answer, tried up to ``FINISH_TRIES`` times over an outage or a statement
    cancelled at the database's timeout (it changed nothing); else None."""
    for n in range(FINISH_TRIES):
        try:
            return await call()
        except DB_TRANSIENT as exc:
            log.warning("finish failed (%s), try %d", exc, n + 1)
            await asyncio.sleep(0.5 * (n + 1))
        except AsyncZError:
            raise
    return None


def ids(lease: Lease) -> dict[str, Any]:
    """The log fields that name an attempt."""
    return {"job_id": lease.job_id, "attempt": lease.attempt}


async def suspend(service: JobService, lease: Lease, suspension: Suspension,
                  now: datetime, wake: NextWake) -> str | None:  # fmt: skip
    """End a durable task's attempt suspended until its wake: ``suspended`` (or
    ``cancelled``, a cancel came meanwhile); None when the lease was lost. The worker's
    ``wake`` learns when (its polls end then, with no look at Redis)."""
    delay = suspension.delay(now)
    status = await retrying(lambda: service.suspend(lease, delay, suspension.reason))
    if status is None:
        log.warning("could not record the suspension (lease lost)", extra=ids(lease))
        return None
    if status is JobStatus.SUSPENDED:
        wake.expect(delay)
    return str(status.value)
