"""A job's bill of materials: what one ``echo`` job costs in the things AWS bills, measured
through ``asyncz dev`` with its defaults and Powertools metrics on (as deployed), per submit
shape (one ``POST /jobs`` per job, or ``POST /jobs/batch`` of 100):

- api and worker invocations and billed milliseconds per job (Lambda rounds each
  invocation up to the next 1 ms; a worker is billed for its whole wall time, long-poll
  waits and the idle tail before it exits included);
- log bytes per job per function: the function's own lines (Powertools JSON, EMF metrics)
  plus Lambda's START/END/REPORT platform lines (``PLATFORM_BYTES`` per invocation, modelled:
  ``asyncz dev`` does not write them) and the API Gateway access log line per request
  (modelled: the HTTP API's access log format of the code measured, with typical values);
- Redis commands per job (``INFO commandstats`` of a private redis-server);
- PostgreSQL transactions per job (``pg_stat_database.xact_commit`` of the bench database:
  every statement outside an explicit transaction is one).

    .venv/bin/python -m tests.perf.bench_cost --jobs 1000 --before 33a4195

``--before REV`` measures that commit's functions too, in the same run (its ``functions``
folder from ``git archive``, first on ``PYTHONPATH``), with Lambda's platform lines as that
commit deployed them (``--before-platform-bytes``), and prints after ÷ before.

docs/cost.md turns these quantities into dollars.
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import redis

from tests.perf.bench_scale_out import call
from tests.perf.common import (
    DB,
    DB_NAME,
    command,
    load_line,
    machine,
    prepare,
    start_dev,
    stop_dev,
)
from tests.support.devrun import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HTTP_API = "infra/asyncz_cdk/constructs/http_api.py"
# typical values of an HTTP API's $context variables for one POST /jobs
CONTEXT_SAMPLE = {
    "requestId": "JdX3WiRHIAMEV8w=", "identity.sourceIp": "203.0.113.10",
    "requestTime": "05/Dec/2026:11:34:59 +0000", "httpMethod": "POST", "path": "/jobs",
    "routeKey": "$default", "status": "202", "protocol": "HTTP/1.1", "responseLength": "96",
    "integrationLatency": "23",
}  # fmt: skip

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
    with psycopg.connect(DB, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s",
            (DB_NAME,),
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
    if "job_id" in record and (
        "status" in record or str(record.get("message", "")).startswith("job ")
    ):
        return "worker"  # the outcome line of an attempt
    name = str(record.get("function_name", ""))
    for fn in ("api", "worker", "fleet", "recovery"):
        if name.endswith(fn):
            return fn
    metrics = {m["Name"] for d in record.get("_aws", {}).get("CloudWatchMetrics", [])
               for m in d.get("Metrics", [])}  # fmt: skip
    if metrics & {"QueueDepth", "DLQDepth"}:
        return "recovery"  # the gauges
    if metrics & {"JobsSubmitted", "JobsRejected"}:
        return "api"
    if metrics:
        return "worker" if metrics & {"JobsCompleted", "JobsFailed", "JobDuration"} else "other"
    return "other"


def access_line_bytes(source: str) -> int:
    """The bytes of one HTTP API access line in the format ``source`` (http_api.py) sets."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            if names and names[0].lstrip("_") == "ACCESS_LOG":
                fmt: dict[str, str] = ast.literal_eval(node.value)
                compact = "separators" in source
                line = json.dumps(
                    {k: CONTEXT_SAMPLE[v.removeprefix("$context.")] for k, v in fmt.items()},
                    separators=(",", ":") if compact else None,
                )
                return len(line) + 1
    raise SystemExit("no ACCESS_LOG format in http_api.py")


def code_of(rev: str) -> tuple[str, int]:
    """A commit's ``functions`` folder, unpacked, and its access line's bytes."""
    folder = tempfile.mkdtemp(prefix=f"asyncz-bench-cost-{rev}-")
    archive = subprocess.run(
        ["git", "-C", ROOT, "archive", rev, "functions"], check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    source = subprocess.run(
        ["git", "-C", ROOT, "show", f"{rev}:{HTTP_API}"], check=True, capture_output=True,
        text=True,
    ).stdout  # fmt: skip
    return os.path.join(folder, "functions"), access_line_bytes(source)


def measure(
    jobs: int, batch: int, log_dir: str, platform_bytes: int, access_bytes: int,
    code: str | None = None,
) -> dict[str, float]:  # fmt: skip
    """One submit shape through ``asyncz dev`` of this checkout, or of the ``functions``
    folder ``code``."""
    prepare()
    server, redis_url = private_redis()
    log_path = os.path.join(log_dir, f"batch-{batch}{'-before' if code else ''}.log")
    paths = {"PYTHONPATH": os.pathsep.join(filter(None, [code, os.environ.get("PYTHONPATH")]))}
    try:
        port = free_port()
        dev = start_dev(
            port, log_path, args=(), dev_defaults=True, settle=3,
            ASYNCZ_REDIS_URL=redis_url, POWERTOOLS_METRICS_DISABLED="false",
            POWERTOOLS_METRICS_NAMESPACE="AsyncZ", ASYNCZ_DEV_LOG_FORMAT="json",  # it reads them
            **(paths if code else {}),
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
            figures["access_log_bytes"] += access_bytes
        elif record.get("message") == "REPORT" and str(record.get("sandbox", "")).startswith(
            "worker"
        ):
            figures["worker_invocations"] += 1
            figures["worker_billed_ms"] += math.ceil(float(record["duration_ms"]))
    figures["log_bytes_api"] += platform_bytes * figures["api_invocations"]
    figures["log_bytes_worker"] += platform_bytes * figures["worker_invocations"]
    own = sum(v for k, v in figures.items() if k.startswith("log_bytes_"))
    figures["log_bytes_total"] = own + figures["access_log_bytes"]
    figures["housekeeping_log_bytes"] = sum(
        figures[f"log_bytes_{fn}"] for fn in ("fleet", "recovery", "other")
    )
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
    ("housekeeping_log_bytes", "fleet and recovery log bytes (per minute, not per job)", "{:.0f}"),
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
    ap.add_argument("--before", help="a commit to measure too, in the same run (git rev)")
    ap.add_argument(
        "--before-platform-bytes", type=int, default=PLATFORM_BYTES,
        help="Lambda's platform log bytes per invocation as the --before commit deployed them",
    )  # fmt: skip
    args = ap.parse_args()
    print(f"# a job's bill of materials — {machine()}")
    print(f"# {load_line()}")
    print(f"# command: {command('tests.perf.bench_cost', sys.argv[1:])}")
    print(f"# asyncz dev defaults, Powertools metrics on; {args.jobs} echo jobs per shape; "
          f"platform lines modelled at {args.platform_bytes} B per invocation")  # fmt: skip
    log_dir = tempfile.mkdtemp(prefix="asyncz-bench-cost-")
    with open(os.path.join(ROOT, HTTP_API), encoding="utf-8") as f:
        access = access_line_bytes(f.read())
    columns: list[tuple[str, dict[str, float]]] = []
    for b in args.batches:
        shape = "single POST /jobs" if b == 1 else f"batch of {b}"
        if args.before:
            code, before_access = code_of(args.before)
            before = measure(args.jobs, b, log_dir, args.before_platform_bytes, before_access, code)
            columns.append((f"{shape}, {args.before}", before))
        after = measure(args.jobs, b, log_dir, args.platform_bytes, access)
        columns.append((shape, after))
        if args.before:
            columns.append(("after ÷ before", {
                k: after.get(k, 0.0) / v if v else math.nan for k, v in before.items()
            }))  # fmt: skip
    if args.before:
        print(f"# {args.before}: its functions, platform lines at "
              f"{args.before_platform_bytes} B per invocation")  # fmt: skip
    print("| per job | " + " | ".join(name for name, _ in columns) + " |")
    print("|---|" + "---|" * len(columns))
    for key, label, fmt in ROWS:
        cells = " | ".join(
            f"{figures.get(key, 0.0):.2f}×" if name == "after ÷ before"
            else fmt.format(figures.get(key, 0.0))
            for name, figures in columns
        )  # fmt: skip
        print(f"| {label} | {cells} |")
    print(f"# logs: {log_dir}")


if __name__ == "__main__":
    main()
