"""Worker Lambda: works jobs until its remaining time no longer fits the longest task."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from asyncz import runtime
from asyncz.fleet.invoke import invoke_worker
from asyncz.observability import PowertoolsMetricsSink, lambda_entry, logger, metrics
from asyncz.scaleout import ScaleOut
from asyncz.settings import Settings, get_settings
from asyncz.worker.loop import WorkerLoop
from asyncz.worker.stats import new_worker_id


async def _work(event: dict[str, Any], context: Any) -> dict[str, Any]:
    settings = get_settings().require_for("worker")
    # Each concurrent job may hold a connection at the moment it finishes.
    service = await runtime.current_service(
        settings, metrics=PowertoolsMetricsSink(), pool_max=max(settings.db_pool_max, 3)
    )
    queues = event.get("queues") if isinstance(event.get("queues"), list) else None
    function_name = getattr(context, "function_name", None) or "worker"
    loop = WorkerLoop(
        service,
        remaining_seconds=lambda: context.get_remaining_time_in_millis() / 1000.0,
        worker_id=new_worker_id(function_name),
        queues=queues,
        scale_out=worker_scale_out(settings, settings.worker_function_name or function_name),
    )
    return await loop.run()


def worker_scale_out(settings: Settings, function_name: str) -> ScaleOut | None:
    """Workers start the workers a backlog lacks too (the api decides only at submits):
    one decision per interval across everyone, by the same lock (asyncz.scaleout)."""
    if not (settings.wake_worker and settings.scale_out_seconds > 0):
        return None

    async def wake() -> None:
        await asyncio.to_thread(invoke_worker, function_name)

    return ScaleOut(settings, wake)


@lambda_entry()
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    summary = runtime.run(_work(event or {}, context))
    logger.info("worker finished", extra=summary)
    if summary.get("hung_threads"):
        # Threads of hung tasks cannot be killed; a fresh sandbox is the only clean slate.
        logger.error("recycling the sandbox: hung task threads remain", extra=summary)
        metrics.flush_metrics()
        os._exit(1)
    return summary
