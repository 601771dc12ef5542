"""The ops commands: the API through :class:`asyncz.client.Client`, printed with rich."""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from asyncz.cli.client import CliError, make_client
from asyncz.cli.output import (
    DEAD_COLUMNS,
    JOB_COLUMNS,
    as_data,
    console,
    describe,
    emit,
    table,
)
from asyncz.client import Client, Job

SUBMIT_OPTIONS = ("queue", "priority", "max_retries", "timeout_seconds", "delay_seconds",
                  "idempotency_key", "depends_on", "on_parent_failure", "unique_key",
                  "unique_scope", "unique_for", "debounce", "concurrency_key")  # fmt: skip


def _progress(args: argparse.Namespace, what: str) -> Progress:
    """A progress bar on stderr (silent with --json or when stderr is not a terminal)."""
    return Progress(
        TextColumn(what),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console(stderr=True),
        disable=args.json or not sys.stderr.isatty(),
        transient=False,
    )


def cmd_submit(args: argparse.Namespace) -> int:
    if args.file is not None:
        return _submit_file(args)
    if not args.task:
        raise CliError("give a TASK, or --file jobs.jsonl", 2)
    try:
        payload = json.loads(args.payload) if args.payload else {}
    except ValueError as exc:
        raise CliError(f"PAYLOAD is not JSON: {exc}", 2) from exc
    options = {k: getattr(args, k) for k in SUBMIT_OPTIONS if getattr(args, k) is not None}
    with make_client(args) as client:
        job = client.submit(args.task, payload, **options)
        if args.wait:
            if not args.json:
                print(f"submitted {job.id}")
            return _wait(args, client, job.id)
    if job.duplicate:  # its unique key is held: the holder, nothing stored
        held = "debounced" if job.debounced else "duplicate"
        out = {"job_id": job.id, "status": job.status, "duplicate": True, held: True}
        emit(args, out, f"{job.id}  {job.status}  ({held}: unique key {job.unique_key} held)")
        return 0
    emit(args, {"job_id": job.id, "status": job.status}, f"{job.id}  {job.status}")
    return 0


def _read_jobs(path: Path) -> Iterator[dict[str, Any]]:
    lines = sys.stdin if str(path) == "-" else path.open(encoding="utf-8")
    with lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                body = json.loads(line)
            except ValueError as exc:
                raise CliError(f"{path}:{number}: not JSON: {exc}", 2) from exc
            if not isinstance(body, dict):
                raise CliError(f"{path}:{number}: a line is one job, a JSON object", 2)
            yield body


def _submit_file(args: argparse.Namespace) -> int:
    """Every line of a JSON-lines file (a ``POST /jobs`` body each) in batch requests."""
    try:
        bodies = list(_read_jobs(args.file))
    except OSError as exc:
        raise CliError(f"cannot read {args.file}: {exc.strerror or exc}", 2) from exc
    with make_client(args) as client, _progress(args, "submitting") as bar:
        task = bar.add_task("submit", total=len(bodies))
        if any("ref" in body for body in bodies):  # a graph: one batch, whole or nothing
            jobs = client.submit_graph(bodies)
            bar.advance(task, len(jobs))
        else:
            jobs = client.submit_many(
                bodies, batch_size=args.batch_size, progress=lambda n: bar.advance(task, n)
            )
    duplicates = sum(1 for j in jobs if j.duplicate)
    summary = f"submitted {len(jobs) - duplicates} jobs" + (
        f" ({duplicates} duplicates of existing jobs)" if duplicates else ""
    )
    emit(args, [{"job_id": j.id, "status": j.status, "duplicate": j.duplicate}
                | ({"ref": j.ref} if j.ref else {}) for j in jobs], summary)  # fmt: skip
    return 0


def _wait(args: argparse.Namespace, client: Client, job_id: str) -> int:
    """Poll until the job is finished, with a live status line on stderr (a line per change
    of status when stderr is not a terminal)."""
    started = time.monotonic()
    err = console(stderr=True)
    live = not args.json and err.is_terminal
    seen = None
    with err.status("waiting", spinner="dots") if live else contextlib.nullcontext() as status:
        while True:
            job = client.get(job_id)
            elapsed = time.monotonic() - started
            line = f"{job.status}  attempts={job.attempts}  {elapsed:5.1f}s"
            if status is not None:
                status.update(line)
            elif not args.json and (job.status, job.attempts) != seen:
                err.print(line)
            seen = (job.status, job.attempts)
            if job.finished:
                break
            if args.timeout and elapsed > args.timeout:
                raise CliError(f"job {job_id} still {job.status} after {args.timeout:g}s", 3)
            time.sleep(args.interval)
    emit(args, job, describe(job))
    return 0 if job.status == "completed" else 1


def cmd_status(args: argparse.Namespace) -> int:
    with make_client(args) as client:
        if args.wait:
            return _wait(args, client, args.job_id)
        job = client.get(args.job_id)
        if not args.attempts:
            emit(args, job, describe(job))
            return 0
        attempts = client.attempts(args.job_id)
    columns = [
        ("attempt", "ATTEMPT"),
        ("outcome", "OUTCOME"),
        ("worker_id", "WORKER"),
        ("started_at", "STARTED (UTC)"),
        ("duration_ms", "MS"),
        ("error", "ERROR"),
    ]
    if args.json:
        emit(args, {"job": job, "attempts": attempts}, "")
    else:
        out = console()
        out.print(describe(job))
        out.print()
        out.print(table(attempts, columns))
    return 0


STEP_COLUMNS = [
    ("seq", "#"), ("name", "STEP"), ("kind", "KIND"), ("status", "STATUS"),
    ("attempts", "RUNS"), ("job_attempt", "BY ATTEMPT"), ("started_at", "STARTED (UTC)"),
    ("duration_ms", "MS"), ("result_bytes", "BYTES"), ("error", "ERROR"),
]  # fmt: skip


def cmd_steps(args: argparse.Namespace) -> int:
    """A durable job's stored steps (docs/durable.md)."""
    with make_client(args) as client:
        steps = client.steps(args.job_id)
    emit(args, {"job_id": args.job_id, "items": steps},
         table(steps, STEP_COLUMNS) if steps else "no stored steps")  # fmt: skip
    return 0


def _listing(args: argparse.Namespace, jobs: Iterator[Job]) -> list[Job]:
    return list(jobs if args.all else itertools.islice(jobs, args.limit))


def cmd_list(args: argparse.Namespace) -> int:
    with make_client(args) as client:
        jobs = _listing(args, client.jobs(status=args.status, queue=args.queue, task=args.task,
                                          submitted_by=args.submitted_by,
                                          spawned_by=args.spawned_by,
                                          page_size=args.limit, cursor=args.cursor))  # fmt: skip
    emit(args, {"items": jobs}, table(jobs, JOB_COLUMNS) if jobs else "no jobs")
    return 0


def cmd_dlq(args: argparse.Namespace) -> int:
    with make_client(args) as client:
        jobs = _listing(args, client.dead(queue=args.queue, task=args.task,
                                          page_size=args.limit, cursor=args.cursor))  # fmt: skip
    emit(args, {"items": jobs},
         table(jobs, DEAD_COLUMNS) if jobs else "the dead-letter queue is empty")  # fmt: skip
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    with make_client(args) as client:
        if args.all:
            if args.job_ids:
                raise CliError("give JOB_IDs or --all, not both", 2)
            if args.reset_steps:
                raise CliError("--reset-steps replays JOB_IDs one by one, not --all", 2)
            with _progress(args, "replaying") as bar:
                task = bar.add_task("replay", total=None)
                ids = client.replay_all(
                    queue=args.queue, task=args.task, progress=lambda n: bar.advance(task, n)
                )
            emit(args, {"replayed": len(ids), "job_ids": ids}, f"replayed {len(ids)} dead jobs")
            return 0
        if not args.job_ids:
            raise CliError("give one or more JOB_IDs, or --all", 2)
        jobs = [client.replay(j, reset_steps=args.reset_steps) for j in args.job_ids]
    emit(args, jobs if len(jobs) > 1 else jobs[0], "\n".join(f"{j.id}  {j.status}" for j in jobs))
    return 0


def cmd_purge(args: argparse.Namespace) -> int:
    with make_client(args) as client:
        for job_id in args.job_ids:
            client.purge(job_id)
    emit(args, {"purged": args.job_ids}, "\n".join(f"{j}  purged" for j in args.job_ids))
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    with make_client(args) as client:
        job = client.cancel(args.job_id)
    emit(args, {"job_id": job.id, "status": job.status}, f"{job.id}  {job.status}")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    if getattr(args, "tasks", False):
        from asyncz.cli.activity import cmd_task_figures

        return cmd_task_figures(args)
    with make_client(args) as client:
        stats = client.stats()
    states = sorted({s for q in stats.queues.values() for s in q.counts})
    rows = [
        {"queue": name, **q.counts, "ready": q.ready, "delayed": q.delayed,
         "oldest": f"{q.oldest_queued_age_seconds:.1f}s"}
        for name, q in sorted(stats.queues.items())
    ]  # fmt: skip
    columns = [("queue", "QUEUE"), *((s, s.upper()) for s in states),
               ("ready", "READY"), ("delayed", "DELAYED"), ("oldest", "OLDEST QUEUED")]  # fmt: skip
    human: Any = table(rows, columns) if rows else "no queues yet"
    emit(args, as_data(stats), human)
    if not args.json and stats.live_workers is not None:
        console().print(f"live workers: {stats.live_workers}")
    if not args.json and stats.cost:
        console().print(cost_line(stats.cost))
    return 0


def cost_line(cost: dict[str, Any]) -> str:
    """``est. cost: $0.0012 last hour, $0.0300 last day (prices of 2026-12-04, without fixed
    monthly costs)``: the estimate of ``GET /stats`` in one line."""
    spans = [f"${cost[key]['dollars']:.4f} {label}"
             for key, label in (("last_hour", "last hour"), ("last_day", "last day"))
             if isinstance(cost.get(key), dict) and "dollars" in cost[key]]  # fmt: skip
    return (f"est. cost: {', '.join(spans) or 'unknown'} (prices of "
            f"{cost.get('prices_of', '?')}, without fixed monthly costs)")  # fmt: skip


def cmd_health(args: argparse.Namespace) -> int:
    with make_client(args) as client:
        health = client.health()
    deps = ", ".join(f"{k}: {v}" for k, v in sorted(health.dependencies.items()))
    emit(args, health, f"{health.status}  ({deps})" if deps else health.status)
    return 0 if health.ok else 1
