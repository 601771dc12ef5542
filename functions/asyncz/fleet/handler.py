"""Fleet Lambda (once a minute): starts as many worker invocations as the backlog needs.
The api does the same between ticks (:mod:`asyncz.fleet.scale_out`); this is the safety net."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from asyncz import composition, eventloop
from asyncz.fleet.invoke import invoke_worker
from asyncz.fleet.plan import plan_workers
from asyncz.fleet.scale_out import STARTING_TTL_SECONDS
from asyncz.observability import lambda_entry, logger, metrics
from asyncz.settings import get_settings


async def _plan() -> tuple[int, int, int, int]:
    settings = get_settings()
    # Redis alone: the fleet never touches the database (nor is granted its secret).
    broker = await composition.current_broker(settings)
    plan = await plan_workers(broker, settings)
    if plan.start:
        await broker.add_starting(plan.start, STARTING_TTL_SECONDS)
    return plan.backlog, plan.live, plan.starting, plan.start


def scale(invoke: Callable[[], None]) -> dict[str, int]:
    """Compute the shortfall and call ``invoke`` once per worker to start. The summary says
    how many workers were already starting (invoked by an earlier tick or an api sandbox,
    not registered yet): they count against the shortfall."""
    backlog, live, starting, start = eventloop.run(_plan())
    for _ in range(start):
        invoke()
    return {
        "backlog": backlog,
        "live_workers": live,
        "starting_workers": starting,
        "started": start,
    }


@lambda_entry()
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    settings = get_settings().require_for("fleet")
    name = settings.worker_function_name
    assert name is not None
    summary = scale(lambda: invoke_worker(name))
    metrics.add_metric(name="WorkersStarted", unit="Count", value=summary["started"])
    logger.info("fleet scaled", extra=summary)
    return summary
