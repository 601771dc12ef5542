"""Cascades over a wide family, through the job service with its default settings: a parent
with ``--children`` waiting children is cancelled, and a dead parent with as many children
it killed is replayed. Each call is bounded (``cascade_seconds``), leaves the rest flagged,
and recovery runs (one after another, as the schedule would) finish it. Prints each call's
seconds, the pages and the slowest page, and each recovery run's seconds and failed steps.

    .venv/bin/python -m tests.perf.bench_cascade --children 200000
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg

from asyncz.service import JobService
from tests.perf.common import DB, PREFIX, REDIS, command, load_line, machine, prepare


def settings() -> Any:
    from asyncz.settings import Settings

    return Settings(
        database_url=DB, redis_url=REDIS, redis_prefix=PREFIX, wake_worker=False,
        publish_gauges=False, task_modules="tests.support.workflow_tasks",
    )  # fmt: skip


def family(children: int, *, dead: bool) -> str:
    """A parent and its children, inserted in bulk: queued and waiting, or all dead (the
    children killed by it)."""
    parent = str(uuid.uuid4())
    status, child_status = ("dead", "dead") if dead else ("queued", "waiting")
    error = f"parent_failed: {parent}" if dead else None
    with psycopg.connect(DB, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO jobs (id, task, payload, status, has_dependents, finished_at)"
            " VALUES (%s, 'wf_part', '{}', %s, true, CASE WHEN %s THEN now() END)",
            (parent, status, dead),
        )
        conn.execute(
            "WITH kids AS ("
            " INSERT INTO jobs (id, task, payload, status, open_parents, depth, last_error,"
            "                   finished_at)"
            " SELECT gen_random_uuid(), 'wf_part', '{}', %s, %s, 1, %s,"
            "        CASE WHEN %s THEN now() END FROM generate_series(1, %s) RETURNING id)"
            " INSERT INTO job_dependencies (child_id, parent_id, settled)"
            " SELECT id, %s, %s FROM kids",
            (child_status, 0 if dead else 1, error, dead, children, parent, dead),
        )
        conn.execute("VACUUM ANALYZE jobs")
        conn.execute("VACUUM ANALYZE job_dependencies")
    return parent


def timed_pages(svc: JobService) -> list[float]:
    """Each settle or heal page's seconds, as the service calls them."""
    deps = svc.store.dependencies
    pages: list[float] = []
    for name in ("settle", "heal"):
        real = getattr(deps, name)

        def wrap(real: Callable[..., Awaitable[Any]] = real) -> Callable[..., Awaitable[Any]]:
            async def timed(*args: Any) -> Any:
                started = time.perf_counter()
                try:
                    return await real(*args)
                finally:
                    pages.append(time.perf_counter() - started)

            return timed

        setattr(deps, name, wrap())
    return pages


async def case(svc: JobService, label: str, parent: str, act: Callable[[], Awaitable[Any]]) -> None:
    pages = timed_pages(svc)
    started = time.perf_counter()
    await act()
    call = time.perf_counter() - started
    pending = (await svc.get(parent)).cascade_pending
    runs: list[tuple[float, list[str]]] = []
    while (await svc.get(parent)).cascade_pending and len(runs) < 50:
        started = time.perf_counter()
        report = await svc.recover()
        runs.append((time.perf_counter() - started, report.failed))
    done = not (await svc.get(parent)).cascade_pending
    print(
        f"{label}: the call {call:.2f} s (cascade_pending after it: {pending}); "
        f"{len(pages)} pages, slowest {max(pages):.3f} s, median "
        f"{sorted(pages)[len(pages) // 2]:.3f} s; recovery runs to finish: {len(runs)} "
        f"({', '.join(f'{s:.1f} s' for s, _ in runs)}); failed steps: "
        f"{sorted({f for _, failed in runs for f in failed}) or 'none'}; done: {done}"
    )


async def main(children: int) -> None:
    from asyncz import composition

    prepare()
    print(machine())
    print(load_line())
    svc = await composition.build_service(settings())
    try:
        parent = family(children, dead=False)
        await case(svc, f"cancel of a parent with {children:,} waiting children", parent,
                   lambda: svc.cancel(parent))  # fmt: skip
        with psycopg.connect(DB) as conn:
            left = conn.execute("SELECT count(*) FROM jobs WHERE status = 'waiting'").fetchone()
        print(f"  children still waiting after it: {left[0] if left else '?'}")
        await composition.close_service(svc)
        svc = await composition.build_service(settings())
        parent = family(children, dead=True)
        await case(svc, f"replay of a dead parent with {children:,} dead children", parent,
                   lambda: svc.replay(parent))  # fmt: skip
        with psycopg.connect(DB) as conn:
            row = conn.execute(
                "SELECT count(*) FROM jobs WHERE last_error = %s", (f"parent_failed: {parent}",)
            ).fetchone()
        print(f"  children still dead after it: {row[0] if row else '?'}")
    finally:
        await composition.close_service(svc)
    print(command("tests.perf.bench_cascade", [f"--children={children}"]))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--children", type=int, default=200_000)
    asyncio.run(main(parser.parse_args().children))
