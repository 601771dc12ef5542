"""Scale-out benchmark: a burst of slow jobs drained by ``asyncz dev``, with the scale-out in
seconds (``ASYNCZ_SCALE_OUT_SECONDS=1``) and without it (``=0``: the api wakes one
worker when none is alive and the fleet tick adds the rest, today's behaviour before it),
in the same run, alternating.

Each round starts ``asyncz dev`` afresh (empty database and Redis db) with
``ASYNCZ_FLEET_MAX_WORKERS=4``, ``ASYNCZ_FLEET_JOBS_PER_WORKER=50`` and the fleet tick every
60 s (its first tick runs at start, before the burst, and sees nothing to do), waits until
the sandboxes are warm, then POSTs ``--jobs`` ``sleep`` jobs of ``--seconds`` each in
batches of 100 (two client threads). Drain = first submit → last ``finished_at`` (from Postgres).

    .venv/bin/python -m tests.perf.bench_scale_out --jobs 1000 --seconds 0.2 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg

from tests.perf.common import (
    API_KEY,
    DB,
    bench_env,
    command,
    load_line,
    machine,
    prepare,
    start_dev,
    stop_dev,
)
from tests.support.devrun import free_port

MODES = {"scale-out off (before)": "0", "scale-out on": "1"}


def call(port: int, method: str, path: str, body: Any = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method)
    req.add_header("x-api-key", API_KEY)
    req.add_header("content-type", "application/json")
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read() or b"null")


def burst(port: int, jobs: int, body: dict[str, Any], keys: int = 0) -> dict[str, float]:
    """Submit ``jobs`` copies of ``body`` in batches of 100 (with ``keys``, each batch's jobs
    spread over that many concurrency keys); time it to the last completion and watch the
    live workers (the peak and when it was first seen)."""
    live: list[tuple[float, int]] = []
    done = threading.Event()
    t0 = time.monotonic()

    def watch() -> None:
        while not done.is_set():
            n = call(port, "GET", "/stats")["live_workers"]
            live.append((time.monotonic() - t0, n))  # when the answer came
            time.sleep(0.25)

    def keyed(n: int) -> list[dict[str, Any]]:
        if not keys:
            return [body] * n
        return [{**body, "concurrency_key": f"k{i % keys}"} for i in range(n)]

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    # POST /jobs/batch of 100: the backlog is there at once, so the drain measures
    # the workers, not how fast the clients of a loaded 2-core box can submit one by one.
    batches = [min(100, jobs - i) for i in range(0, jobs, 100)]
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda n: call(port, "POST", "/jobs/batch", {"jobs": keyed(n)}), batches))
    submitted = time.monotonic() - t0
    with psycopg.connect(DB, autocommit=True) as conn:
        while True:
            row = conn.execute(
                "SELECT count(*) FILTER (WHERE status = 'completed'),"
                " extract(epoch FROM max(finished_at) - min(created_at))::float8 FROM jobs"
            ).fetchone()
            assert row is not None
            if row[0] >= jobs:
                break
            time.sleep(0.2)
    done.set()
    watcher.join(5)
    peak = max(n for _, n in live)
    at_peak = next(t for t, n in live if n == peak)
    return {"submit_s": submitted, "drain_s": float(row[1]), "peak": peak, "peak_at": at_peak}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=0.2)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    os.environ.update(bench_env())
    print(f"# scale-out — {machine()}")
    print(f"# {load_line()} (shared machine: other test suites may be running)")
    print(f"# command: {command('tests.perf.bench_scale_out', sys.argv[1:])}")
    print(
        f"# asyncz dev, max 4 workers, 50 jobs per worker, worker concurrency 10; "
        f"{args.jobs} sleep jobs of {args.seconds} s POSTed in batches of 100"
    )
    print("| round | mode | submit s | drain s | jobs/s | peak live workers | peak reached at s |")
    print("|---|---|---|---|---|---|---|")
    drains: dict[str, list[float]] = {m: [] for m in MODES}
    log_dir = tempfile.mkdtemp(prefix="asyncz-bench-scale-logs-")
    for rnd in range(1, args.rounds + 1):
        order = list(MODES) if rnd % 2 else list(reversed(MODES))
        for mode in order:
            prepare()
            port = free_port()
            dev = start_dev(
                port,
                os.path.join(log_dir, f"{rnd}-{MODES[mode]}.log"),
                settle=5,  # the fleet's first tick (at start) has run on an empty queue
                ASYNCZ_WAKE_WORKER="true",
                ASYNCZ_SCALE_OUT_SECONDS=MODES[mode],
                ASYNCZ_FLEET_MAX_WORKERS="4",
                ASYNCZ_FLEET_JOBS_PER_WORKER="50",
                ASYNCZ_FLEET_INTERVAL_SECONDS="60",
                ASYNCZ_RECOVERY_INTERVAL_SECONDS="60",
                ASYNCZ_WORKER_IDLE_EXIT_SECONDS="30",
                ASYNCZ_DB_POOL_MAX="2",
            )
            try:
                r = burst(port, args.jobs, {"task": "sleep", "payload": {"seconds": args.seconds}})
            finally:
                stop_dev(dev)
            drains[mode].append(r["drain_s"])
            print(
                f"| {rnd} | {mode} | {r['submit_s']:.1f} | {r['drain_s']:.1f} | "
                f"{args.jobs / r['drain_s']:.0f} | {r['peak']:.0f} | {r['peak_at']:.1f} |",
                flush=True,
            )
    before, after = (statistics.median(drains[m]) for m in MODES)
    print(
        f"\nmedian drain: before {before:.1f} s, with scale-out {after:.1f} s: "
        f"**{before / after:.2f}× faster**"
    )


if __name__ == "__main__":
    main()
