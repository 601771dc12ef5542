"""Processing benchmark: no-op (``echo``) jobs/s drained from a backlog by real worker
processes, beside a raw claim baseline measured in the same run.

- **worker**: ``python -m asyncz.worker.standalone`` (the real WorkerLoop: promote, one
  BZMPOP and one claim statement per batch, sync tasks on reusable threads, one complete
  statement per claim batch), 1, 2 and 4 OS processes.
- **raw**: a bare loop in each process of the same Redis and SQL calls, nothing else:
  BZPOPMIN (+ ZPOPMIN for a batch), the ``claim_jobs`` statement (UPDATE … RETURNING + the
  attempt INSERT), then the ``complete_job`` statement for each claimed id. ``--raw-batch 1``
  pops and claims one id at a time; the default mirrors the worker's batch (its concurrency).
- ``--variant``: the raw loop again, but completing each batch in ONE statement (the
  product's ``complete_jobs`` query): the floor of what the product's batching can reach.

The backlog (default 20,000 jobs) is inserted with one multi-row INSERT; then every process
of the side measured is started and waited for (raw: connected; worker: registered), and only
then are the ids enqueued with pipelined ZADDs. So no process's start-up (imports, connections)
runs during the drain, on either side: with 4 processes on 2 cores it used to compete with the
first processes' drain for the CPU. The rate is read from Postgres afterwards: completed jobs
/ (last ``finished_at`` − first ``started_at``). Each process count runs ``--rounds``
alternated rounds (raw, worker, raw, worker, …); the figure is the median of the rounds'
ratios (the box is shared: one round can be slowed by a neighbour).

    .venv/bin/python -m tests.perf.bench_processing --jobs 20000 --processes 1 2 4 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any

import psycopg
import redis
from psycopg.types.json import Jsonb

from asyncz.store.queries import QUERIES
from tests.perf.common import (
    DB,
    PREFIX,
    REDIS,
    bench_env,
    command,
    enqueue_backlog,
    insert_backlog,
    load_line,
    machine,
    prepare,
    ready_key,
    wait_completed,
)

# The batched completion the worker now uses (one fenced statement per batch), run by the
# raw loop's --variant to show what batching buys against one statement per job.
COMPLETE_MANY = QUERIES["complete_jobs"]


def claim_params(ids: list[str], worker_id: str) -> dict[str, Any]:
    """``claim_jobs``'s parameters, as ``PostgresStore.claim`` passes them."""
    return {"ids": ids, "worker_id": worker_id, "max_timeout": 900, "nonce": uuid.uuid4().hex}


def complete_params(lease: dict[str, Any]) -> dict[str, Any]:
    """``complete_job``'s parameters for a claimed row of the echo task (its result is its
    payload), as ``PostgresStore.complete`` passes them."""
    return {"id": lease["id"], "token": lease["lease_token"], "result": Jsonb(lease["payload"])}


def complete_many_params(leases: list[dict[str, Any]]) -> dict[str, Any]:
    """``complete_jobs``'s parameter: the batch as one JSON document."""
    done = [{"id": x["id"], "token": x["lease_token"], "result": x["payload"]} for x in leases]
    return {"done": json.dumps(done)}


def _raw_client(batch: int, ready: Any, out: Any, stop_key: str, complete_many: bool) -> None:
    """One process: pop → claim → complete, the worker's SQL and Redis calls and no more.

    Says it is ready once connected; leaves when ``stop_key`` exists and the queue is empty.
    """
    from psycopg.rows import dict_row

    claim_sql, complete_sql = QUERIES["claim_jobs"], QUERIES["complete_job"]
    conn = psycopg.connect(DB, autocommit=True, row_factory=dict_row)
    r = redis.Redis.from_url(REDIS, decode_responses=True)
    key = ready_key()
    worker_id = f"raw:{os.getpid()}"
    done = 0
    ready.put(os.getpid())
    while True:
        first = r.bzpopmin([key], timeout=0.2)
        if first is None:
            if r.exists(stop_key):
                break
            continue
        ids = [first[1]]
        if batch > 1:
            ids.extend(m for m, _ in r.zpopmin(key, batch - 1))
        leases = conn.execute(claim_sql, claim_params(ids, worker_id)).fetchall()
        if complete_many and leases:
            done += len(conn.execute(COMPLETE_MANY, complete_many_params(leases)).fetchall())
            continue
        for lease in leases:
            done += conn.execute(complete_sql, complete_params(lease)).fetchone() is not None
    out.put(done)


def run_raw(ids: list[str], processes: int, batch: int, complete_many: bool = False) -> None:
    """Start the raw processes, wait until each is connected, enqueue, drain, stop."""
    ctx = mp.get_context("spawn")
    ready, out = ctx.Queue(), ctx.Queue()
    stop_key = f"{PREFIX}:bench-stop"
    procs = [
        ctx.Process(target=_raw_client, args=(batch, ready, out, stop_key, complete_many))
        for _ in range(processes)
    ]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=120)
    enqueue_backlog(ids)
    wait_drained(len(ids))
    redis.Redis.from_url(REDIS).set(stop_key, 1)
    for _ in procs:
        out.get(timeout=120)
    for p in procs:
        p.join(30)


def run_workers(
    ids: list[str], processes: int, concurrency: int, log_dir: str, extra_env: dict[str, str]
) -> None:
    """Start the worker processes, wait until each has registered, enqueue, drain, stop."""
    env = bench_env(ASYNCZ_WORKER_CONCURRENCY=str(concurrency), **extra_env)
    procs = []
    for n in range(processes):
        log = open(os.path.join(log_dir, f"worker-{processes}-{n}.log"), "w")  # noqa: SIM115
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "asyncz.worker.standalone",
                    "--seconds",
                    "900",
                    "--idle-exit",
                    "0",
                    "--concurrency",
                    str(concurrency),
                ],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
    r = redis.Redis.from_url(REDIS)
    deadline = time.monotonic() + 120
    while r.zcard(f"{PREFIX}:workers") < processes:
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            raise SystemExit(f"workers did not all register; see {log_dir}")
        time.sleep(0.05)
    enqueue_backlog(ids)
    wait_drained(len(ids))
    for p in procs:
        p.send_signal(signal.SIGTERM)  # finish what runs, then exit
    for p in procs:
        if p.wait(timeout=120) != 0:
            raise SystemExit(f"worker exited with {p.returncode}; see {log_dir}")


def wait_drained(jobs: int, limit: float = 600.0) -> None:
    """Until every job is completed: the ready set's size first (cheap), then Postgres."""
    r = redis.Redis.from_url(REDIS)
    deadline = time.monotonic() + limit
    while r.zcard(ready_key()) and time.monotonic() < deadline:
        time.sleep(0.1)
    wait_completed(jobs, max(deadline - time.monotonic(), 1.0))


def measured(jobs: int) -> dict[str, float]:
    """Rate from the ledger: completed / (last finished_at − first started_at)."""
    with psycopg.connect(DB) as conn:
        n, span, attempts = conn.execute(
            "SELECT count(*) FILTER (WHERE status = 'completed'),"
            " extract(epoch FROM max(finished_at) - min(started_at))::float8,"
            " (SELECT count(*) FROM job_attempt_history) FROM jobs"
        ).fetchone()
    if n != jobs:
        print(f"# WARNING: {n} of {jobs} jobs completed", file=sys.stderr)
    return {
        "n": n,
        "seconds": span or float("nan"),
        "rps": n / span if span else 0.0,
        "attempts": attempts,
    }


def one(kind: str, processes: int, args: argparse.Namespace, log_dir: str) -> dict[str, float]:
    prepare()
    ids = insert_backlog(args.jobs)
    if kind == "raw":
        run_raw(ids, processes, args.raw_batch or args.concurrency)
    elif kind == "raw1":
        run_raw(ids, processes, 1)
    elif kind == "rawmany":
        run_raw(ids, processes, args.raw_batch or args.concurrency, complete_many=True)
    else:
        run_workers(ids, processes, args.concurrency, log_dir, {})
    return measured(args.jobs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--concurrency", type=int, default=10, help="worker jobs at once (batch)")
    ap.add_argument("--raw-batch", type=int, default=0, help="raw ids per claim (0 = concurrency)")
    ap.add_argument("--no-raw1", action="store_true", help="skip the one-id-at-a-time raw loop")
    ap.add_argument("--rounds", type=int, default=3, help="alternated rounds per process count")
    ap.add_argument(
        "--variant",
        action="store_true",
        help="also run the raw loop with batched completions (a proposed fix)",
    )
    args = ap.parse_args()
    os.environ.update(bench_env())
    log_dir = tempfile.mkdtemp(prefix="asyncz-bench-processing-")
    print(f"# processing benchmark — {machine()}")
    print(f"# {load_line()} (shared machine: other test suites may be running)")
    print(f"# command: {command('tests.perf.bench_processing', sys.argv[1:])}")
    print(
        f"# backlog {args.jobs} echo jobs per run; worker concurrency {args.concurrency}; "
        f"Postgres {DB.rsplit('/', 1)[-1]}, Redis {REDIS}"
    )
    batch = args.raw_batch or args.concurrency
    print(
        f"# {args.rounds} alternated rounds per process count; the ratio is the worker's rate "
        "over the raw loop's of the same round"
    )
    print("| path | processes | round | jobs | seconds | jobs/s | ratio to raw |")
    print("|---|---|---|---|---|---|---|")
    medians: list[tuple[int, list[float]]] = []
    for procs in args.processes:
        ratios = []
        for rnd in range(1, args.rounds + 1):
            raw = one("raw", procs, args, log_dir)
            rows = [(f"raw claim loop (batch {batch})", raw)]
            if not args.no_raw1 and batch != 1:
                rows.append(("raw claim loop (batch 1)", one("raw1", procs, args, log_dir)))
            worker = one("worker", procs, args, log_dir)
            rows.append((f"worker (standalone, concurrency {args.concurrency})", worker))
            ratios.append(worker["rps"] / raw["rps"])
            if args.variant:
                rows.append(
                    (
                        f"variant, not product: raw batch {batch} + ONE complete statement per "
                        "batch",
                        one("rawmany", procs, args, log_dir),
                    )
                )
            for name, s in rows:
                print(
                    f"| {name} | {procs} | {rnd} | {s['n']} | {s['seconds']:.2f} | "
                    f"{s['rps']:.0f} | {s['rps'] / raw['rps']:.2f} |",
                    flush=True,
                )
        medians.append((procs, ratios))
    print()
    print(f"| processes | worker ÷ raw (batch {batch}), median of {args.rounds} | rounds |")
    print("|---|---|---|")
    for procs, ratios in medians:
        each = " / ".join(f"{r:.2f}" for r in ratios)
        print(f"| {procs} | **{statistics.median(ratios):.2f}** | {each} |")
    print(f"# {load_line()} at the end")


if __name__ == "__main__":
    main()
