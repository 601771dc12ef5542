"""Latency benchmark: submit-to-completed p50/p95/p99 of ``echo`` jobs with a warm fleet.

Worker processes (``python -m asyncz.worker.standalone``) are started first and left idle
until they have registered; then one client submits ``--jobs`` jobs through the real api
Lambda handler at a steady ``--rate``. Latency is read from Postgres afterwards:
``finished_at - created_at`` (both the server's ``now()``), so no client clock is involved.

Baseline in the same run: the same submissions drained by bare raw claim loops (BZPOPMIN →
claim statement → complete statement, see bench_processing) in as many processes.

    .venv/bin/python -m tests.perf.bench_latency --jobs 500 --rate 50 --workers 2
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import tempfile
import time

import psycopg
import redis

from tests.perf.bench_processing import _raw_client
from tests.perf.common import (
    API_KEY,
    DB,
    PREFIX,
    REDIS,
    bench_env,
    command,
    load_line,
    machine,
    pct,
    prepare,
    wait_completed,
)

BODY = json.dumps({"task": "echo", "payload": {"user_id": 42, "note": "latency"}})
STOP_KEY = f"{PREFIX}:latency-stop"


def submit_steady(jobs: int, rate: float) -> float:
    """Submit through the api handler in this process at ``rate`` per second (open loop)."""
    from asyncz.api import handler as api
    from tests.support.apigw import FakeContext, rest_event

    event = rest_event(
        "POST",
        "/jobs",
        raw_body=BODY.encode(),
        api_key=API_KEY,
        headers={"Content-Type": "application/json"},
    )
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink):
        api.handler(rest_event("GET", "/health"), FakeContext())  # cold start, not measured
        start = time.monotonic()
        for n in range(jobs):
            delay = start + n / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            reply = api.handler(event, FakeContext())
            if reply["statusCode"] != 202:
                raise SystemExit(f"unexpected reply {reply}")
            sink.seek(0)
            sink.truncate()
    return time.monotonic() - start


def latencies() -> list[float]:
    with psycopg.connect(DB) as conn:
        rows = conn.execute(
            "SELECT extract(epoch FROM finished_at - created_at) * 1000 FROM jobs"
            " WHERE status = 'completed'"
        ).fetchall()
    return [float(r[0]) for r in rows]


def with_workers(n: int, concurrency: int, jobs: int, rate: float) -> list[float]:
    env = bench_env()
    log_dir = tempfile.mkdtemp(prefix="asyncz-bench-latency-")
    procs = [
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
            stdout=open(os.path.join(log_dir, f"w{i}.log"), "w"),  # noqa: SIM115
            stderr=subprocess.STDOUT,
        )
        for i in range(n)
    ]
    try:
        r = redis.Redis.from_url(REDIS)
        end = time.monotonic() + 60
        while r.zcard(f"{PREFIX}:workers") < n:
            if time.monotonic() > end:
                raise SystemExit(f"workers did not register; see {log_dir}")
            time.sleep(0.1)
        time.sleep(1.0)  # idle, blocked in BZPOPMIN: a warm fleet
        submit_steady(jobs, rate)
        wait_completed(jobs)
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(30)
    return latencies()


def with_raw(n: int, batch: int, jobs: int, rate: float) -> list[float]:
    ctx = mp.get_context("spawn")
    ready, q = ctx.Queue(), ctx.Queue()
    procs = [
        ctx.Process(target=_raw_client, args=(batch, ready, q, STOP_KEY, False)) for _ in range(n)
    ]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=120)  # connected; in BZPOPMIN at once
    try:
        submit_steady(jobs, rate)
        wait_completed(jobs)
    finally:
        redis.Redis.from_url(REDIS).set(STOP_KEY, "1")
        for _ in procs:
            q.get(timeout=60)
        for p in procs:
            p.join(30)
    return latencies()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=500)
    ap.add_argument("--rate", type=float, default=50.0, help="submissions per second")
    ap.add_argument("--workers", type=int, default=2, help="worker (and raw) processes")
    ap.add_argument("--concurrency", type=int, default=10)
    args = ap.parse_args()
    os.environ.update(bench_env())
    print(f"# latency benchmark — {machine()}")
    print(f"# {load_line()} (shared machine: other test suites may be running)")
    print(f"# command: {command('tests.perf.bench_latency', sys.argv[1:])}")
    print(
        f"# {args.jobs} echo jobs submitted through the api handler at {args.rate:g}/s; "
        f"{args.workers} consumer processes, warm and idle before the first submit"
    )
    print("| consumer | jobs | p50 ms | p95 ms | p99 ms | max ms | p50 ratio to raw |")
    print("|---|---|---|---|---|---|---|")
    prepare()
    raw = with_raw(args.workers, args.concurrency, args.jobs, args.rate)
    prepare()
    work = with_workers(args.workers, args.concurrency, args.jobs, args.rate)
    for name, lat in (
        (f"raw claim loop ×{args.workers}", raw),
        (f"worker (standalone) ×{args.workers}, concurrency {args.concurrency}", work),
    ):
        print(
            f"| {name} | {len(lat)} | {pct(lat, 50):.1f} | {pct(lat, 95):.1f} | "
            f"{pct(lat, 99):.1f} | {max(lat):.1f} | {pct(lat, 50) / pct(raw, 50):.2f} |",
            flush=True,
        )
    print(f"# {load_line()} at the end")


if __name__ == "__main__":
    main()
