"""Submit path benchmark: the real api Lambda handler vs a raw INSERT + ZADD baseline.

Each client is one OS process doing one request at a time (like one Lambda sandbox), with
one Postgres connection. Every client finishes its imports and a warm-up request before a
barrier; the clock starts when all have passed it, so no client's cold start eats into
another's measured window. On a shared two-core machine the load drifts, so the paths are
measured in alternating rounds (raw, handler, raw, handler, …) and the ratio is taken per
round, against the raw run just before it; the median of the rounds is the figure.

Paths:
  raw      psycopg INSERT + redis-py ZADD in a bare loop (the baseline)
  handler  ``asyncz.api.handler.handler`` with REST v1 events: POST /jobs through Mangum and
           the FastAPI app (the product as deployed)
  unique   the same with a new ``unique_key`` per request (each makes a job: the unique
           insert's price)
  held     the same with one ``unique_key`` for every request (after the first, each is a
           ``200`` naming the holder: the price of a duplicate's answer)

    .venv/bin/python -m tests.perf.bench_submit --concurrency 16 64 --seconds 10 --rounds 3
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
import uuid
from typing import Any

from tests.perf.common import API_KEY, DB, REDIS, command, load_line, machine, prepare, summary

BODY = json.dumps({"task": "echo", "payload": {"user_id": 42, "note": "benchmark"}})
PATHS = {
    "raw": "raw INSERT + ZADD",
    "handler": "api handler (product)",
    "unique": "api handler, new unique_key",
    "held": "api handler, held unique_key",
}


def _raw_request() -> Any:
    import psycopg
    import redis
    from psycopg.types.json import Jsonb

    conn = psycopg.connect(DB, autocommit=True)
    r = redis.Redis.from_url(REDIS)

    def one() -> None:
        job_id = str(uuid.uuid4())
        conn.execute(
            "INSERT INTO jobs (id, task, payload) VALUES (%s, %s, %s)",
            (job_id, "echo", Jsonb({"user_id": 42, "note": "benchmark"})),
        )
        r.zadd("bench:{default}:ready", {job_id: time.time() * 1000})

    return one


def _handler_request(kind: str = "handler") -> Any:
    from asyncz.api import handler as api
    from tests.support.apigw import FakeContext, rest_event

    body = json.loads(BODY) | ({"unique_key": "bench-held"} if kind == "held" else {})
    event = rest_event(
        "POST",
        "/jobs",
        raw_body=json.dumps(body).encode(),
        api_key=API_KEY,
        headers={"Content-Type": "application/json"},
    )
    keys = iter(range(10**9))
    prefix = f"bench-{uuid.uuid4()}-"

    def one() -> None:
        if kind == "unique":  # a fresh key: each request makes a job
            event["body"] = json.dumps(body | {"unique_key": f"{prefix}{next(keys)}"})
        reply = api.handler(event, FakeContext())
        if reply["statusCode"] not in ((200, 202) if kind == "held" else (202,)):
            raise SystemExit(f"unexpected reply {reply}")

    return one


def _client(kind: str, seconds: float, barrier: Any, out: Any) -> None:
    one = _raw_request() if kind == "raw" else _handler_request(kind)
    sink = io.StringIO()
    lat: list[float] = []
    with contextlib.redirect_stdout(sink):  # EMF/log lines would dominate a terminal
        one()  # cold start and connections, not measured
        barrier.wait()
        cpu = time.process_time()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t = time.perf_counter()
            one()
            lat.append((time.perf_counter() - t) * 1000)
            sink.seek(0)
            sink.truncate()
        cpu = time.process_time() - cpu
    out.put((lat, cpu))


def run(kind: str, concurrency: int, seconds: float) -> dict[str, float]:
    """One measured window of ``kind`` at ``concurrency`` clients (fresh tables first)."""
    prepare()
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    barrier = ctx.Barrier(concurrency + 1)
    procs = [
        ctx.Process(target=_client, args=(kind, seconds, barrier, q)) for _ in range(concurrency)
    ]
    for p in procs:
        p.start()
    barrier.wait(timeout=300)
    lat: list[float] = []
    cpu = 0.0
    for _ in procs:
        got, used = q.get(timeout=seconds + 120)
        lat.extend(got)
        cpu += used
    for p in procs:
        p.join(30)
    result = summary(lat, seconds)
    result["client_cpu_ms"] = cpu * 1000 / max(1, len(lat))
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--concurrency", type=int, nargs="+", default=[16])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--paths", nargs="+", default=list(PATHS), choices=list(PATHS))
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
    paths = ["raw", *[p for p in args.paths if p != "raw"]]
    print(f"# submit benchmark — {machine()}")
    print(f"# command: {command('tests.perf.bench_submit', sys.argv[1:])}")
    print(f"# {load_line()}")
    print(
        "| round | path | clients | req/s | p50 ms | p95 ms | p99 ms "
        "| client CPU ms/req | ratio to raw |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    ratios: dict[tuple[str, int], list[float]] = {}
    for c in args.concurrency:
        for rnd in range(1, args.rounds + 1):
            raw_rps = 0.0
            for kind in paths:
                s = run(kind, c, args.seconds)
                raw_rps = raw_rps or s["rps"]
                ratio = s["rps"] / raw_rps
                ratios.setdefault((kind, c), []).append(ratio)
                print(
                    f"| {rnd} | {PATHS[kind]} | {c} | {s['rps']:.0f} | {s['p50']:.2f} | "
                    f"{s['p95']:.2f} | {s['p99']:.2f} | {s['client_cpu_ms']:.3f} | "
                    f"{ratio:.2f} |",
                    flush=True,
                )
    print(f"# {load_line()}")
    print()
    print("| path | clients | ratio to raw, per round | median | ÷ handler, median |")
    print("|---|---|---|---|---|")
    for (kind, c), values in ratios.items():
        if kind != "raw":
            rounds = ", ".join(f"{v:.2f}" for v in values)
            plain = ratios.get(("handler", c))
            to_plain = (
                f"{statistics.median(v / p for v, p in zip(values, plain, strict=True)):.2f}"
                if plain and kind != "handler"
                else "—"
            )
            print(
                f"| {PATHS[kind]} | {c} | {rounds} | **{statistics.median(values):.2f}** "
                f"| {to_plain} |"
            )


if __name__ == "__main__":
    main()
