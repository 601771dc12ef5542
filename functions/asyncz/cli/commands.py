"""The CLI's local commands: ``dev`` (the whole system on this machine) and ``migrate``."""

from __future__ import annotations

import argparse
import os
import shlex
import sys

from asyncz.cli.client import CliError
from asyncz.cli.output import emit


def cmd_migrate(args: argparse.Namespace) -> int:
    from asyncz.settings import get_settings
    from asyncz.store.migrations import apply_migrations, set_outbox

    try:
        settings = get_settings()
        url = args.database_url or os.environ.get("ASYNCZ_DATABASE_URL")
        if not url:  # the AWS-style configuration (secret + proxy host)
            from asyncz.connections import database_conninfo

            url = database_conninfo(settings.require_for("migrate"))
    except ValueError as exc:  # a setting missing or malformed
        raise CliError(str(exc), 2) from None
    applied = apply_migrations(url)
    # as the migrate function does: ASYNCZ_OUTBOX=off where nothing delivers the events
    changed = set_outbox(url, on=settings.outbox == "on")
    text = "applied: " + ", ".join(applied) if applied else "schema is up to date"
    if changed:
        text += f"; outbox turned {settings.outbox}"
    emit(args, {"applied": applied, "outbox": settings.outbox}, text)
    return 0


def cmd_dev(args: argparse.Namespace) -> int:
    from asyncz.local.supervisor import DevOptions, run_dev

    if args.tasks:
        os.environ["ASYNCZ_TASK_MODULES"] = args.tasks
    if args.reload:
        return _run_reloading()

    try:
        opts = DevOptions.from_env(
            host=args.host,
            port=args.port,
            data_dir=args.data_dir,
            workers=args.workers,
            api_sandboxes=args.api_sandboxes,
            pg_port=args.pg_port,
            redis_port=args.redis_port,
            api_events=args.api_events,
            log_format=args.log_format,
        )
    except ValueError as exc:
        raise CliError(str(exc), 2) from None
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
