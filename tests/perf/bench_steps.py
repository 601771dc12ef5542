"""What one durable step costs, beside DBOS Transact in the same run on the same server: a
private PostgreSQL 15 (Debian's binaries, ``pg_stat_statements`` loaded, utility statements
tracked), a database per contender.

Per step: the wall time in process (the step call until its output is committed), the
statements of the contender's database (``pg_stat_statements`` calls, BEGIN/COMMIT
included: each is a round trip) and their database time (``total_exec_time``), WAL bytes
(the server's LSN moved), the server's CPU (every PostgreSQL process), all read from the
``postgres`` database around the window and ``pg_stat_statements`` reset before it; then
the same for a replay (the steps asked for again, every one answered from what was stored).

- AsyncZ: ``n`` no-op steps of one claimed job through the journal a worker uses (the lease
  fence included); sync steps from a thread as a sync task's are, async ones on the loop. A
  replay opens the journal again (the history read in pages) and asks for every step.
- DBOS (``--peers-python``, a virtualenv with ``dbos``; tests/perf/steps_peers.py): ``n``
  calls of a no-op ``@DBOS.step`` inside one ``@DBOS.workflow``, sync and async, its system
  database on the same server; a replay is ``DBOS.fork_workflow`` from step ``n + 1`` (its
  copy of the outputs is outside the window).
- The in-memory store (``asyncz.testing``), AsyncZ without a database: the floor.

    ~/.pyenv/versions/3.12.1/bin/python -m venv /tmp/asyncz-peers && \\
        /tmp/asyncz-peers/bin/pip install dbos

And the wake latency of a sleep: jobs that sleep 1 s on a private Redis with a real worker
loop (recovery off), each timed from its sleep's wake time to the start of the step after
the sleep (one host's clock). A figure, never an assertion.

    flock /tmp/asyncz-bench.lock .venv/bin/python -m tests.perf.bench_steps --steps 2000 \\
        --sleeps 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
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
from tests.perf.bench_pg_cost import Meter, fresh_db
from tests.perf.common import command, load_line, machine
from tests.support.private_servers import DebianPostgres, RedisServer
from tests.support.settings import make_settings
from tests.support.workers import running_worker

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
Window = dict[str, Any]  # seconds, ran, the counters' change, the top statements


async def _noop() -> int:
    return 1


def _noop_sync() -> int:
    return 1


class Probe:
    """Reads one database's counters around a window (``pg_stat_statements`` reset first)."""

    def __init__(self, pg: DebianPostgres, dbname: str) -> None:
        self.meter = Meter(pg, dbname)
        self.before: dict[str, float] = {}
        self.statements: dict[str, tuple[int, float, float]] = {}

    def begin(self) -> None:
        self.meter.admin.execute("SELECT pg_stat_statements_reset()")
        self.statements = self.meter.by_statement()
        self.before = self.meter.read()

    def end(self, seconds: float, ran: int) -> Window:
        after = self.meter.read()
        now = self.meter.by_statement()
        was = {q: self.statements.get(q, (0, 0.0, 0.0)) for q in now}
        top = sorted(((now[q][1] - was[q][1], now[q][0] - was[q][0], q) for q in now
                      if now[q][0] > was[q][0]), reverse=True)[:4]  # fmt: skip
        return {"seconds": seconds, "ran": ran, "top": top,
                **{k: after[k] - self.before[k] for k in ("statements", "db_ms", "wal",
                                                          "cpu_s")}}  # fmt: skip


# --------------------------------------------------------------------------- AsyncZ


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


async def _replay(store: Any, journal: Journal, n: int) -> tuple[float, int]:
    """Seconds to open the journal again and ask for every step; the steps that ran."""
    started = time.perf_counter()
    again = await Journal.open(store.steps, journal.lease, journal.limits, SYSTEM_CLOCK,
                               threading.Event(), True)  # fmt: skip
    for i in range(n):
        await again.call(StepCall(f"s:{i}", "step", _noop))
    return time.perf_counter() - started, len(again.ran)


async def _asyncz(pg: DebianPostgres, n: int, sync: bool) -> dict[str, Any]:
    name = f"asyncz_steps_{'sync' if sync else 'async'}"
    url = fresh_db(pg, name)
    apply_migrations(url)
    probe = Probe(pg, name)
    store = PostgresStore.create(url, max_size=2)
    await store.open()
    try:
        journal = await _journal(store, n)
        probe.begin()
        run = probe.end(await _run(journal, n, sync), n)
        probe.begin()
        replay = probe.end(*await _replay(store, journal, n))
    finally:
        await store.close()
        probe.meter.admin.close()
    return {"name": f"AsyncZ, {'sync' if sync else 'async'} task", "run": run, "replay": replay}


async def _memory(n: int, sync: bool) -> dict[str, Any]:
    store = MemoryStore()
    journal = await _journal(store, n)
    wall = await _run(journal, n, sync)
    replay, ran = await _replay(store, journal, n)
    return {"name": f"AsyncZ in memory, {'sync' if sync else 'async'} task",
            "run": {"seconds": wall, "ran": n},
            "replay": {"seconds": replay, "ran": ran}}  # fmt: skip


# --------------------------------------------------------------------------- DBOS


def _dbos(pg: DebianPostgres, python: str, n: int, mode: str) -> dict[str, Any]:
    """Runs steps_peers.py in the peers' virtualenv, reading the counters at its marks."""
    name = f"dbos_steps_{mode}"
    url = fresh_db(pg, name)
    probe = Probe(pg, name)
    argv = [python, str(HERE / "steps_peers.py"), "dbos", url, str(n), mode]
    windows: dict[str, Window] = {}
    meta: dict[str, str] = {}
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=err, text=True)  # fmt: skip
        assert proc.stdin is not None and proc.stdout is not None
        for line in proc.stdout:
            if not line.startswith("@@ "):
                continue
            _, what, rest = line.rstrip("\n").split(" ", 2)
            if what == "done":
                meta = json.loads(rest)
                continue
            if what == "begin":
                probe.begin()
            else:
                window, seconds, ran = rest.split()
                windows[window] = probe.end(float(seconds), int(ran))
            proc.stdin.write("\n")
            proc.stdin.flush()
        if proc.wait():
            err.seek(0)
            raise SystemExit(f"{argv[:4]} failed:\n{err.read().decode(errors='replace')[-3000:]}")
    probe.meter.admin.close()
    return {"name": f"DBOS {meta['version']}, {mode} workflow", "knobs": meta["knobs"],
            "run": windows["run"], "replay": windows["replay"]}  # fmt: skip


# --------------------------------------------------------------------------- sleep


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
    return (f"| wake latency of a 1 s sleep ({jobs} jobs, a busy worker, its poll 0.2 s) | "
            f"{statistics.median(late):,.0f} ms median | {late[-1]:,.0f} ms max |")  # fmt: skip


# --------------------------------------------------------------------------- report


def _row(r: dict[str, Any], n: int) -> str:
    run, replay = r["run"], r["replay"]

    def per(w: Window, key: str, scale: float, fmt: str) -> str:
        return format(w[key] * scale / n, fmt) if key in w else "-"

    return (f"| {r['name']} | {per(run, 'seconds', 1e6, ',.0f')} | "
            f"{per(run, 'statements', 1, '.2f')} | {per(run, 'db_ms', 1000, '.1f')} | "
            f"{per(run, 'wal', 1, ',.0f')} | {per(run, 'cpu_s', 1e6, ',.0f')} | "
            f"{per(replay, 'seconds', 1e6, ',.1f')} | {per(replay, 'statements', 1, '.3f')} | "
            f"{per(replay, 'db_ms', 1000, '.2f')} |")  # fmt: skip


def _report(results: list[dict[str, Any]], n: int, wake: str) -> None:
    print(f"\nPer step, {n:,} no-op steps of one job (workflow), one after the other:")
    print("| contender | µs in process | statements | database µs | WAL bytes | server CPU µs "
          "| replayed: µs in process | replayed: statements | replayed: database µs |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(_row(r, n))
    print()
    for r in results:
        for window in ("run", "replay"):
            w = r[window]
            assert w["ran"] == (n if window == "run" else 0), f"{r['name']} {window}: {w['ran']}"
            if "top" in w:
                print(f"# {r['name']}, {window}, database µs and calls a step by statement: "
                      + "; ".join(f"{1000 * ms / n:.1f} µs {calls / n:.2f} ({q})"
                                  for ms, calls, q in w["top"]))  # fmt: skip
        if "knobs" in r:
            print(f"# {r['name']}: {r['knobs']}")
    by_name = {r["name"]: r for r in results}
    for mode in ("sync", "async"):
        ours = by_name[f"AsyncZ, {mode} task"]["run"]
        peer = next(r["run"] for r in results if r["name"].endswith(f", {mode} workflow"))
        ratio = {k: ours[k] / peer[k] for k in ("db_ms", "statements", "wal", "cpu_s", "seconds")}
        print(f"# {mode}: AsyncZ ÷ DBOS per step: database time {ratio['db_ms']:.2f}× "
              f"(target < 1: {'met' if ratio['db_ms'] < 1 else 'NOT met'}), statements "
              f"{ratio['statements']:.2f}×, WAL {ratio['wal']:.2f}×, server CPU "
              f"{ratio['cpu_s']:.2f}×, in process {ratio['seconds']:.2f}×")  # fmt: skip
    print()
    print("| sleep | median | max |")
    print("|---|---|---|")
    print(wake)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--peers-python", default="/tmp/asyncz-peers/bin/python")
    parser.add_argument("--sleeps", type=int, default=20)
    args = parser.parse_args()
    n = args.steps
    if not Path(args.peers_python).exists():
        raise SystemExit(f"no {args.peers_python}: make the peers' virtualenv (this docstring)")
    print(f"# {command('tests.perf.bench_steps', sys.argv[1:])}")
    print(f"# {machine()}")
    print(f"# {load_line()} (shared machine: other test suites may be running)")
    pg = DebianPostgres({"shared_preload_libraries": "pg_stat_statements",
                         "pg_stat_statements.track_utility": "on"})  # fmt: skip
    pg.start()
    redis_server = RedisServer(Path(tempfile.mkdtemp(prefix="bench-steps-")))
    redis_server.start()
    results, wake = [], ""
    try:
        with psycopg.connect(pg.server_url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
            print(f"# server: {conn.execute('SELECT version()').fetchone()[0]}", flush=True)  # type: ignore[index]
        for sync in (False, True):
            results.append(asyncio.run(_asyncz(pg, n, sync)))
            results.append(_dbos(pg, args.peers_python, n, "sync" if sync else "async"))
            results.append(asyncio.run(_memory(n, sync)))
            print(f"# done: {', '.join(r['name'] for r in results[-3:])}", flush=True)
        url = fresh_db(pg, "asyncz_sleeps")
        apply_migrations(url)
        wake = asyncio.run(_wake_latency(url, redis_server.url, args.sleeps))
    finally:
        redis_server.stop()
        pg.stop()
    _report(results, n, wake)
    print(f"# {load_line()}")


if __name__ == "__main__":
    main()
