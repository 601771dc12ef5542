"""``asyncz event send NAME --key KEY [--payload JSON]``: wake the durable tasks waiting for
an event (docs/durable.md, "Events"), through the API: the key needs the ``events`` scope."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

from asyncz.cli.client import CliError, make_client
from asyncz.cli.output import emit


def cmd_event_send(args: argparse.Namespace) -> int:
    try:
        payload = json.loads(args.payload) if args.payload is not None else None
    except json.JSONDecodeError as exc:
        raise CliError(f"--payload is not JSON: {exc}", 2) from exc
    with make_client(args) as client:
        sent = client.send_event(args.name, args.key, payload)
    waits = "wait" if sent.woken == 1 else "waits"
    emit(args, sent, f"event {sent.event_id} sent: it woke {sent.woken} {waits}")
    return 0


def add_event_commands(
    add: Callable[..., argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """The ``event`` command, on the parser's ``add(name, help)``; ``common``: the options
    every command takes."""
    event = add("event", "events: wake the durable tasks waiting for one (the events scope)")
    sub = event.add_subparsers(dest="event_command", required=True, metavar="ACTION")
    p = sub.add_parser("send", help="send an event; prints how many waits it woke",
                       parents=[common])  # fmt: skip
    p.add_argument("name", help="the event's name, e.g. approval")
    p.add_argument("--key", required=True, help="what it is about, e.g. order:1")
    p.add_argument("--payload", default=None, help="JSON the waiting tasks get (default {})")
    p.set_defaults(func=cmd_event_send)
