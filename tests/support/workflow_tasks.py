"""Tasks for the dependency tests, loaded by workers via ``ASYNCZ_TASK_MODULES``."""

from __future__ import annotations

from typing import Any

from asyncz.tasks import TaskContext, task


@task("wf_part")
def wf_part(payload: dict[str, Any]) -> int:
    """One piece of a map-reduce: its number."""
    return int(payload.get("n", 0))


@task("wf_merge")
def wf_merge(payload: dict[str, Any], ctx: TaskContext) -> dict[str, Any]:
    """The fan-in: what it saw of its parents (each once, by job id)."""
    parents = {p.job_id: p for p in ctx.each_parent()}
    return {
        "parents": len(parents),
        "completed": sum(1 for p in parents.values() if p.status == "completed"),
        "sum": sum(p.result for p in parents.values() if isinstance(p.result, int)),
        "refs": sorted(p.ref for p in parents.values() if p.ref),
        "statuses": {p.ref or p.job_id: p.status for p in parents.values()},
    }
