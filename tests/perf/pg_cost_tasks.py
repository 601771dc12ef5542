"""The async no-op task of ``bench_pg_cost``'s labelled variant: the peers' no-op handlers are
``async`` (PgQueuer's entrypoint, Procrastinate's task), so this row compares like with like;
the default rows run the built-in sync ``echo``, on a worker thread."""

from __future__ import annotations

from typing import Any

from asyncz.tasks import task


@task("async_noop", timeout_seconds=30)
async def async_noop(payload: dict[str, Any]) -> None:
    return None
