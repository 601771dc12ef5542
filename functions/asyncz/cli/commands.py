"""The CLI's commands: ``dev``, ``migrate`` and the ops commands over the API."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from asyncz.cli.client import TERMINAL, ApiClient, CliError
from asyncz.cli.output import (
    JOB_COLUMNS,
    _cell,
    _describe,
    _emit,
    _flat,
    _job_rows,
    job_id_of,
    table,
)

# --------------------------------------------------------------------------- commands


def _client(args: argparse.Namespace) -> ApiClient:
    return ApiClient(args.api_url, args.api_key, timeout=args.http_timeout)


def cmd_submit(args: argparse.Namespace) -> int:
    try:
        payload = json.loads(args.payload) if args.payload else {}
    except ValueError as exc:
        raise CliError(f"PAYLOAD is not JSON: {exc}", 2) from exc
    body: dict[str, Any] = {"task": args.task, "payload": payload}
    for key in (
        "queue",
        "priority",
        "max_retries",
        "timeout_seconds",
        "delay_seconds",
        "idempotency_key",
    ):
        if getattr(args, key) is not None:
            body[key] = getattr(args, key)
    created = _client(args).request("POST", "/jobs", body)
    if args.wait:
        if not args.json:
            print(f"submitted {job_id_of(created)}")
        return _wait(args, job_id_of(created))
    _emit(args, created, f"{job_id_of(created)}  {created.get('status', '')}")
    return 0


def _wait(args: argparse.Namespace, job_id: str) -> int:
    client = _client(args)
    started = time.monotonic()
    tty = sys.stderr.isatty() and not args.json
    last = None
    while True:
        job = client.request("GET", f"/jobs/{urllib.parse.quote(job_id)}")
        status = str(job.get("status"))
        elapsed = time.monotonic() - started
        progress = f"{status}  attempts={job.get('attempts', 0)}  {elapsed:5.1f}s"
        if not args.json and (tty or progress.split()[0:2] != (last or "").split()[0:2]):
            sys.stderr.write(("\r" + progress.ljust(50)) if tty else progress + "\n")
            sys.stderr.flush()
        last = progress
        if status in TERMINAL:
            if tty:
                sys.stderr.write("\n")
            _emit(args, job, _describe(job))
            return 0 if status == "completed" else 1
        if args.timeout and elapsed > args.timeout:
            if tty:
                sys.stderr.write("\n")
            raise CliError(f"job {job_id} still {status} after {args.timeout:g}s", 3)
        time.sleep(args.interval)


def cmd_status(args: argparse.Namespace) -> int:
    if args.wait:
        return _wait(args, args.job_id)
    client = _client(args)
    job = client.request("GET", f"/jobs/{urllib.parse.quote(args.job_id)}")
    if not args.attempts:
        _emit(args, job, _describe(job))
        return 0
    attempts = client.request("GET", f"/jobs/{urllib.parse.quote(args.job_id)}/attempts")
    items = attempts.get("items") or []
    human = (
        _describe(job)
        + "\n\n"
        + table(
            items,
            [
                ("attempt", "ATTEMPT"),
                ("outcome", "OUTCOME"),
                ("worker_id", "WORKER"),
                ("started_at", "STARTED (UTC)"),
                ("duration_ms", "MS"),
                ("error", "ERROR"),
            ],
        )
    )
    _emit(args, {"job": job, "attempts": items}, human)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    query = {
        "status": args.status,
        "queue": args.queue,
        "task": args.task,
        "limit": args.limit,
        "cursor": args.cursor,
    }
    items = list(_client(args).pages("/jobs", query, follow=args.all))
    _emit(args, {"items": items}, table(_job_rows(items), JOB_COLUMNS) if items else "no jobs")
    return 0


def cmd_dlq(args: argparse.Namespace) -> int:
    query = {"limit": args.limit, "cursor": args.cursor}
    items = list(_client(args).pages("/dlq", query, follow=args.all))
    columns = [
        ("job_id", "JOB ID"),
        ("task", "TASK"),
        ("queue", "QUEUE"),
        ("attempts", "ATTEMPTS"),
        ("finished_at", "DEAD SINCE (UTC)"),
        ("last_error", "LAST ERROR"),
    ]
    _emit(
        args,
        {"items": items},
        table(_job_rows(items), columns) if items else "the dead-letter queue is empty",
    )
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    client = _client(args)
    if args.all:
        result = client.request("POST", "/dlq/replay")
        _emit(args, result, f"replayed: {json.dumps(result)}")
        return 0
    if not args.job_ids:
        raise CliError("give one or more JOB_IDs, or --all", 2)
    results = [client.request("POST", f"/dlq/{urllib.parse.quote(j)}/replay") for j in args.job_ids]
    human = "\n".join(
        f"{job_id_of(r) or j}  {r.get('status', 'queued')}"
        for j, r in zip(args.job_ids, results, strict=True)
    )
    _emit(args, results if len(results) > 1 else results[0], human)
    return 0


def cmd_purge(args: argparse.Namespace) -> int:
    client = _client(args)
    for job_id in args.job_ids:
        client.request("DELETE", f"/dlq/{urllib.parse.quote(job_id)}")
    _emit(args, {"purged": args.job_ids}, "\n".join(f"{j}  purged" for j in args.job_ids))
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    result = _client(args).request("POST", f"/jobs/{urllib.parse.quote(args.job_id)}/cancel")
    _emit(args, result, f"{job_id_of(result) or args.job_id}  {result.get('status', '')}")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    stats = _client(args).request("GET", "/stats")
    queues = stats.get("queues") or {}
    rows = [{"queue": name, **_flat(values)} for name, values in sorted(queues.items())]
    keys: list[str] = []
    for row in rows:
        keys += [k for k in row if k not in keys and k != "queue"]
    human = table(rows, [("queue", "QUEUE"), *((k, k.upper()) for k in keys)])
    extra = {k: v for k, v in stats.items() if k != "queues"}
    if extra:
        human += "\n\n" + "\n".join(f"{k}: {_cell(v)}" for k, v in extra.items())
    _emit(args, stats, human if rows else "no queues yet")
    return 0


def cmd_health(args: argparse.Namespace) -> int:
    health = _client(args).request("GET", "/health")
    _emit(args, health, json.dumps(health))
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    url = args.database_url or os.environ.get("ASYNCZ_DATABASE_URL")
    if url:
        from asyncz.store.migrations import apply_migrations

        applied = apply_migrations(url)
    else:  # the AWS-style configuration (secret + proxy host)
        from asyncz.connections import database_conninfo
        from asyncz.settings import get_settings
        from asyncz.store.migrations import apply_migrations

        applied = apply_migrations(database_conninfo(get_settings().require_for("migrate")))
    _emit(
        args,
        {"applied": applied},
        "applied: " + ", ".join(applied) if applied else "schema is up to date",
    )
    return 0


def cmd_dev(args: argparse.Namespace) -> int:
    from asyncz.local.supervisor import DevOptions, run_dev

    if args.tasks:
        os.environ["ASYNCZ_TASK_MODULES"] = args.tasks
    if args.reload:
        return _run_reloading()

    opts = DevOptions.from_env(
        host=args.host,
        port=args.port,
        data_dir=args.data_dir,
        workers=args.workers,
        api_sandboxes=args.api_sandboxes,
        pg_port=args.pg_port,
        redis_port=args.redis_port,
    )
    if args.quiet:
        opts.access_log = False
    return run_dev(opts)


def _run_reloading() -> int:
    """``asyncz dev`` (same arguments, without --reload) in a child process, restarted with
    everything in it whenever a .py file below the current folder changes."""
    import watchfiles

    argv = [a for a in sys.argv[1:] if a != "--reload"]
    print("asyncz dev --reload: watching *.py below", os.getcwd(), file=sys.stderr)
    watchfiles.run_process(
        os.getcwd(),
        target=shlex.join([sys.executable, "-m", "asyncz", *argv]),
        target_type="command",
        watch_filter=watchfiles.PythonFilter(),
        sigint_timeout=15,
    )
    return 0
