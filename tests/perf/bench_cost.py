"""A job's bill of materials: what one ``echo`` job costs in the things AWS bills, measured
through ``asyncz dev`` with its defaults and Powertools metrics on (as deployed), per submit
shape (one ``POST /jobs`` per job, or ``POST /jobs/batch`` of 100):

- api and worker invocations and billed milliseconds per job (Lambda rounds each
  invocation up to the next 1 ms; a worker is billed for its whole wall time, long-poll
  waits and the idle tail before it exits included);
- log bytes per job per function: the function's own lines (Powertools JSON, EMF metrics)
  plus Lambda's START/END/REPORT platform lines (``PLATFORM_BYTES`` per invocation, modelled:
  ``asyncz dev`` does not write them) and the API Gateway access log line per request;
- Redis commands per job (``INFO commandstats`` of a private redis-server);
- PostgreSQL transactions per job (``pg_stat_database.xact_commit`` of the bench database:
  every statement outside an explicit transaction is one).

    .venv/bin/python -m tests.perf.bench_cost --jobs 1000

docs/cost.md turns these quantities into dollars.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import redis

from tests.perf.bench_scale_out import call
from tests.perf.common import DB, command, load_line, machine, prepare, start_dev, stop_dev
from tests.support.devrun import free_port

# Lambda's platform lines per invocation in its text log format: START (~70 B), END (~50 B)
# and REPORT (~140 B with its durations and memory). The deployed functions log JSON with
# Lambda's own lines at WARN, which drops them: --platform-bytes 0.
PLATFORM_BYTES = 260
STATS_FLUSH_SECONDS = 11.0  # PostgreSQL's PGSTAT_IDLE_INTERVAL (10 s), and a margin


def private_redis() -> tuple[subprocess.Popen[bytes], str]:
    """A redis-server of this run alone: its command counts are this run's."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [shutil.which("redis-server") or "redis-server", "--port", str(port), "--save", "",
         "--appendonly", "no", "--bind", "127.0.0.1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"redis://127.0.0.1:{port}/0"
    for _ in range(100):
        try:
            redis.Redis.from_url(url).ping()
            return proc, url
        except redis.ConnectionError:
            time.sleep(0.05)
    raise SystemExit("redis-server did not start")


def redis_calls(url: str) -> int:
    stats = redis.Redis.from_url(url).info("commandstats")
    return sum(int(v["calls"]) for k, v in stats.items() if k != "cmdstat_info")


def pg_commits() -> int:
    name = psycopg.conninfo.conninfo_to_dict(DB)["dbname"]
    with psycopg.connect(DB, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s", (name,)
        ).fetchone()
    assert row is not None
    return int(row[0])


def submit(port: int, jobs: int, batch: int) -> None:
    body = {"task": "echo", "payload": {"n": 1}}
    if batch == 1:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda _: call(port, "POST", "/jobs", body), range(jobs)))
        return
    sizes = [min(batch, jobs - i) for i in range(0, jobs, batch)]
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda n: call(port, "POST", "/jobs/batch", {"jobs": [body] * n}), sizes))


def wait_done(jobs: int) -> None:
    with psycopg.connect(DB, autocommit=True) as conn:
        while True:
            row = conn.execute("SELECT count(*) FROM jobs WHERE status = 'completed'").fetchone()
            if row is not None and row[0] >= jobs:
                return
            time.sleep(0.2)


def owner(record: dict[str, Any]) -> str | None:
    """Which function wrote a line of the function's own (None: the local runner's)."""
    if "component" in record:
        return None
    if str(record.get("message", "")).startswith("job ") and "job_id" in record:
        return "worker"  # the outcome line of an attempt
    name = str(record.get("function_name", ""))
    for fn in ("api", "worker", "fleet", "recovery"):
        if name.endswith(fn):
            return fn
    metrics = {m["Name"] for d in record.get("_aws", {}).get("CloudWatchMetrics", [])
               for m in d.get("Metrics", [])}  # fmt: skip
    if metrics & {"JobsSubmitted", "JobsRejected"}:
        return "api"
    if metrics:
        return "worker" if metrics & {"JobsCompleted", "JobsFailed", "JobDuration"} else "other"
    return "other"


def measure(jobs: int, batch: int, log_dir: str, platform_bytes: int) -> dict[str, float]:
    prepare()
    server, redis_url = private_redis()
    log_path = os.path.join(log_dir, f"batch-{batch}.log")
    try:
        port = free_port()
        dev = start_dev(
            port, log_path, args=(), dev_defaults=True, settle=3,
            ASYNCZ_REDIS_URL=redis_url, POWERTOOLS_METRICS_DISABLED="false",
            POWERTOOLS_METRICS_NAMESPACE="AsyncZ", ASYNCZ_DEV_LOG_FORMAT="json",  # it reads them
        )  # fmt: skip
        start = os.path.getsize(log_path)
        calls0, commits0 = redis_calls(redis_url), pg_commits()
        submit(port, jobs, batch)
        wait_done(jobs)
        time.sleep(STATS_FLUSH_SECONDS)  # an idle backend reports its commits within 10 s
        calls1, commits1 = redis_calls(redis_url), pg_commits()
        stop_dev(dev)  # the workers' invocations end: their REPORT lines are written
    finally:
        server.terminate()
        server.wait(10)
    with open(log_path, encoding="utf-8", errors="replace") as f:
        f.seek(start)
        lines = f.read().splitlines()
    figures: dict[str, float] = defaultdict(float)
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        fn = owner(record)
        if fn is not None:
            figures[f"log_bytes_{fn}"] += len(line) + 1
            continue
        if record.get("component") == "gateway" and str(record.get("message", "")).startswith(
            "POST /jobs"
        ):
            figures["api_invocations"] += 1
            figures["api_billed_ms"] += math.ceil(float(record["ms"]))
            figures["access_log_bytes"] += len(line) + 1
        elif record.get("message") == "REPORT" and str(record.get("sandbox", "")).startswith(
            "worker"
        ):
            figures["worker_invocations"] += 1
            figures["worker_billed_ms"] += math.ceil(float(record["duration_ms"]))
    figures["log_bytes_api"] += platform_bytes * figures["api_invocations"]
    figures["log_bytes_worker"] += platform_bytes * figures["worker_invocations"]
    own = sum(v for k, v in figures.items() if k.startswith("log_bytes_"))
    figures["log_bytes_total"] = own + figures["access_log_bytes"]
    figures["redis_commands"] = calls1 - calls0
    figures["pg_transactions"] = commits1 - commits0
    return {k: v / jobs for k, v in figures.items()}


ROWS = [
    ("api_invocations", "api invocations", "{:.3f}"),
    ("api_billed_ms", "api billed ms", "{:.2f}"),
    ("worker_invocations", "worker invocations", "{:.4f}"),
    ("worker_billed_ms", "worker billed ms (wall, idle tail included)", "{:.1f}"),
    ("log_bytes_api", "api log bytes (own + platform)", "{:.0f}"),
    ("log_bytes_worker", "worker log bytes (own + platform)", "{:.0f}"),
    ("access_log_bytes", "API Gateway access log bytes", "{:.0f}"),
    ("log_bytes_total", "log bytes in all", "{:.0f}"),
    ("redis_commands", "Redis commands", "{:.2f}"),
    ("pg_transactions", "PostgreSQL transactions (≈ statements)", "{:.2f}"),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 100])
    ap.add_argument(
        "--platform-bytes", type=int, default=0,
        help=f"Lambda's platform log bytes per invocation (0 as deployed; {PLATFORM_BYTES} "
        "with Lambda's text log format)",
    )  # fmt: skip
    args = ap.parse_args()
    print(f"# a job's bill of materials — {machine()}")
    print(f"# {load_line()}")
    print(f"# command: {command('tests.perf.bench_cost', sys.argv[1:])}")
    print(f"# asyncz dev defaults, Powertools metrics on; {args.jobs} echo jobs per shape; "
          f"platform lines modelled at {args.platform_bytes} B per invocation")  # fmt: skip
    log_dir = tempfile.mkdtemp(prefix="asyncz-bench-cost-")
    results = {b: measure(args.jobs, b, log_dir, args.platform_bytes) for b in args.batches}
    heads = " | ".join("single POST /jobs" if b == 1 else f"batch of {b}" for b in args.batches)
    print(f"| per job | {heads} |")
    print("|---|" + "---|" * len(args.batches))
    for key, label, fmt in ROWS:
        cells = " | ".join(fmt.format(results[b].get(key, 0.0)) for b in args.batches)
        print(f"| {label} | {cells} |")
    print(f"# logs: {log_dir}")


if __name__ == "__main__":
    main()
