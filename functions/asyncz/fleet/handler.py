"""Fleet Lambda (once a minute): promotes the due delayed ids and starts as many worker
invocations as the backlog needs, then waits for the wakes due within its minute
(:mod:`asyncz.fleet.wakes`). The api does the same between ticks for what it submits
(:mod:`asyncz.fleet.scale_out`); this is the safety net."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from asyncz import composition, eventloop
from asyncz.fleet.invoke import invoke_worker
from asyncz.fleet.plan import Plan
from asyncz.fleet.wakes import WAKE_MARGIN_SECONDS, tick, wait_for_wakes
from asyncz.observability import lambda_entry, logger, metrics
from asyncz.settings import get_settings


async def _tick() -> Plan:
    settings = get_settings()
    # Redis alone: the fleet never touches the database (nor is granted its secret).
    broker = await composition.current_broker(settings)
    return (await tick(broker, settings))[1]


async def _wait(until: float, invoke: Callable[[], None]) -> tuple[int, int]:
    settings = get_settings()
    broker = await composition.current_broker(settings)
    return await wait_for_wakes(broker, settings, until, invoke)


def scale(invoke: Callable[[], None], wait_until: float | None = None) -> dict[str, int]:
    """Promote the due delayed ids, compute the shortfall and call ``invoke`` once per worker
    to start. The summary says how many workers were already starting (invoked by an earlier
    tick or an api sandbox, not registered yet): they count against the shortfall. With
    ``wait_until`` (``time.monotonic()``), then wait for the wakes due before it and start
    the workers they need (``wakes``: how many fell due; ``started`` counts their workers)."""
    plan = eventloop.run(_tick())
    for _ in range(plan.start):
        invoke()
    wakes, woken = eventloop.run(_wait(wait_until, invoke)) if wait_until else (0, 0)
    return {
        "backlog": plan.backlog,
        "live_workers": plan.live,
        "starting_workers": plan.starting,
        "started": plan.start + woken,
        "wakes": wakes,
    }


@lambda_entry()
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    settings = get_settings().require_for("fleet")
    name = settings.worker_function_name
    assert name is not None
    # Wait for the wakes due within this invocation, less a margin: one tick ends before
    # the next (the timeout is the rule's minute; reserved concurrency 1).
    remaining = context.get_remaining_time_in_millis() / 1000 - WAKE_MARGIN_SECONDS
    until = time.monotonic() + remaining if remaining > 0 else None
    summary = scale(lambda: invoke_worker(name), until)
    metrics.add_metric(name="WorkersStarted", unit="Count", value=summary["started"])
    logger.info("fleet scaled", extra=summary)
    return summary
