"""``asyncz workers`` (the live workers and what each runs now) and ``asyncz stats --tasks``
(each task's last hour), through the API (scope ``read``)."""

from __future__ import annotations

import argparse
from typing import Any

from asyncz.cli.client import make_client
from asyncz.cli.output import emit, table

RUNNING_COLUMNS = [("worker_id", "WORKER"), ("since", "SINCE"), ("job_id", "JOB"),
                   ("task", "TASK"), ("elapsed", "ELAPSED"), ("progress", "PROGRESS")]  # fmt: skip
FIGURE_COLUMNS = [("task", "TASK"), ("queue", "QUEUE"), ("runs", "RUNS"),
                  ("failures", "FAILURES"), ("retries", "RETRIES"), ("run_p50_ms", "RUN P50 MS"),
                  ("run_p95_ms", "RUN P95 MS"), ("wait_p50_ms", "WAIT P50 MS"),
                  ("wait_p95_ms", "WAIT P95 MS")]  # fmt: skip


def cmd_workers(args: argparse.Namespace) -> int:
    with make_client(args) as client:
        data = client.ops.workers()
    rows: list[dict[str, Any]] = []
    for w in [*data["workers"], *data["unknown_workers"]]:
        since = (w.get("since") or "")[:19].replace("T", " ") or "?"
        for job in w["running"] or [{}]:
            progress = job.get("progress")
            rows.append({
                "worker_id": w["worker_id"], "since": since, "job_id": job.get("job_id", "idle"),
                "task": job.get("task", ""),
                "elapsed": f"{job['elapsed_seconds']:.1f} s" if job else "",
                "progress": f"{progress:.0%}" if progress is not None else "",
            })  # fmt: skip
    emit(args, data, table(rows, RUNNING_COLUMNS) if rows else "no live worker")
    return 0


def cmd_task_figures(args: argparse.Namespace) -> int:
    with make_client(args) as client:
        items = client.ops.task_figures()
    emit(args, items, table(items, FIGURE_COLUMNS) if items else "no attempt in the last hour")
    return 0
