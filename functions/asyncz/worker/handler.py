"""Worker Lambda: works jobs until its remaining time no longer fits the longest task."""

from __future__ import annotations

import os
from typing import Any

from asyncz import composition, eventloop, tracing
from asyncz.fleet.invoke import lambda_scale_out, lambda_start_worker
from asyncz.observability import (
    PowertoolsMetricsSink,
    join_task_logs,
    lambda_entry,
    logger,
    metrics,
    publish_task_metrics,
)
from asyncz.settings import get_settings
from asyncz.worker.loop import WorkerLoop
from asyncz.worker.stats import new_worker_id


async def _work(event: dict[str, Any], context: Any) -> dict[str, Any]:
    settings = get_settings().require_for("worker")
    # Each concurrent job may hold a connection at the moment it finishes.
    service = await composition.current_service(
        settings, metrics=PowertoolsMetricsSink(), pool_max=max(settings.db_pool_max, 3)
    )
    queues = event.get("queues") if isinstance(event.get("queues"), list) else None
    function_name = getattr(context, "function_name", None) or "worker"
    worker_function = settings.worker_function_name or function_name
    loop = WorkerLoop(
        service,
        remaining_seconds=lambda: context.get_remaining_time_in_millis() / 1000.0,
        worker_id=new_worker_id(function_name),
        queues=queues,
        # workers start the workers a backlog lacks too (the api decides only at submits)
        scale_out=lambda_scale_out(settings, worker_function),
        publish_task_metrics=publish_task_metrics if settings.task_metrics else None,
        start_worker=lambda_start_worker(settings, worker_function),  # a continuation's
    )
    return await loop.run()


@lambda_entry()
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    join_task_logs()
    try:
        summary = eventloop.run(_work(event or {}, context))
    finally:
        tracing.flush()  # the sandbox may freeze once this returns
    logger.info("worker finished", extra=summary)
    if summary.get("hung_threads"):
        # Threads of hung tasks cannot be killed; a fresh sandbox is the only clean slate.
        logger.error("recycling the sandbox: hung task threads remain", extra=summary)
        metrics.flush_metrics()
        os._exit(1)
    return summary
