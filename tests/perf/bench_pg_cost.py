"""What a job costs PostgreSQL over its whole life, beside the Postgres queues people compare
us with, on one private server in one run: a PostgreSQL 15 of Debian's binaries with
``pg_stat_statements`` loaded, a fresh database per contender.

Per job and phase (submit, drain, maintenance): statements executed (``pg_stat_statements``
calls, BEGIN/COMMIT included: each is at least one round trip), database time (their
``total_exec_time``), WAL bytes (the server's LSN moved, all processes), the server's CPU
(every PostgreSQL process's utime+stime, exited backends through the postmaster's children
times) and the drain's client CPU (the worker process's rusage). Ours: the job service
in-process for the submit (what the api handler calls), one ``asyncz.worker.standalone``
process for the drain at worker concurrency (claim batch) 1, 10 (the default) or 50,
retention and the count fold (what recovery runs) for the maintenance. Peers: PgQueuer,
Procrastinate (a separate virtualenv: ``--peers-python``) and graphile-worker (``--graphile``,
a folder where ``npm install graphile-worker`` ran), each enqueuing the same no-op jobs one
call per job and 100 per call, and draining them with ONE worker process at ours'
concurrencies (at most 10 and 50 jobs in flight) and at its documented defaults; PgQueuer's
maintenance is the log fold its worker runs every 30 s (the others defer no work).

    python3 -m venv /tmp/asyncz-peers && /tmp/asyncz-peers/bin/pip install pgqueuer==1.6.0 \\
        procrastinate==3.10.0 'psycopg[binary]' asyncpg
    mkdir /tmp/asyncz-graphile && (cd /tmp/asyncz-graphile && npm init -y && \\
        npm install graphile-worker@0.18.0)
    .venv/bin/python -m tests.perf.bench_pg_cost --jobs 10000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from asyncz.jobs import NewJob
from asyncz.settings import Settings
from asyncz.store.migrations import apply_migrations, set_outbox
from tests.perf.common import command, load_line, machine
from tests.perf.proc_reader import cpu_seconds
from tests.support.private_servers import DebianPostgres, RedisServer
from tests.support.settings import open_service, settings_env

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PSS = """SELECT coalesce(sum(calls), 0)::bigint, coalesce(sum(total_exec_time), 0)::float8
           FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = %s)"""


def server_cpu_s(pg: DebianPostgres) -> float:
    """CPU seconds of every PostgreSQL process so far (the postmaster's children times hold
    the backends that exited)."""
    root = pg.postmaster_pid()
    return sum(cpu_seconds(pid, children=pid == root) or 0.0 for pid in pg.pids())


class Meter:
    """The server's counters for one database, read from the ``postgres`` database."""

    def __init__(self, pg: DebianPostgres, dbname: str) -> None:
        self.pg, self.dbname = pg, dbname
        self.admin = psycopg.connect(pg.server_url, autocommit=True)

    def read(self) -> dict[str, float]:
        calls, ms = self.admin.execute(PSS, (self.dbname,)).fetchone()  # type: ignore[misc]
        lsn = self.admin.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()
        return {"statements": calls, "db_ms": ms, "wal": float(lsn[0]),  # type: ignore[index]
                "cpu_s": server_cpu_s(self.pg), "t": time.perf_counter()}  # fmt: skip

    def by_statement(self) -> dict[str, tuple[int, float, float]]:
        """Calls, database ms and WAL bytes of each statement of this database so far."""
        rows = self.admin.execute(
            "SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 70), calls, total_exec_time,"
            " wal_bytes FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database"
            " WHERE datname = %s)", (self.dbname,),
        ).fetchall()  # fmt: skip
        out: dict[str, tuple[int, float, float]] = {}
        for text, calls, ms, wal in rows:
            c, m, w = out.get(text, (0, 0.0, 0.0))
            out[text] = (c + calls, m + ms, w + float(wal))
        return out

    def phase(self, run: Any) -> dict[str, float]:
        """The counters' change while ``run()`` runs; ``run`` may return the client's CPU s."""
        before = self.read()
        client_cpu = run()
        after = self.read()
        out = {k: after[k] - before[k] for k in before}
        out["client_cpu_s"] = float(client_cpu or 0.0)
        return out


LAST_LINE: dict[str, str] = {}  # the last line each peer's act printed (its version, knobs)


def run_child(argv: list[str], env: dict[str, str] | None = None, cwd: Path = REPO) -> float:
    """Runs ``argv`` to its end; returns its CPU seconds (user + system); fails loudly."""
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        out.seek(0)
        text = out.read().decode(errors="replace")
        if os.waitstatus_to_exitcode(status):
            raise SystemExit(f"{argv[:4]} failed:\n{text[-3000:]}")
    LAST_LINE[argv[1]] = (text.strip().splitlines() or [""])[-1]
    return usage.ru_utime + usage.ru_stime


def fresh_db(pg: DebianPostgres, name: str) -> str:
    with psycopg.connect(pg.server_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    return pg.url(name)


# --------------------------------------------------------------------------- ours


def ours(
    pg: DebianPostgres,
    redis_url: str,
    n: int,
    shape: str,
    concurrency: int,
    task: str = "echo",
    outbox: bool = False,
) -> dict[str, Any]:
    """``task``: the built-in sync ``echo`` (the default rows), or ``async_noop`` (a labelled
    variant: the peers' no-ops are ``async``; tests/perf/pg_cost_tasks.py). ``outbox``: the
    lifecycle events' outbox written (a stage with an event bus or webhooks, a labelled
    variant); off by default, as the migration leaves it on a stage with no sink (what
    ``cdk deploy`` makes)."""
    name = (f"ours_{shape}_{concurrency}" + ("_async" if task != "echo" else "")
            + ("_outbox" if outbox else ""))  # fmt: skip
    db = fresh_db(pg, name)
    apply_migrations(db)
    set_outbox(db, on=outbox)
    settings = Settings(
        database_url=db, redis_url=redis_url, redis_prefix=name, api_key_hashes="0" * 64,
        worker_function_name="asyncz-worker", publish_gauges=False,
        retain_finished_seconds=1, worker_concurrency=concurrency,
        task_modules="" if task == "echo" else "tests.perf.pg_cost_tasks",
    )  # fmt: skip
    meter = Meter(pg, name)

    async def submit() -> None:
        async with open_service(settings) as svc:
            if shape == "single":
                for _ in range(n):
                    await svc.submit(NewJob(task=task, payload={}))
            else:
                for i in range(0, n, 100):
                    await svc.submit_many([NewJob(task=task, payload={})] * min(100, n - i))

    async def maintain() -> None:
        async with open_service(settings) as svc:
            await svc.prune()
            await svc.fold_counts()
        if outbox:  # the publisher deletes each event once its sinks took it (one statement)
            with psycopg.connect(db, autocommit=True) as conn:
                conn.execute("DELETE FROM job_outbox")

    env = {**settings_env(settings), "POWERTOOLS_METRICS_DISABLED": "true",
           "POWERTOOLS_TRACE_DISABLED": "true", "AWS_REGION": "us-east-1"}  # fmt: skip
    worker = [sys.executable, "-m", "asyncz.worker.standalone", "--seconds", "600",
              "--idle-exit", "1", "--concurrency", str(concurrency)]  # fmt: skip
    submitted = meter.phase(lambda: asyncio.run(submit()))
    before = meter.by_statement()
    phases = {"submit": submitted, "drain": meter.phase(lambda: run_child(worker, env))}
    after = meter.by_statement()
    was = {q: before.get(q, (0, 0.0, 0.0)) for q in after}
    top = sorted(((after[q][1] - was[q][1], after[q][0] - was[q][0], after[q][2] - was[q][2], q)
                  for q in after), reverse=True)[:4]  # fmt: skip
    print(f"# {name} drain, database µs/job and WAL B/job by statement: " + "; ".join(
        f"{1000 * ms / n:.0f} µs {wal / n:,.0f} B ({calls} calls) {q}"
        for ms, calls, wal, q in top), flush=True)  # fmt: skip
    empty = time.perf_counter()
    run_child(worker, env)  # the same process on an empty queue: its start and its exit
    phases["drain"]["empty_s"] = time.perf_counter() - empty
    with psycopg.connect(db) as conn:
        left = conn.execute("SELECT count(*) FROM jobs WHERE status <> 'completed'").fetchone()
        assert left == (0,), f"{name}: {left} jobs not completed"
        span = conn.execute("SELECT extract(epoch FROM max(finished_at) - min(started_at)) "
                            "FROM jobs").fetchone()[0]  # type: ignore[index]  # fmt: skip
    time.sleep(1.2)  # past retain_finished_seconds
    phases["drain"]["span_s"] = float(span)
    phases["maintenance"] = meter.phase(lambda: asyncio.run(maintain()))
    with psycopg.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,), "retention left rows"
    meter.admin.close()
    label = ("" if task == "echo" else ", async no-op (variant)") + (
        ", outbox on: a stage with a sink (variant)" if outbox else ""
    )
    return {
        "name": f"AsyncZ, {shape} submit, worker concurrency {concurrency}{label}",
        "phases": phases,
        "knobs": "defaults (heartbeat 10 s: a no-op never beats), one standalone worker"
        + (
            "; the outbox's rows deleted in the maintenance, as its publisher does"
            if outbox
            else ""
        )
        + ("" if task == "echo" else "; an `async def` no-op task"),
    }


# --------------------------------------------------------------------------- peers


def peer(pg: DebianPostgres, who: str, n: int, shape: str, py: str, gw: Path,
         concurrency: int = 0) -> dict[str, Any]:  # fmt: skip
    """``concurrency``: at most that many jobs in flight in its one worker, as ours; 0: its
    documented defaults (PgQueuer's caps none: it claims batch after batch while they run)."""
    name = f"{who.replace('-', '_')}_{shape}_{concurrency}"
    dsn = fresh_db(pg, name)
    meter = Meter(pg, name)
    if who == "graphile-worker":
        script = gw / "pg_cost_graphile.js"
        script.write_text(PEER_JS)
        base = ["node", str(script)]
        cwd = gw
    else:
        base, cwd = [py, str(HERE / "pg_cost_peers.py"), who], REPO
    args = [dsn, str(n), shape, str(concurrency)]
    run_child([*base, "install", *args], cwd=cwd)
    phases = {
        "submit": meter.phase(lambda: run_child([*base, "enqueue", *args], cwd=cwd)),
        "drain": meter.phase(lambda: run_child([*base, "drain", *args], cwd=cwd)),
    }
    empty = time.perf_counter()
    run_child([*base, "drain", *args], cwd=cwd)
    phases["drain"]["empty_s"] = time.perf_counter() - empty
    if who in SPAN:
        with psycopg.connect(dsn) as conn:
            phases["drain"]["span_s"] = float(conn.execute(SPAN[who]).fetchone()[0])  # type: ignore[index]
    if who in DEFERRED:  # the work its worker defers, until every row is final
        phases["maintenance"] = meter.phase(
            lambda: run_child([*base, "maintain", *args], cwd=cwd))  # fmt: skip
    meter.admin.close()
    meta = json.loads(LAST_LINE[base[1]])
    at = f"at most {concurrency} in flight" if concurrency else "its defaults"
    return {"name": f"{who} {meta['version']}, {shape} enqueue, {at}", "phases": phases,
            "knobs": meta["knobs"]}  # fmt: skip


DEFERRED = {"pgqueuer"}  # folds its log into its statistics (every 30 s in a running worker)


# first start → last finish, from the peer's own log of events (graphile-worker deletes a
# finished job and keeps no event: its drain is timed by its process, less an empty run)
SPAN = {
    "pgqueuer": "SELECT extract(epoch FROM max(created) FILTER (WHERE status = 'successful')"
    " - min(created) FILTER (WHERE status = 'picked')) FROM pgqueuer_log",
    "procrastinate": "SELECT extract(epoch FROM max(at) FILTER (WHERE type = 'succeeded')"
    " - min(at) FILTER (WHERE type = 'started')) FROM procrastinate_events",
}
PEER_JS = ""  # set in main from pg_cost_peers.GRAPHILE (kept beside the Python drivers)


def whole_life(r: dict[str, Any]) -> dict[str, float]:
    keys = ("statements", "db_ms", "wal", "cpu_s")
    return {k: sum(p[k] for p in r["phases"].values()) for k in keys}


def table(results: list[dict[str, Any]], n: int) -> None:
    print(f"\nA job's whole life (submit + drain + maintenance), per job, {n:,} no-op jobs:")
    print("| contender | statements | database µs | WAL bytes | server CPU µs | of which submit "
          "(statements / db µs / WAL B) | maintenance (statements / db µs / WAL B) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for r in results:
        w, sub, m = whole_life(r), r["phases"]["submit"], r["phases"].get("maintenance")
        maint = (f"{m['statements'] / n:.2f} / {1000 * m['db_ms'] / n:.0f} / {m['wal'] / n:,.0f}"
                 if m else "none (the row is deleted at completion, or kept)")  # fmt: skip
        print(f"| {r['name']} | {w['statements'] / n:.2f} | {1000 * w['db_ms'] / n:.0f} | "
              f"{w['wal'] / n:,.0f} | {1e6 * w['cpu_s'] / n:.0f} | {sub['statements'] / n:.2f} / "
              f"{1000 * sub['db_ms'] / n:.0f} / {sub['wal'] / n:,.0f} | {maint} |")  # fmt: skip
    print("\nThe drain: one worker process; jobs/s = jobs ÷ (last finish − first start) from the "
          "queue's own timestamps, or (*) ÷ (the process's wall time − its wall time on an empty "
          "queue)")  # fmt: skip
    print("| contender | jobs/s | statements/job | database µs/job | server CPU µs/job | "
          "worker CPU µs/job | WAL B/job |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for r in results:
        d = r["phases"]["drain"]
        span = d.get("span_s") or max(d["t"] - d["empty_s"], 1e-3)
        mark = "" if "span_s" in d else " (*)"
        print(f"| {r['name']} | {n / span:,.0f}{mark} | {d['statements'] / n:.2f} | "
              f"{1000 * d['db_ms'] / n:.0f} | {1e6 * d['cpu_s'] / n:.0f} | "
              f"{1e6 * d['client_cpu_s'] / n:.0f} | {d['wal'] / n:,.0f} |")  # fmt: skip
    print()
    for r in results:
        print(f"- {r['name']}: {r['knobs']}")


def main() -> None:
    global PEER_JS
    from tests.perf.pg_cost_peers import GRAPHILE

    PEER_JS = GRAPHILE
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--peers-python", default="/tmp/asyncz-peers/bin/python")
    ap.add_argument("--graphile", default="/tmp/asyncz-graphile")
    ap.add_argument("--only", nargs="*", default=["ours", "pgqueuer", "procrastinate",
                                                  "graphile-worker"])  # fmt: skip
    args = ap.parse_args()
    print(f"# PostgreSQL cost per job — {machine()}")
    print(f"# {load_line()} (shared machine: other test suites may be running)")
    print(f"# command: {command('tests.perf.bench_pg_cost', sys.argv[1:])}")
    pg = DebianPostgres({"shared_preload_libraries": "pg_stat_statements",
                         "pg_stat_statements.track_utility": "on"})  # fmt: skip
    workdir = Path(tempfile.mkdtemp(prefix="asyncz-pg-cost-"))
    redis_server = RedisServer(workdir)
    pg.start()
    redis_server.start()
    results = []
    try:
        with psycopg.connect(pg.server_url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
            print(f"# server: {conn.execute('SELECT version()').fetchone()[0]}, "  # type: ignore[index]
                  "defaults + pg_stat_statements", flush=True)  # fmt: skip
        peers = [who for who in ("pgqueuer", "procrastinate", "graphile-worker")
                 if who in args.only]  # fmt: skip

        def run_ours(shape: str, concurrency: int, task: str = "echo", outbox: bool = False
                     ) -> None:  # fmt: skip
            if "ours" in args.only:
                redis_server.client().flushall()
                results.append(ours(pg, redis_server.url, args.jobs, shape, concurrency, task,
                                    outbox))  # fmt: skip
                print(f"# done: {results[-1]['name']}", flush=True)

        def run_peers(shape: str, concurrency: int) -> None:
            for who in peers:
                results.append(peer(pg, who, args.jobs, shape, args.peers_python,
                                    Path(args.graphile), concurrency))  # fmt: skip
                print(f"# done: {results[-1]['name']}", flush=True)

        # each pair at the same concurrency runs back to back (a shared machine drifts)
        for shape, concurrency in (("single", 10), ("batch", 10), ("batch", 50)):
            run_ours(shape, concurrency)
            run_peers(shape, concurrency)
        run_ours("batch", 1)  # variants: one job at a time, an async no-op, a sink
        run_ours("batch", 10, "async_noop")
        run_ours("batch", 10, outbox=True)
        for shape in ("single", "batch"):  # the peers' documented defaults
            run_peers(shape, 0)
    finally:
        redis_server.stop()
        pg.stop()
    table(results, args.jobs)
    print(f"# {load_line()}")


if __name__ == "__main__":
    main()
