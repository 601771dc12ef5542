"""Memory benchmark: RSS of an api sandbox and a worker sandbox over 10,000 jobs.

- **api**: one process imports ``asyncz.api.handler`` and calls the handler for ``--jobs``
  ``POST /jobs`` (echo) events, reading its RSS every ``--every`` requests.
- **worker**: a backlog of ``--jobs`` echo jobs (one INSERT + pipelined ZADDs), drained by
  ONE invocation of the worker Lambda handler (``asyncz.worker.handler.handler``, with
  Powertools metrics on, as deployed) in its own process; the parent reads the child's RSS
  and the completed count every 0.2 s.
- **hello** (baseline, same run): the bare FastAPI + Mangum hello-world handler called the
  same number of times.

Reported: RSS after warm-up (first sample past 10% of the jobs), at the end, the growth
between them (flat = no leak), and the peak (``ru_maxrss``). Under ~200 MB peak means a
256 MB Lambda has headroom.

    .venv/bin/python -m tests.perf.bench_memory --jobs 10000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psycopg

from tests.perf.common import (
    API_KEY,
    DB,
    bench_env,
    command,
    load_backlog,
    load_line,
    machine,
    prepare,
)

ROOT = Path(__file__).resolve().parents[2]

API_CHILD = r"""
import contextlib, importlib, io, json, resource, sys
from tests.support.apigw import FakeContext, rest_event
module, jobs, every, api_key = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
mod = importlib.import_module(module)
event = rest_event("POST", "/jobs", raw_body=b'{"task": "echo", "payload": {"n": 1}}',
                   api_key=api_key, headers={"Content-Type": "application/json"})
samples = [(0, rss())]
sink = io.StringIO()
with contextlib.redirect_stdout(sink):
    for n in range(1, jobs + 1):
        reply = mod.handler(event, FakeContext())
        assert reply["statusCode"] == 202, reply
        if n % every == 0:
            samples.append((n, rss()))
            sink.seek(0)
            sink.truncate()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print("MEMORY " + json.dumps({"samples": samples, "peak": peak}))
"""

WORKER_CHILD = r"""
import json, resource, sys, time
from tests.support.apigw import FakeContext
import asyncz.worker.handler as mod
summary = mod.handler({}, FakeContext(function_name="asyncz-worker",
                                      timeout_s=900))
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print("MEMORY " + json.dumps({"peak": peak, "summary": summary}), file=sys.stderr)
"""


def _env(**extra: str) -> dict[str, str]:
    return bench_env(
        POWERTOOLS_METRICS_DISABLED="false",
        POWERTOOLS_METRICS_NAMESPACE="Bench",
        PYTHONPATH=f"{ROOT}:{ROOT / 'functions'}",
        **extra,
    )


def _result(text: str) -> dict[str, object]:
    for line in text.splitlines():
        if line.startswith("MEMORY "):
            return json.loads(line[len("MEMORY ") :])
    raise SystemExit(f"child failed:\n{text[-3000:]}")


def run_api(module: str, jobs: int, every: int) -> dict[str, object]:
    prepare()
    out = subprocess.run(
        [sys.executable, "-c", API_CHILD, module, str(jobs), str(every), API_KEY],
        env=_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    return _result(out.stdout + out.stderr)


def _rss_of(pid: int) -> float:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


def run_worker(jobs: int) -> dict[str, object]:
    prepare()
    load_backlog(jobs)
    proc = subprocess.Popen(
        [sys.executable, "-c", WORKER_CHILD],
        cwd=ROOT,
        env=_env(ASYNCZ_WORKER_IDLE_EXIT_SECONDS="1"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    samples: list[tuple[int, float]] = []
    with psycopg.connect(DB, autocommit=True) as conn:
        while proc.poll() is None:
            try:
                rss = _rss_of(proc.pid)
            except (OSError, IndexError):
                break
            done = conn.execute("SELECT count(*) FROM jobs WHERE status = 'completed'").fetchone()[
                0
            ]  # type: ignore[index]
            samples.append((int(done), rss))
            time.sleep(0.2)
    _, err = proc.communicate(timeout=60)
    result = _result(err)
    result["samples"] = samples
    return result


def report(name: str, result: dict[str, object], jobs: int) -> tuple[float, float, float]:
    samples = [tuple(s) for s in result["samples"]]  # type: ignore[attr-defined]
    warm = next((s for s in samples if s[0] >= jobs // 10), samples[-1])
    end = samples[-1]
    for s in reversed(samples):  # the last sample before the process wound down
        if s[0] >= jobs:
            end = s
            break
    peak = float(result["peak"])  # type: ignore[arg-type]
    print(
        f"| {name} | {warm[1]:.1f} (at {warm[0]}) | {end[1]:.1f} (at {end[0]}) | "
        f"{end[1] - warm[1]:+.1f} | {peak:.1f} |",
        flush=True,
    )
    return warm[1], end[1], peak


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=10000)
    ap.add_argument("--every", type=int, default=500, help="api: sample RSS every N requests")
    args = ap.parse_args()
    os.environ.update(bench_env())
    print(f"# memory benchmark — {machine()}")
    print(f"# {load_line()} (shared machine: other test suites may be running)")
    print(f"# command: {command('tests.perf.bench_memory', sys.argv[1:])}")
    print(f"# {args.jobs} jobs per sandbox; RSS in MiB; Powertools metrics on (EMF to a pipe)")
    print("| sandbox | RSS after warm-up | RSS at the end | growth | peak (ru_maxrss) |")
    print("|---|---|---|---|---|")
    hello = run_api("tests.perf.hello_handler", args.jobs, args.every)
    report("hello (FastAPI+Mangum, baseline)", hello, args.jobs)
    api = run_api("asyncz.api.handler", args.jobs, args.every)
    report("api handler", api, args.jobs)
    worker = run_worker(args.jobs)
    report("worker handler (one invocation drains all)", worker, args.jobs)
    print(f"# worker summary: {json.dumps(worker.get('summary'))}")
    for name, res in (("api", api), ("worker", worker)):
        pts = " ".join(f"{n}:{r:.0f}" for n, r in res["samples"])  # type: ignore[attr-defined]
        print(f"# {name} samples (jobs:MiB): {pts}")
    print(f"# {load_line()} at the end")


if __name__ == "__main__":
    main()
