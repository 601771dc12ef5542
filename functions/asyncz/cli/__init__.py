"""The ``asyncz`` command: ``dev`` (the local stack), ``migrate``, and ops commands over the API.

The ops commands use :mod:`asyncz.client`. They read ``ASYNCZ_API_URL`` (default
http://127.0.0.1:8000) and ``ASYNCZ_API_KEY``; talking to a local URL with no key, they use
the key ``asyncz dev`` wrote. ``--json`` prints JSON instead of tables. Global options go
before or after the command.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from asyncz import __version__
from asyncz.cli.access import add_access_commands
from asyncz.cli.activity import cmd_workers
from asyncz.cli.client import DEFAULT_API_URL, CliError
from asyncz.cli.commands import cmd_dev, cmd_migrate
from asyncz.cli.events import add_event_commands
from asyncz.cli.limits import cmd_pause, cmd_resume
from asyncz.cli.ops import (
    cmd_cancel,
    cmd_dlq,
    cmd_health,
    cmd_list,
    cmd_purge,
    cmd_replay,
    cmd_stats,
    cmd_status,
    cmd_steps,
    cmd_submit,
)
from asyncz.cli.webhooks import add_webhook_commands
from asyncz.client import AsyncZClientError, ConnectionFailed


def _global_options(parser: argparse.ArgumentParser, *, defaults: bool) -> None:
    """The options every command takes. On the subcommands they default to SUPPRESS, so a
    value given before the command is not overwritten by the subcommand's default."""

    def default(value: Any) -> Any:
        return value if defaults else argparse.SUPPRESS

    parser.add_argument(
        "--api-url",
        default=default(None),
        help=f"API base URL (env ASYNCZ_API_URL; default {DEFAULT_API_URL})",
    )
    parser.add_argument(
        "--api-key",
        default=default(None),
        help="API key sent as x-api-key (env ASYNCZ_API_KEY; for a local URL, the key "
        "`asyncz dev` wrote)",
    )
    parser.add_argument(
        "--json", action="store_true", default=default(False), help="print JSON, not tables"
    )
    parser.add_argument("--http-timeout", type=float, default=default(30.0), help=argparse.SUPPRESS)


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    _global_options(common, defaults=False)
    parser = argparse.ArgumentParser(prog="asyncz", description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--version", action="version", version=f"asyncz {__version__}")
    _global_options(parser, defaults=True)
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
    p.add_argument(
        "--api-events",
        choices=["rest", "http"],
        default=None,
        help="the API Gateway events the api sandboxes get: rest (the REST API's, as the "
        "standard profile deploys) or http (the HTTP API's payload 2.0, as lean and serverless "
        "do); env ASYNCZ_DEV_API_EVENTS",
    )
    p.add_argument("--pg-port", type=int, default=None, help="embedded Postgres port")
    p.add_argument("--redis-port", type=int, default=None, help="embedded Redis port")
    p.add_argument("--quiet", action="store_true", help="no access log lines")
    p.add_argument(
        "--log-format",
        choices=["human", "json"],
        default=None,
        help="the console: one short line per event (human, the default; colour on a "
        "terminal) or the components' JSON lines (json); env ASYNCZ_DEV_LOG_FORMAT",
    )
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

    p = add("submit", "submit a job (or, with --file, every job of a JSON-lines file)")
    p.add_argument("task", nargs="?", default=None)
    p.add_argument("payload", nargs="?", default=None, help="JSON object (default {})")
    p.add_argument(
        "--file",
        type=Path,
        default=None,
        help="JSON lines, one POST /jobs body each ('-': stdin); sent in batches",
    )
    p.add_argument("--batch-size", type=int, default=500, help="jobs per batch request (≤ 500)")
    p.add_argument("--queue")
    p.add_argument("--priority", type=int)
    p.add_argument("--max-retries", type=int)
    p.add_argument("--timeout-seconds", type=int)
    p.add_argument("--delay-seconds", type=int)
    p.add_argument("--idempotency-key")
    p.add_argument("--concurrency-key", help="what the task's per-key limits count by")
    p.add_argument(
        "--depends-on", action="append", metavar="JOB_ID", help="a parent (repeat for more)"
    )
    p.add_argument(
        "--on-parent-failure", choices=["fail", "run"], help="when a parent ends dead or cancelled"
    )
    p.add_argument("--unique-key", help="while a job holds it, answer with that job instead")
    p.add_argument("--unique-scope", choices=["queued", "queued_or_running", "period"])
    p.add_argument("--unique-for", type=int, metavar="SECONDS", help="the period scope's length")
    p.add_argument(
        "--debounce", action="store_true", help="a waiting holder takes this payload and start"
    )
    _wait_options(p)
    p.set_defaults(func=cmd_submit)

    p = add("status", "show a job (--wait: until it is finished)")
    p.add_argument("job_id")
    p.add_argument("--attempts", action="store_true", help="also list its attempts")
    _wait_options(p)
    p.set_defaults(func=cmd_status)

    p = add("list", "list jobs")
    p.add_argument(
        "--status",
        choices=["waiting", "queued", "processing", "suspended", "completed", "dead", "cancelled"],
    )
    p.add_argument("--queue")
    p.add_argument("--task")
    p.add_argument("--submitted-by", metavar="KEY_NAME", help="jobs this named key submitted")
    p.add_argument("--spawned-by", metavar="JOB_ID", help="the jobs this durable job spawned")
    _page_options(p)
    p.set_defaults(func=cmd_list)

    p = add("dlq", "list dead jobs")
    p.add_argument("--queue")
    p.add_argument("--task")
    _page_options(p)
    p.set_defaults(func=cmd_dlq)

    p = add("replay", "re-queue dead jobs")
    p.add_argument("job_ids", nargs="*", metavar="JOB_ID")
    p.add_argument(
        "--all", action="store_true", help="replay every dead job matching --queue/--task"
    )
    p.add_argument("--queue", help="with --all: only this queue")
    p.add_argument("--task", help="with --all: only this task")
    p.add_argument(
        "--reset-steps", action="store_true", help="a durable job's stored steps go first"
    )
    p.set_defaults(func=cmd_replay)

    p = add("steps", "list a durable job's stored steps")
    p.add_argument("job_id")
    p.set_defaults(func=cmd_steps)

    p = add("purge", "delete dead jobs from the dead-letter queue")
    p.add_argument("job_ids", nargs="+", metavar="JOB_ID")
    p.set_defaults(func=cmd_purge)

    p = add("cancel", "cancel a job")
    p.add_argument("job_id")
    p.set_defaults(func=cmd_cancel)

    for name, about, func in (
        ("pause", "pause a queue (jobs are accepted, none starts)", cmd_pause),
        ("resume", "resume a paused queue", cmd_resume),
    ):
        p = add(name, about)
        p.add_argument("queue")
        p.set_defaults(func=func)

    p = add("stats", "per-queue counts (--tasks: each task's last hour)")
    p.add_argument("--tasks", action="store_true", help="each task's runs, failures, percentiles")
    p.set_defaults(func=cmd_stats)

    p = add("workers", "the live workers and what each runs now")
    p.set_defaults(func=cmd_workers)

    p = add("health", "check the API")
    p.set_defaults(func=cmd_health)
    add_access_commands(add, common)
    add_webhook_commands(add, common)
    add_event_commands(add, common)
    return parser


def _wait_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--wait", action="store_true", help="poll until the job is finished")
    p.add_argument("--timeout", type=float, default=None, help="give up waiting after N s")
    p.add_argument("--interval", type=float, default=0.5, help="poll interval (s)")


def _page_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--limit", type=int, default=50, help="jobs to show (page size with --all)")
    p.add_argument("--cursor", help="start after this cursor (a listing's next_cursor)")
    p.add_argument("--all", action="store_true", help="follow every page")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    except ConnectionFailed as exc:
        print(f"error: {exc}; is `asyncz dev` running?", file=sys.stderr)
        return 1
    except AsyncZClientError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as exc:
        extra = _SERVER_SIDE.get(getattr(args.func, "__name__", ""))
        if extra is None or (exc.name or "").split(".")[0] == "asyncz":
            raise
        command, wanted = extra
        print(
            f"error: `asyncz {command}` needs the server side, which this install lacks "
            f"(no module named {exc.name!r}): pip install 'asyncz-serverless[{wanted}]'",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        return 130
    return code


# The commands that run the server side, and the extra that brings it (the base install is
# the client alone).
_SERVER_SIDE = {"cmd_dev": ("dev", "local"), "cmd_migrate": ("migrate", "server")}


if __name__ == "__main__":
    sys.exit(main())
