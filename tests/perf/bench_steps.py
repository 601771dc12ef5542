"""What one durable step costs: a no-op step run and stored, and replayed, on a private
PostgreSQL 15 (Debian's binaries, ``pg_stat_statements`` loaded) and on the in-memory store.

Per step: the wall time in process (the step call until its row is committed: the fence's
round trip included), the database time of its statement (``pg_stat_statements``
``total_exec_time`` of ``save_step``), WAL bytes (the server's LSN moved), and a replay's
wall time per stored step (the history read in pages, then every step answered from it).
Sync steps are called from a thread as a sync task's are; async ones awaited on the loop.

    .venv/bin/python -m tests.perf.bench_steps --steps 2000
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
import uuid
from typing import Any

import psycopg

from asyncz.durable.clock import SYSTEM_CLOCK
from asyncz.durable.journal import Journal, StepLimits
from asyncz.durable.running import StepCall
from asyncz.jobs import NewJob
from asyncz.store.migrations import apply_migrations
from asyncz.store.postgres import PostgresStore
from asyncz.testing import MemoryStore
from tests.perf.common import command, load_line, machine
from tests.support.private_servers import DebianPostgres

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=2000)
    args = parser.parse_args()
    n = args.steps
    print(f"# {command('tests.perf.bench_steps', ['--steps', str(n)])}")
    print(f"# {machine()}")
    pg = DebianPostgres({"shared_preload_libraries": "pg_stat_statements"})
    pg.start()
    rows = []
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
    finally:
        pg.stop()
    print("| store, task | µs per step, in process | statements per step | database µs per step "
          "| WAL bytes per step | µs per replayed step |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))
    print(f"# {load_line()}")


if __name__ == "__main__":
    main()
