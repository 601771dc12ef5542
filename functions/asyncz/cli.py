"""The ``asyncz`` command: ``dev`` (the local stack), ``migrate``, and ops commands over the API.

The ops commands speak HTTP with the standard library only, so the CLI stays light. They
read ``ASYNCZ_API_URL`` (default http://127.0.0.1:8000) and ``ASYNCZ_API_KEY``; ``--json``
prints the API's JSON instead of tables.
"""

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
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

DEFAULT_API_URL = "http://127.0.0.1:8000"
TERMINAL = {"completed", "dead", "cancelled"}


class CliError(Exception):
    """A failure to report as ``error: ...`` with a non-zero exit."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


# --------------------------------------------------------------------------- HTTP client


class ApiClient:
    """A minimal JSON client for the AsyncZ API (urllib; ``x-api-key`` auth)."""

    def __init__(self, base_url: str, api_key: str | None, timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: dict[str, Any] | None = None,
    ) -> Any:
        params = {k: v for k, v in (query or {}).items() if v is not None}
        url = self.base_url + path + ("?" + urllib.parse.urlencode(params) if params else "")
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method)  # noqa: S310 - http(s) only
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.api_key:
            req.add_header("x-api-key", self.api_key)
        if not url.startswith(("http://", "https://")):
            raise CliError(f"the API URL must be http(s): {self.base_url}", 2)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:  # noqa: S310
                raw = resp.read()
        except urllib.error.HTTPError as err:
            raise CliError(_http_error(err)) from err
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            raise CliError(
                f"cannot reach the API at {self.base_url} ({reason}); is `asyncz dev` running?"
            ) from err
        return json.loads(raw) if raw else None

    def pages(self, path: str, query: dict[str, Any], follow: bool) -> Iterator[dict[str, Any]]:
        """Items of a cursor-paginated listing; all pages when ``follow``."""
        query = dict(query)
        while True:
            page = self.request("GET", path, query=query)
            yield from page.get("items") or []
            cursor = page.get("next_cursor")
            if not follow or not cursor:
                return
            query["cursor"] = cursor


def _http_error(err: urllib.error.HTTPError) -> str:
    try:
        body = json.loads(err.read() or b"{}")
    except ValueError:
        body = {}
    if isinstance(body, dict):
        code = body.get("error") or err.reason
        message = body.get("message") or ""
        if isinstance(message, list | dict):
            message = json.dumps(message)
        return f"HTTP {err.code} {code}: {message}".rstrip(": ")
    return f"HTTP {err.code}"


# --------------------------------------------------------------------------- output


def job_id_of(job: dict[str, Any]) -> str:
    return str(job.get("job_id") or job.get("id") or "")


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    text = str(value)
    if len(text) >= 19 and text[4:5] == "-" and "T" in text[:11]:  # ISO timestamp: shorten
        return text[:19].replace("T", " ")
    return text


def table(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str]]) -> str:
    """A plain-text table; ``columns`` are (key, title) pairs."""
    cells = [[_cell(row.get(key)) for key, _ in columns] for row in rows]
    widths = [
        max([len(title), *(len(r[i]) for r in cells)]) for i, (_, title) in enumerate(columns)
    ]
    lines = ["  ".join(t.ljust(w) for (_, t), w in zip(columns, widths, strict=True)).rstrip()]
    for r in cells:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return "\n".join(lines)


JOB_COLUMNS = [
    ("job_id", "JOB ID"),
    ("task", "TASK"),
    ("queue", "QUEUE"),
    ("status", "STATUS"),
    ("attempts", "ATTEMPTS"),
    ("created_at", "CREATED (UTC)"),
    ("finished_at", "FINISHED (UTC)"),
]


def _emit(args: argparse.Namespace, data: Any, human: str) -> None:
    print(json.dumps(data, indent=2, default=str) if args.json else human)


def _job_rows(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**job, "job_id": job_id_of(job)} for job in items]


def _describe(job: dict[str, Any]) -> str:
    keys = [
        "job_id",
        "task",
        "queue",
        "status",
        "priority",
        "attempts",
        "max_retries",
        "timeout_seconds",
        "run_at",
        "created_at",
        "started_at",
        "finished_at",
        "last_error",
        "result",
        "payload",
    ]
    row = {**job, "job_id": job_id_of(job)}
    shown = [k for k in keys if k in row] + [k for k in row if k not in keys and k != "id"]
    width = max(len(k) for k in shown)
    return "\n".join(f"{k.ljust(width)}  {_cell(row[k])}" for k in shown)


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


def _flat(values: Any) -> dict[str, Any]:
    """One level of nesting flattened ({"counts": {"queued": 1}} -> {"queued": 1})."""
    out: dict[str, Any] = {}
    for key, value in (values or {}).items():
        if isinstance(value, dict):
            out.update(value)
        else:
            out[key] = value
    return out


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


# --------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--api-url",
        default=os.environ.get("ASYNCZ_API_URL") or DEFAULT_API_URL,
        help="API base URL (env ASYNCZ_API_URL; default %(default)s)",
    )
    common.add_argument(
        "--api-key",
        default=os.environ.get("ASYNCZ_API_KEY"),
        help="API key sent as x-api-key (env ASYNCZ_API_KEY)",
    )
    common.add_argument("--json", action="store_true", help="print JSON, not tables")
    common.add_argument("--http-timeout", type=float, default=30.0, help=argparse.SUPPRESS)

    parser = argparse.ArgumentParser(prog="asyncz", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, help_text: str, **kw: Any) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(
            name, help=help_text, description=help_text, parents=[common], **kw
        )
        return p

    p = add("dev", "run the whole system locally: no cloud, no Docker")
    p.add_argument("--host", default=None, help="front address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=None, help="front port (env ASYNCZ_DEV_PORT; 8000)")
    p.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="embedded servers' data and the API key (env ASYNCZ_DEV_DATA_DIR; .asyncz)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="fixed number of worker sandboxes (env ASYNCZ_DEV_WORKERS); "
        "default: the fleet controller decides",
    )
    p.add_argument(
        "--api-sandboxes",
        type=int,
        default=None,
        help="concurrent api sandboxes (env ASYNCZ_DEV_API_SANDBOXES; 4)",
    )
    p.add_argument("--pg-port", type=int, default=None, help="embedded Postgres port")
    p.add_argument("--redis-port", type=int, default=None, help="embedded Redis port")
    p.add_argument("--quiet", action="store_true", help="no access log lines")
    p.add_argument(
        "--tasks",
        default=None,
        help="task modules to import from the current folder, comma-separated "
        "(same as ASYNCZ_TASK_MODULES)",
    )
    p.add_argument(
        "--reload", action="store_true", help="restart everything when a .py file changes"
    )
    p.set_defaults(func=cmd_dev)

    p = add("migrate", "apply the database migrations")
    p.add_argument("--database-url", default=None, help="default: ASYNCZ_DATABASE_URL")
    p.set_defaults(func=cmd_migrate)

    p = add("submit", "submit a job")
    p.add_argument("task")
    p.add_argument("payload", nargs="?", default=None, help="JSON object (default {})")
    p.add_argument("--queue")
    p.add_argument("--priority", type=int)
    p.add_argument("--max-retries", type=int)
    p.add_argument("--timeout-seconds", type=int)
    p.add_argument("--delay-seconds", type=int)
    p.add_argument("--idempotency-key")
    _wait_options(p)
    p.set_defaults(func=cmd_submit)

    p = add("status", "show a job (--wait: until it is terminal)")
    p.add_argument("job_id")
    p.add_argument("--attempts", action="store_true", help="also list its attempts")
    _wait_options(p)
    p.set_defaults(func=cmd_status)

    p = add("list", "list jobs")
    p.add_argument("--status")
    p.add_argument("--queue")
    p.add_argument("--task")
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--cursor")
    p.add_argument("--all", action="store_true", help="follow every page")
    p.set_defaults(func=cmd_list)

    p = add("dlq", "list dead jobs")
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--cursor")
    p.add_argument("--all", action="store_true", help="follow every page")
    p.set_defaults(func=cmd_dlq)

    p = add("replay", "re-queue dead jobs")
    p.add_argument("job_ids", nargs="*", metavar="JOB_ID")
    p.add_argument("--all", action="store_true", help="replay the whole dead-letter queue")
    p.set_defaults(func=cmd_replay)

    p = add("purge", "delete dead jobs from the dead-letter queue")
    p.add_argument("job_ids", nargs="+", metavar="JOB_ID")
    p.set_defaults(func=cmd_purge)

    p = add("cancel", "cancel a job")
    p.add_argument("job_id")
    p.set_defaults(func=cmd_cancel)

    p = add("stats", "per-queue counts")
    p.set_defaults(func=cmd_stats)

    p = add("health", "check the API")
    p.set_defaults(func=cmd_health)
    return parser


def _wait_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--wait", action="store_true", help="poll until the job is terminal")
    p.add_argument("--timeout", type=float, default=None, help="give up waiting after N s")
    p.add_argument("--interval", type=float, default=0.5, help="poll interval (s)")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
