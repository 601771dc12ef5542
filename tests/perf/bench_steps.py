"""What one durable step costs: a no-op step run and stored, and replayed, on a private
PostgreSQL 15 (Debian's binaries, ``pg_stat_statements`` loaded) and on the in-memory store.

Per step: the wall time in process (the step call until its row is committed: the fence's
round trip included), the database time of its statement (``pg_stat_statements``
``total_exec_time`` of ``save_step``), WAL bytes (the server's LSN moved), and a replay's
wall time per stored step (the history read in pages, then every step answered from it).
Sync steps are called from a thread as a sync task's are; async ones awaited on the loop.

And the wake latency of a sleep: jobs that sleep 1 s on a private Redis with a real worker
loop (recovery off), each timed from its sleep's wake time to the start of the step after
the sleep (one host's clock). A figure, never an assertion.

    .venv/bin/python -m tests.perf.bench_steps --steps 2000 --sleeps 20
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg

from asyncz.composition import build_service, close_service
from asyncz.durable.clock import SYSTEM_CLOCK
from asyncz.durable.journal import Journal, StepLimits
from asyncz.durable.running import StepCall
from asyncz.jobs import NewJob
from asyncz.store.migrations import apply_migrations
from asyncz.store.postgres import PostgresStore
from asyncz.tasks import TaskContext, task
from asyncz.testing import MemoryStore
from tests.perf.common import command, load_line, machine
from tests.support.private_servers import DebianPostgres, RedisServer
from tests.support.settings import make_settings
from tests.support.workers import running_worker

SAVE = "SELECT calls, total_exec_time FROM pg_stat_statements WHERE query LIKE '%%INTO job_steps%%'"


async def _noop() -> int:
    return 1


def _noop_sync() -> int:
    return 1


async def _journal(store: Any, n: int) -> Journal:
    job_id = str(uuid.uuid4())
    await store.insert_job(job_id, NewJob(task="bench", payload={}, max_retries=0,
                                          timeout_seconds=60))  # fmt: skip
    [lease] = await store.claim([job_id], "bench", 3600)
    limits = StepLimits(n + 1, 1 << 30, 1 << 20)
    return await Journal.open(store.steps, lease, limits, SYSTEM_CLOCK, threading.Event(), True)


async def _run(journal: Journal, n: int, sync: bool) -> float:
    """Seconds for ``n`` no-op steps, stored one after the other."""
    started = time.perf_counter()
    if sync:
        journal.is_async = False

        def steps() -> None:
            for i in range(n):
                journal.call(StepCall(f"s:{i}", "step", _noop_sync))

        await asyncio.to_thread(steps)
    else:
        for i in range(n):
            await journal.call(StepCall(f"s:{i}", "step", _noop))
    return time.perf_counter() - started


async def _replay(store: Any, journal: Journal, n: int) -> float:
    started = time.perf_counter()
    again = await Journal.open(store.steps, journal.lease, journal.limits, SYSTEM_CLOCK,
                               threading.Event(), True)  # fmt: skip
    for i in range(n):
        await again.call(StepCall(f"s:{i}", "step", _noop))
    assert not again.ran, "a replay ran a step"
    return time.perf_counter() - started


def _row(name: str, n: int, wall: float, replay: float, db: tuple[int, float] | None,
         wal: int | None) -> str:  # fmt: skip
    calls, ms = db or (0, 0.0)
    db_us = f"{ms * 1000 / n:.1f}" if db else "-"
    per = f"{calls / n:.2f}" if db else "-"
    wal_b = f"{wal / n:,.0f}" if wal is not None else "-"
    return (f"| {name} | {wall * 1e6 / n:,.0f} | {per} | {db_us} | {wal_b} | "
            f"{replay * 1e6 / n:,.1f} |")  # fmt: skip


async def _postgres(url: str, n: int, sync: bool) -> str:
    store = PostgresStore.create(url, max_size=2)
    await store.open()
    try:
        journal = await _journal(store, n)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("SELECT pg_stat_statements_reset()")
            lsn = conn.execute("SELECT pg_current_wal_lsn()").fetchone()[0]  # type: ignore[index]
            wall = await _run(journal, n, sync)
            row = conn.execute(SAVE).fetchone()
            db = (int(row[0]), float(row[1])) if row else (0, 0.0)
            wal = conn.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)::bigint",
                               (lsn,)).fetchone()[0]  # type: ignore[index]  # fmt: skip
        replay = await _replay(store, journal, n)
        return _row(f"PostgreSQL, {'sync' if sync else 'async'} task", n, wall, replay, db, wal)
    finally:
        await store.close()


async def _memory(n: int, sync: bool) -> str:
    store = MemoryStore()
    journal = await _journal(store, n)
    wall = await _run(journal, n, sync)
    replay = await _replay(store, journal, n)
    return _row(f"in memory, {'sync' if sync else 'async'} task", n, wall, replay, None, None)


@task("bench_sleeper", durable=True)
async def _sleeper(payload: dict[str, Any], ctx: TaskContext) -> float:
    await ctx.sleep("nap", seconds=1)
    return float(await ctx.step("after", time.time))


async def _wake_latency(url: str, redis_url: str, jobs: int) -> str:
    """Milliseconds from each sleep's wake time to the step after it (median, max)."""
    settings = make_settings(url, redis_url, worker_poll_seconds=0.2)
    service = await build_service(settings)
    try:
        ids = []
        for _ in range(jobs):  # staggered, so the wakes do not come in one batch
            ids.append((await service.submit(NewJob(task="bench_sleeper", payload={}))).job_id)
            await asyncio.sleep(0.05)
        async with running_worker(service, concurrency=4):
            for job_id in ids:
                while not (await service.get(job_id)).status.terminal:
                    await asyncio.sleep(0.1)
        late = []
        for job_id in ids:
            steps = {s["name"]: s for s in await service.store.steps.load(job_id, 0, 10)}
            wake = datetime.fromisoformat(steps["nap"]["result"]).timestamp()
            late.append((steps["after"]["result"] - wake) * 1000)
    finally:
        await close_service(service)
    late.sort()
    return (f"| wake latency of a 1 s sleep ({jobs} jobs, worker promoting once a second) | "
            f"{statistics.median(late):,.0f} ms median | {late[-1]:,.0f} ms max |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--sleeps", type=int, default=20)
    args = parser.parse_args()
    n = args.steps
    print(
        f"# {command('tests.perf.bench_steps', ['--steps', str(n), '--sleeps', str(args.sleeps)])}"
    )
    print(f"# {machine()}")
    pg = DebianPostgres({"shared_preload_libraries": "pg_stat_statements"})
    pg.start()
    redis_server = RedisServer(Path(tempfile.mkdtemp(prefix="bench-steps-")))
    redis_server.start()
    rows, wake = [], ""
    try:
        with psycopg.connect(pg.server_url, autocommit=True) as conn:
            conn.execute("CREATE DATABASE bench_steps")
        url = pg.url("bench_steps")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
        apply_migrations(url)
        for sync in (False, True):
            rows.append(asyncio.run(_postgres(url, n, sync)))
            rows.append(asyncio.run(_memory(n, sync)))
        wake = asyncio.run(_wake_latency(url, redis_server.url, args.sleeps))
    finally:
        redis_server.stop()
        pg.stop()
    print("| store, task | µs per step, in process | statements per step | database µs per step "
          "| WAL bytes per step | µs per replayed step |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))
    print()
    print("| sleep | median | max |")
    print("|---|---|---|")
    print(wake)
    print(f"# {load_line()}")


if __name__ == "__main__":
    main()
