"""What a wait costs PostgreSQL (docs/durable.md, "Wait for an event", "Spawned jobs"), an
event's and a fan-in's, on a private PostgreSQL 15 (Debian's binaries,
``pg_stat_statements`` loaded, utility statements tracked):

- a wait's start: ``n`` jobs, each claimed, open an event wait (its look-back at the events
  since the job's submit, and its row, through the lease fence: ``open_wait``);
- a delivery that wakes one job: ``n`` events, each on the key one suspended job waits on
  (``JobService.events.send``: the advisory lock, the event's insert, the page of waits
  resolved and the job woken, the count kept);
- a delivery to many: one event for ``fan`` jobs waiting on one key, in pages of 500;
- a fan-in: ``fan`` spawned jobs a gather waits on end, in completion batches of 10 as a
  worker's (each end counted for the gather after its commit, the last one completing it and
  waking the spawner), beside ``fan`` plain jobs ending the same way.

Per operation: statements (BEGIN/COMMIT included: each a round trip), database µs
(``total_exec_time``), WAL bytes and the server's CPU. The api's audit rows of ``POST
/events`` (two statements) and the Redis enqueue are not in these figures.

    flock /tmp/asyncz-bench.lock .venv/bin/python -m tests.perf.bench_events --events 2000 \\
        --fan 1000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from asyncz.durable.events import wait_key
from asyncz.durable.spawning import spawned_id
from asyncz.jobs import NewJob
from asyncz.service import JobService
from asyncz.settings import Settings
from asyncz.store.migrations import apply_migrations
from asyncz.store.postgres import PostgresStore
from asyncz.tasks.registry import TaskRegistry, task
from asyncz.testing import MemoryBroker
from tests.perf.bench_pg_cost import fresh_db
from tests.perf.bench_steps import Probe, Window
from tests.perf.common import command, load_line, machine
from tests.support.private_servers import DebianPostgres


async def _waiting(store: Any, key: str, suspend: bool) -> tuple[str, Any, dict[str, Any]]:
    """A claimed job and its new event wait's row (stored, and the job suspended, when
    ``suspend``)."""
    job_id = str(uuid.uuid4())
    await store.insert_job(job_id, NewJob(task="bench", payload={}, max_retries=0,
                                          timeout_seconds=60))  # fmt: skip
    [lease] = await store.claim([job_id], "bench", 3600)
    row = {"seq": 1, "name": "event:approval:1", "kind": "event", "after_name": None,
           "job_attempt": 1, "result": None, "wait_key": key,
           "wait_until": datetime.now(UTC) + timedelta(hours=1)}  # fmt: skip
    if suspend:
        await store.steps.open_wait(job_id, lease.token, row)
        await store.steps.suspend(lease, 3600.0, "event")
    return job_id, lease, row


BATCH = 10  # a worker's completion batch


def _new() -> NewJob:
    return NewJob(task="bench", payload={}, max_retries=0, timeout_seconds=60)


def _registry() -> TaskRegistry:
    registry = TaskRegistry()

    @task("bench", registry=registry)
    def bench(payload: dict[str, Any]) -> None:
        return None

    return registry


async def _ends(svc: JobService, probe: Probe, leases: list[Any]) -> Window:
    """``leases`` completed in batches of BATCH, as a worker does (its cascade included)."""
    probe.begin()
    started = asyncio.get_running_loop().time()
    for i in range(0, len(leases), BATCH):
        await svc.complete_many([(lease, None) for lease in leases[i : i + BATCH]])
    return probe.end(asyncio.get_running_loop().time() - started, len(leases))


async def _fan_in(store: Any, svc: JobService, probe: Probe, fan: int) -> dict[str, Window]:
    """``fan`` plain jobs ending, then ``fan`` spawned jobs a gather waits on."""
    plain = [str(uuid.uuid4()) for _ in range(fan)]
    for job_id in plain:
        await store.insert_job(job_id, _new())
    out = {f"an end of a plain job ({fan:,}, batches of {BATCH})":
           await _ends(svc, probe, await store.claim(plain, "bench", 3600))}  # fmt: skip
    parent = str(uuid.uuid4())
    await store.insert_job(parent, _new())
    [lease] = await store.claim([parent], "bench", 3600)
    kids = [spawned_id(parent, 0, f"k{i}") for i in range(fan)]
    for kid in kids:
        await svc.spawns.spawn(lease, kid, _new())
    terms = {"jobs": kids, "total": fan, "max_bytes": 1 << 22}
    step = {"seq": 1, "name": "all", "kind": "gather", "after_name": None, "job_attempt": 1,
            "result": json.dumps(terms), "wait_until": datetime.now(UTC) + timedelta(hours=1),
            "wait_key": None}  # fmt: skip
    await store.steps.open_wait(parent, lease.token, step)
    await store.steps.suspend(lease, 3600.0, "gather 'all'")
    ended = await _ends(svc, probe, await store.claim(kids, "bench", 3600))
    [row] = await store.steps.load(parent, 0, 10)
    assert row["status"] == "completed", "the gather was not completed by its last job's end"
    out[f"an end of a gathered spawned job (a fan-in of {fan:,})"] = ended
    return out


async def _measure(pg: DebianPostgres, n: int, fan: int) -> dict[str, Window]:
    url = fresh_db(pg, "asyncz_events")
    apply_migrations(url)
    probe = Probe(pg, "asyncz_events")
    store = PostgresStore.create(url, max_size=2)
    await store.open()
    settings = Settings(database_url=url, redis_url="redis://unused")
    svc = JobService(store, MemoryBroker(), _registry(), settings)
    out: dict[str, Window] = {}
    try:
        opening = [await _waiting(store, wait_key("approval", f"o:{i}"), False) for i in range(n)]
        probe.begin()
        started = asyncio.get_running_loop().time()
        for job_id, lease, row in opening:
            await store.steps.open_wait(job_id, lease.token, row)
        out["a wait's start"] = probe.end(asyncio.get_running_loop().time() - started, n)
        keys = [f"d:{i}" for i in range(n)]
        for key in keys:
            await _waiting(store, wait_key("approval", key), True)
        probe.begin()
        started = asyncio.get_running_loop().time()
        woken = [(await svc.events.send("approval", key, {"ok": True})).woken for key in keys]
        out["a delivery waking one job"] = probe.end(
            asyncio.get_running_loop().time() - started, sum(woken)
        )
        for _ in range(fan):
            await _waiting(store, wait_key("approval", "all"), True)
        probe.begin()
        started = asyncio.get_running_loop().time()
        sent = await svc.events.send("approval", "all", {"ok": True})
        out[f"a delivery to {fan:,} jobs (per job)"] = probe.end(
            asyncio.get_running_loop().time() - started, sent.woken
        )
        out.update(await _fan_in(store, svc, probe, fan))
    finally:
        await store.close()
        probe.meter.admin.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--fan", type=int, default=1000)
    args = parser.parse_args()
    print(f"# {command('tests.perf.bench_events', sys.argv[1:])}")
    print(f"# {machine()}")
    print(f"# {load_line()} (shared machine: other test suites may be running)")
    pg = DebianPostgres({"shared_preload_libraries": "pg_stat_statements",
                         "pg_stat_statements.track_utility": "on"})  # fmt: skip
    pg.start()
    try:
        with psycopg.connect(pg.server_url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
        windows = asyncio.run(_measure(pg, args.events, args.fan))
    finally:
        pg.stop()
    print("| operation | µs in process | statements | database µs | WAL bytes | server CPU µs |")
    print("|---|---|---|---|---|---|")
    for name, w in windows.items():
        n = w["ran"]
        print(f"| {name} | {w['seconds'] * 1e6 / n:,.0f} | {w['statements'] / n:.2f} | "
              f"{w['db_ms'] * 1000 / n:.1f} | {w['wal'] / n:,.0f} | "
              f"{w['cpu_s'] * 1e6 / n:,.0f} |")  # fmt: skip
    for name, w in windows.items():
        print(f"# {name}, database µs and calls an operation by statement: "
              + "; ".join(f"{1000 * ms / w['ran']:.1f} µs {calls / w['ran']:.2f} ({q})"
                          for ms, calls, q in w["top"]))  # fmt: skip
    print(f"# {load_line()}")


if __name__ == "__main__":
    main()
