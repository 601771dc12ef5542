"""What tracing costs a job: the same backlog of no-op (``echo``) jobs, each submitted with a
``traceparent``, drained by the real WorkerLoop in this process, with tracing off (the
default) and on (an SDK tracer provider with the SDK's ``InMemorySpanExporter`` behind a
``BatchSpanProcessor``, as an exporter would be), alternated per round (off, on, on, off,
...). The rate is read from Postgres (completed ÷ (last ``finished_at`` − first
``started_at``)); the cost per job is the difference of the CPU time this process spent per
job (all threads), which a shared box disturbs less than the wall clock.

    .venv/bin/python -m tests.perf.bench_tracing --jobs 10000 --rounds 4
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import time

import psycopg

from tests.perf.bench_processing import measured
from tests.perf.common import (
    DB,
    bench_env,
    command,
    enqueue_backlog,
    insert_backlog,
    load_line,
    machine,
    prepare,
)

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


async def drain(jobs: int) -> None:
    from asyncz import composition
    from asyncz.settings import get_settings
    from asyncz.worker.loop import WorkerLoop

    settings = get_settings().require_for("worker")
    service = await composition.build_service(settings, pool_max=3)
    try:
        worker = WorkerLoop(service, remaining_seconds=lambda: 3600.0, idle_exit_seconds=1.0)
        summary = await worker.run()
        assert summary["completed"] == jobs, summary
    finally:
        await composition.close_service(service)


def one_round(jobs: int, traced: bool) -> tuple[float, float, int]:
    """(jobs/s, CPU µs per job, spans exported) of one drain."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from asyncz import tracing

    prepare()
    ids = insert_backlog(jobs)
    with psycopg.connect(DB, autocommit=True) as conn:
        conn.execute("UPDATE jobs SET traceparent = %s", (TRACEPARENT,))
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    tracing.use(provider.get_tracer("asyncz") if traced else None)
    enqueue_backlog(ids)
    cpu = time.process_time()
    with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):  # outcome lines
        asyncio.run(drain(jobs))
    provider.force_flush()
    cpu = time.process_time() - cpu
    spans = len(exporter.get_finished_spans())
    provider.shutdown()
    tracing.reset()
    return measured(jobs)["rps"], cpu / jobs * 1e6, spans


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=4, help="even: off/on alternated ABBA")
    args = ap.parse_args()
    os.environ.update(bench_env(ASYNCZ_WORKER_CONCURRENCY="10", ASYNCZ_TASK_METRICS="false"))
    print(f"# tracing off vs on (in-memory exporter) — {machine()}")
    print(f"# {load_line()} (shared machine: other test suites may be running)")
    print(f"# command: {command('tests.perf.bench_tracing', sys.argv[1:])}")
    print("| round | tracing | jobs/s | CPU µs/job | spans |")
    print("|---|---|---|---|---|")
    figures: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for n in range(args.rounds):
        traced = n % 4 in (1, 2)  # off, on, on, off, ...
        jobs_s, cpu_us, spans = one_round(args.jobs, traced)
        assert spans == (args.jobs if traced else 0), spans
        figures[traced].append((jobs_s, cpu_us))
        print(f"| {n + 1} | {'on' if traced else 'off'} | {jobs_s:,.0f} | {cpu_us:.0f} "
              f"| {spans:,} |", flush=True)  # fmt: skip
    off_rate = statistics.median(r for r, _ in figures[False])
    on_rate = statistics.median(r for r, _ in figures[True])
    off_cpu = statistics.median(c for _, c in figures[False])
    on_cpu = statistics.median(c for _, c in figures[True])
    print(
        f"# medians: off {off_rate:,.0f} jobs/s, {off_cpu:.0f} CPU µs/job; on "
        f"{on_rate:,.0f} jobs/s, {on_cpu:.0f} CPU µs/job: tracing costs "
        f"{on_cpu - off_cpu:.0f} CPU µs per job ({on_rate / off_rate:.2f}× the rate)"
    )


if __name__ == "__main__":
    main()
