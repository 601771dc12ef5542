"""Submit path benchmark: the real api Lambda handler vs a raw INSERT + ZADD baseline.

Each client is one OS process doing one request at a time (like one Lambda sandbox), for
the same wall time and concurrency in both runs; the ratio is what counts.

    .venv/bin/python -m tests.perf.bench_submit --concurrency 16 --seconds 10
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import multiprocessing as mp
import os
import sys
import time
import uuid
from typing import Any

from tests.perf.common import API_KEY, DB, REDIS, machine, prepare, summary

BODY = json.dumps({"task": "echo", "payload": {"user_id": 42, "note": "benchmark"}})


def _raw_client(seconds: float, out: Any) -> None:
    import psycopg
    import redis
    from psycopg.types.json import Jsonb

    conn = psycopg.connect(DB, autocommit=True)
    r = redis.Redis.from_url(REDIS)
    lat: list[float] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t = time.perf_counter()
        job_id = str(uuid.uuid4())
        conn.execute(
            "INSERT INTO jobs (id, task, payload) VALUES (%s, %s, %s)",
            (job_id, "echo", Jsonb({"user_id": 42, "note": "benchmark"})),
        )
        r.zadd("bench:{default}:ready", {job_id: time.time() * 1000})
        lat.append((time.perf_counter() - t) * 1000)
    out.put(lat)


def _handler_client(seconds: float, out: Any) -> None:
    from asyncz.api import handler as api
    from tests.apigw import FakeContext, rest_event

    event = rest_event(
        "POST",
        "/jobs",
        raw_body=BODY.encode(),
        api_key=API_KEY,
        headers={"Content-Type": "application/json"},
    )
    lat: list[float] = []
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink):  # EMF/log lines would dominate a terminal
        api.handler(event, FakeContext())  # cold start, not measured
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t = time.perf_counter()
            reply = api.handler(event, FakeContext())
            lat.append((time.perf_counter() - t) * 1000)
            if reply["statusCode"] != 202:
                raise SystemExit(f"unexpected reply {reply}")
            sink.seek(0)
            sink.truncate()
    out.put(lat)


def run(kind: str, concurrency: int, seconds: float) -> dict[str, float]:
    target = _raw_client if kind == "raw" else _handler_client
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=target, args=(seconds, q)) for _ in range(concurrency)]
    for p in procs:
        p.start()
    lat: list[float] = []
    for _ in procs:
        lat.extend(q.get(timeout=seconds + 120))
    for p in procs:
        p.join(30)
    return summary(lat, seconds)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--concurrency", type=int, nargs="+", default=[16])
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse_args()
    from asyncz.connections import hash_api_key

    os.environ.update(
        {
            "ASYNCZ_DATABASE_URL": DB,
            "ASYNCZ_REDIS_URL": REDIS,
            "ASYNCZ_REDIS_PREFIX": "bench",
            "ASYNCZ_API_KEY_HASHES": hash_api_key(API_KEY),
            "ASYNCZ_WAKE_WORKER": "false",
            "POWERTOOLS_TRACE_DISABLED": "true",
            # one connection per client process, like one Lambda sandbox behind a proxy:
            # 64 clients x 2 would exhaust a default server's max_connections=100
            "ASYNCZ_DB_POOL_MAX": "1",
        }
    )
    print(f"# submit benchmark — {machine()}")
    command = [os.path.basename(sys.executable), "-m", "tests.perf.bench_submit", *sys.argv[1:]]
    print(f"# command: {' '.join(command)}")
    print("| path | clients | req/s | p50 ms | p95 ms | p99 ms | ratio to raw |")
    print("|---|---|---|---|---|---|---|")
    for c in args.concurrency:
        prepare()
        raw = run("raw", c, args.seconds)
        prepare()
        api = run("handler", c, args.seconds)
        for name, s in (("raw INSERT + ZADD", raw), ("api handler (Mangum+FastAPI)", api)):
            print(
                f"| {name} | {c} | {s['rps']:.0f} | {s['p50']:.2f} | {s['p95']:.2f} | "
                f"{s['p99']:.2f} | {s['rps'] / raw['rps']:.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
