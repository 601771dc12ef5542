"""Run every benchmark in sequence, with the arguments BENCHMARKS.md was made with.

    .venv/bin/python -m tests.perf.run_all [--only processing latency ...] | tee /tmp/bench.md

Each benchmark is a separate process (as its own command line shows) and prints its own
machine line, load average, command and table. Benchmarks are not tests: nothing here
asserts a time. The recovery-at-scale check is a test instead:
``.venv/bin/python -m pytest tests/integration/test_recovery_scale.py -s``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = {  # module and arguments, as on the command line
    name: command.split()
    for name, command in {
        "submit": "tests.perf.bench_submit --concurrency 16 --seconds 5 --rounds 3 "
        "--paths raw handler typed",
        "submit_wrk": "tests.perf.bench_submit_wrk --seconds 10 --rounds 3",
        "submit_http": "tests.perf.bench_submit_http --concurrency 16 --rounds 5 --api-sandboxes 4",
        "processing": "tests.perf.bench_processing --jobs 20000 --processes 1 2 4 --rounds 3 "
        "--variant",
        "latency": "tests.perf.bench_latency --jobs 500 --rate 50 --workers 2",
        "coldstart": "tests.perf.bench_coldstart --repeat 5",
        "memory": "tests.perf.bench_memory --jobs 10000",
        "scale_out": "tests.perf.bench_scale_out --jobs 1000 --seconds 0.2 --rounds 3",
        "drain": "tests.perf.bench_drain --jobs 10000 --rounds 3 --cpu",
        "batch": "tests.perf.bench_batch --clients 4 --client-procs 2 --seconds 8 --rounds 3",
    }.items()
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="+", choices=sorted(BENCHMARKS), default=list(BENCHMARKS))
    args = ap.parse_args()
    failed = []
    for name in args.only:
        t = time.monotonic()
        print(f"\n## {name}\n", flush=True)
        # one Postgres connection per api client process (bench_submit's children inherit
        # this): 64 clients × a pool of 2 would exceed the shared max_connections=100
        env = {**os.environ, "ASYNCZ_DB_POOL_MAX": os.environ.get("ASYNCZ_DB_POOL_MAX", "1")}
        rc = subprocess.run([sys.executable, "-m", *BENCHMARKS[name]], cwd=ROOT, env=env).returncode
        print(f"\n# ({name}: {time.monotonic() - t:.0f} s, exit {rc})", flush=True)
        if rc:
            failed.append(name)
    if failed:
        print(f"# failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
