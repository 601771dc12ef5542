"""``asyncz webhooks add|list|remove|deliveries|redeliver|test``, through the API: the key
they run with needs the ``admin`` scope. docs/events.md, "Webhooks"."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from asyncz.cli.client import make_client
from asyncz.cli.output import emit, table

WEBHOOK_COLUMNS = [("id", "ID"), ("url", "URL"), ("types", "TYPES"), ("queues", "QUEUES"),
                   ("tasks", "TASKS"), ("created_by", "BY"), ("created_at", "CREATED")]  # fmt: skip
DELIVERY_COLUMNS = [("id", "ID"), ("event_id", "EVENT"), ("event_type", "TYPE"),
                    ("status", "STATUS"), ("attempts", "ATTEMPTS"),
                    ("last_status_code", "LAST CODE"), ("last_error", "LAST ERROR"),
                    ("created_at", "CREATED")]  # fmt: skip


def _fields(obj: Any) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in obj.__slots__}


def _all(values: list[str]) -> str:
    return ",".join(values) or "all"


def cmd_webhooks_add(args: argparse.Namespace) -> int:
    with make_client(args) as client:
        hook = client.ops.webhooks.add(
            args.url, types=args.type or (), queues=args.queue or (), tasks=args.task or ()
        )
    human = (f"webhook {hook.id} registered for {hook.url}. Its signing secret is shown this "
             f"once; store it now:\n{hook.secret}")  # fmt: skip
    emit(args, hook, human)
    return 0


def cmd_webhooks_list(args: argparse.Namespace) -> int:
    with make_client(args) as client:
        hooks = client.ops.webhooks.list()
    rows = [{**_fields(h), "types": _all(h.types), "queues": _all(h.queues),
             "tasks": _all(h.tasks)} for h in hooks]  # fmt: skip
    emit(args, hooks, table(rows, WEBHOOK_COLUMNS) if rows else "no webhooks")
    return 0


def cmd_webhooks_remove(args: argparse.Namespace) -> int:
    with make_client(args) as client:
        client.ops.webhooks.remove(args.id)
    emit(args, {"removed": args.id}, f"webhook {args.id} removed: nothing more is sent to it")
    return 0


def cmd_webhooks_deliveries(args: argparse.Namespace) -> int:
    with make_client(args) as client:
        deliveries = client.ops.webhooks.deliveries(args.id, limit=args.limit)
    rows = [_fields(d) for d in deliveries]
    emit(args, deliveries, table(rows, DELIVERY_COLUMNS) if rows else "no deliveries yet")
    return 0


def cmd_webhooks_redeliver(args: argparse.Namespace) -> int:
    with make_client(args) as client:
        queued = client.ops.webhooks.redeliver(args.id, args.delivery)
    emit(args, queued, f"event {queued['event_id']} queued again as delivery {queued['id']}")
    return 0


def cmd_webhooks_test(args: argparse.Namespace) -> int:
    with make_client(args) as client:
        queued = client.ops.webhooks.test(args.id)
    emit(args, queued, f"test event {queued['event_id']} queued as delivery {queued['id']}")
    return 0


def add_webhook_commands(
    add: Callable[..., argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """The ``webhooks`` command, on the parser's ``add(name, help)``; ``common``: the options
    every command takes."""
    hooks = add("webhooks", "webhooks: signed HTTP calls when jobs end (needs the admin scope)")
    sub = hooks.add_subparsers(dest="webhooks_command", required=True, metavar="ACTION")
    p = sub.add_parser("add", help="register a URL; its secret is printed once", parents=[common])
    p.add_argument("url", help="https://… (a public address)")
    p.add_argument("--type", action="append", help="e.g. asyncz.job.dead; repeat; default all")
    p.add_argument("--queue", action="append", help="only jobs of this queue; repeat")
    p.add_argument("--task", action="append", help="only jobs of this task; repeat")
    p.set_defaults(func=cmd_webhooks_add)
    p = sub.add_parser("list", help="the webhooks and their filters", parents=[common])
    p.set_defaults(func=cmd_webhooks_list)
    p = sub.add_parser("remove", help="delete a webhook", parents=[common])
    p.add_argument("id", type=int)
    p.set_defaults(func=cmd_webhooks_remove)
    p = sub.add_parser("deliveries", help="a webhook's deliveries, newest first",
                       parents=[common])  # fmt: skip
    p.add_argument("id", type=int)
    p.add_argument("--limit", type=int, default=20)
    p.set_defaults(func=cmd_webhooks_deliveries)
    p = sub.add_parser("redeliver", help="a delivery's event again (the same event id)",
                       parents=[common])  # fmt: skip
    p.add_argument("id", type=int)
    p.add_argument("delivery", type=int)
    p.set_defaults(func=cmd_webhooks_redeliver)
    p = sub.add_parser("test", help="send a test event", parents=[common])
    p.add_argument("id", type=int)
    p.set_defaults(func=cmd_webhooks_test)
