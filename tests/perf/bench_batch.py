"""Batch submit vs single submits through ``asyncz dev``: jobs accepted per
second with ``POST /jobs/batch`` of 100 jobs (``Client.submit_many``) beside one
``POST /jobs`` per job (``Client.submit``), measured back to back in the same run, through
the same front, sandboxes, Postgres and Redis, with the same client library (httpx,
keep-alive, ``retries=0`` so neither sends a generated idempotency key).

    .venv/bin/python -m tests.perf.bench_batch --clients 8 --seconds 10 --rounds 3

``asyncz dev`` is started as ``bench_submit_http`` starts it (system servers by URL, fleet
and recovery pushed out to an hour so nothing drains the queue meanwhile).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import threading
import time
from typing import Any

from tests.perf.common import (
    API_KEY,
    NOTHING_DRAINS,
    bench_env,
    command,
    load_line,
    machine,
    prepare,
    start_dev,
    stop_dev,
)
from tests.support.devrun import free_port

PAYLOAD = {"user_id": 42, "note": "benchmark"}


def _client_proc(
    url: str, threads: int, batch: int, seconds: float, start_at: float, out: Any
) -> None:
    from asyncz.client import Client

    counts: list[int] = []
    errors: list[int] = []

    def one() -> None:
        done = failed = 0
        with Client(url, API_KEY, retries=0) as client:
            items = [{"task": "echo", "payload": PAYLOAD}] * batch
            while time.time() < start_at:
                time.sleep(0.001)
            end = start_at + seconds
            while time.time() < end:
                try:
                    if batch == 1:
                        client.submit("echo", PAYLOAD)
                        done += 1
                    else:
                        done += len(client.submit_many(items, batch_size=batch))
                except Exception:  # noqa: BLE001 - counted and reported
                    failed += 1
        counts.append(done)
        errors.append(failed)

    workers = [threading.Thread(target=one) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    out.put((sum(counts), sum(errors)))


def run(url: str, clients: int, procs: int, batch: int, seconds: float) -> tuple[float, int]:
    """Jobs accepted per second, and failed requests, with ``clients`` threads."""
    out: Any = mp.Queue()
    start_at = time.time() + 1.0
    per = [clients // procs + (1 if i < clients % procs else 0) for i in range(procs)]
    ps = [mp.Process(target=_client_proc, args=(url, n, batch, seconds, start_at, out))
          for n in per if n]  # fmt: skip
    for p in ps:
        p.start()
    results = [out.get(timeout=seconds + 120) for _ in ps]
    for p in ps:
        p.join(30)
    return sum(r[0] for r in results) / seconds, sum(r[1] for r in results)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--client-procs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--api-sandboxes", type=int, default=4)
    args = ap.parse_args()
    os.environ.update(bench_env())
    print(f"# batch submit vs single submits through asyncz dev — {machine()}")
    print(f"# {load_line()} (shared machine: other test suites may be running)")
    print(f"# command: {command('tests.perf.bench_batch', sys.argv[1:])}")
    print(
        f"# asyncz dev with {args.api_sandboxes} api sandboxes, system Postgres/Redis by URL; "
        f"{args.clients} client threads in {args.client_procs} processes (asyncz.client, "
        "keep-alive); each round measures single submits, then batches, a few seconds apart"
    )
    print("| round | path | jobs/s | failed requests | ratio to single |")
    print("|---|---|---|---|---|")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = os.path.join(tempfile.mkdtemp(prefix="asyncz-bench-batch-"), "dev.log")
    prepare()
    dev = start_dev(
        port, log, args=("--api-sandboxes", str(args.api_sandboxes), "--quiet"), **NOTHING_DRAINS
    )
    ratios = []
    try:
        run(url, args.api_sandboxes * 2, 1, 1, 2.0)  # warm every sandbox's pools
        for rnd in range(1, args.rounds + 1):
            single, single_err = run(url, args.clients, args.client_procs, 1, args.seconds)
            batched, batch_err = run(url, args.clients, args.client_procs, args.batch, args.seconds)
            ratio = batched / single if single else float("inf")
            ratios.append(ratio)
            print(f"| {rnd} | POST /jobs, one job per request | {single:.0f} | {single_err} "
                  "| 1.00 |", flush=True)  # fmt: skip
            print(f"| {rnd} | POST /jobs/batch, {args.batch} jobs per request | {batched:.0f} "
                  f"| {batch_err} | {ratio:.1f} |", flush=True)  # fmt: skip
    finally:
        stop_dev(dev)
    print(f"# {load_line()} at the end")
    rounds = ", ".join(f"{r:.1f}" for r in ratios)
    print(f"\nratio batch/single per round: {rounds}; median **{statistics.median(ratios):.1f}×**")


if __name__ == "__main__":
    main()
