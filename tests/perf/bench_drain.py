"""End-to-end drain: ``asyncz dev`` in its default configuration (access
log, metrics, wake-on-submit, scale-out and the fleet all on; system PostgreSQL and Redis by
URL, as a user points it at them), ``--jobs`` ``echo`` jobs submitted in ``POST /jobs/batch``
of 100 from two client threads, timed from the first submit to the last ``finished_at``
(read from Postgres), with the time the fleet took to reach its largest size.
``--keys K --key-limit M``: the same drain with ``echo`` limited to M running per
concurrency key (``ASYNCZ_TASK_LIMITS``), the jobs spread over K keys.

    .venv/bin/python -m tests.perf.bench_drain --jobs 10000 --rounds 2
    .venv/bin/python -m tests.perf.bench_drain --jobs 10000 --rounds 2 --keys 100 --key-limit 2

``--dead-webhook``: each round drains twice, alternated (ABBA across rounds), without and
with a webhook registered on an endpoint that accepts connections and never answers (every
delivery waits out its timeout, then retries): the events function delivers every job's end
beside the drain, and a dead consumer must not slow it.

    .venv/bin/python -m tests.perf.bench_drain --jobs 10000 --rounds 2 --dead-webhook

``--cpu``: after each round, the CPU seconds each part spent from the first submit to the
last finish (tests/perf/cpu_by_process.py): where a drain bound by the cores goes.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile

import redis

from tests.perf.bench_scale_out import burst, call
from tests.perf.common import (
    DB_NAME,
    REDIS,
    command,
    load_line,
    machine,
    prepare,
    start_dev,
    stop_dev,
)
from tests.perf.cpu_by_process import snapshot, spent
from tests.support.devrun import free_port


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--keys", type=int, default=0, help="spread the jobs over K keys")
    ap.add_argument("--key-limit", type=int, default=0, help="echo's key_concurrency")
    ap.add_argument("--dead-webhook", action="store_true", help="and with a dead webhook")
    ap.add_argument("--cpu", action="store_true", help="and the CPU each part spent in it")
    args = ap.parse_args()
    limits = {"echo": {"key_concurrency": args.key_limit}} if args.key_limit else {}
    print(f"# end-to-end drain — {machine()}")
    print(f"# {load_line()} (shared machine: other test suites may be running)")
    print(f"# command: {command('tests.perf.bench_drain', sys.argv[1:])}")
    print("# asyncz dev defaults; echo jobs in POST /jobs/batch of 100 from 2 client threads")
    if limits:
        print(f"# ASYNCZ_TASK_LIMITS={json.dumps(limits)}, jobs over {args.keys} keys")
    print("| round | dead webhook | jobs | submit s | drain s | jobs/s | peak live workers | "
          "peak reached at s |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    log_dir = tempfile.mkdtemp(prefix="asyncz-bench-drain-logs-")
    dead = socket.socket()  # accepts (the backlog) and never answers
    dead.bind(("127.0.0.1", 0))
    dead.listen(1024)
    drains: dict[bool, list[float]] = {False: [], True: []}
    for rnd in range(1, args.rounds + 1):
        sides = [False, True] if args.dead_webhook else [False]
        for with_dead in sides if rnd % 2 else sides[::-1]:
            prepare()
            redis.Redis.from_url(REDIS).flushdb()
            port = free_port()
            dev = start_dev(
                port,
                os.path.join(log_dir, f"{rnd}-{int(with_dead)}.log"),
                args=(),
                dev_defaults=True,
                settle=3,  # the fleet's first tick (at start) sees an empty queue
                **({"ASYNCZ_TASK_LIMITS": json.dumps(limits)} if limits else {}),
            )
            try:
                if with_dead:
                    hook = f"http://127.0.0.1:{dead.getsockname()[1]}/hook"
                    call(port, "POST", "/webhooks", {"url": hook})
                cpu_before = snapshot(DB_NAME)
                r = burst(port, args.jobs, {"task": "echo", "payload": {"n": 1}}, args.keys)
                cpu = spent(cpu_before, snapshot(DB_NAME))
            finally:
                stop_dev(dev)
            drains[with_dead].append(r["drain_s"])
            print(
                f"| {rnd} | {'yes' if with_dead else 'no'} | {args.jobs} | {r['submit_s']:.1f} | "
                f"{r['drain_s']:.1f} | {args.jobs / r['drain_s']:.0f} | {r['peak']} | "
                f"{r['peak_at']:.1f} |",
                flush=True,
            )
            if args.cpu:
                parts = ", ".join(f"{k} {v:.2f}" for k, v in cpu.most_common() if v >= 0.01)
                cores = os.cpu_count() or 1
                print(f"# round {rnd}: CPU s from the first submit to the last finish "
                      f"{sum(cpu.values()):.1f} of {cores * r['drain_s']:.1f} ({cores} cores × "
                      f"{r['drain_s']:.1f} s): {parts}", flush=True)  # fmt: skip
    if args.dead_webhook:
        ratio = statistics.median(drains[True]) / statistics.median(drains[False])
        print(f"# drain with a dead webhook / without (medians): {ratio:.2f}")


if __name__ == "__main__":
    main()
