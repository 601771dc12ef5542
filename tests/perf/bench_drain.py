"""End-to-end drain: ``asyncz dev`` in its default configuration (access
log, metrics, wake-on-submit, scale-out and the fleet all on; system PostgreSQL and Redis by
URL, as a user points it at them), ``--jobs`` ``echo`` jobs submitted in ``POST /jobs/batch``
of 100 from two client threads, timed from the first submit to the last ``finished_at``
(read from Postgres), with the time the fleet took to reach its largest size.

    .venv/bin/python -m tests.perf.bench_drain --jobs 10000 --rounds 2
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import redis

from tests.perf.bench_scale_out import burst
from tests.perf.common import (
    REDIS,
    command,
    load_line,
    machine,
    prepare,
    start_dev,
    stop_dev,
)
from tests.support.devrun import free_port


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    print(f"# end-to-end drain — {machine()}")
    print(f"# {load_line()} (shared machine: other test suites may be running)")
    print(f"# command: {command('tests.perf.bench_drain', sys.argv[1:])}")
    print("# asyncz dev defaults; echo jobs in POST /jobs/batch of 100 from 2 client threads")
    print("| round | jobs | submit s | drain s | jobs/s | peak live workers | peak reached at s |")
    print("|---|---|---|---|---|---|---|")
    log_dir = tempfile.mkdtemp(prefix="asyncz-bench-drain-logs-")
    for rnd in range(1, args.rounds + 1):
        prepare()
        redis.Redis.from_url(REDIS).flushdb()
        port = free_port()
        dev = start_dev(
            port,
            os.path.join(log_dir, f"{rnd}.log"),
            args=(),
            dev_defaults=True,
            settle=3,  # the fleet's first tick (at start) sees an empty queue
        )
        try:
            r = burst(port, args.jobs, {"task": "echo", "payload": {"n": 1}})
        finally:
            stop_dev(dev)
        print(
            f"| {rnd} | {args.jobs} | {r['submit_s']:.1f} | {r['drain_s']:.1f} | "
            f"{args.jobs / r['drain_s']:.0f} | {r['peak']} | {r['peak_at']:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
