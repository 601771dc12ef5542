"""``asyncz keys`` (create, list, revoke named API keys) and ``asyncz audit`` (who did what),
through the API: the key they run with needs the ``admin`` scope (keys) or ``read`` (audit).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import datetime
from typing import Any

from asyncz.cli.client import CliError, make_client
from asyncz.cli.output import emit, table

KEY_COLUMNS = [("name", "NAME"), ("scopes", "SCOPES"), ("rate", "RATE"),
               ("created_at", "CREATED"), ("expires_at", "EXPIRES"),
               ("last_used_at", "LAST USED"), ("revoked_at", "REVOKED")]  # fmt: skip
AUDIT_COLUMNS = [("at", "AT"), ("key_name", "KEY"), ("action", "ACTION"),
                 ("target", "TARGET"), ("detail", "DETAIL"), ("outcome", "OUTCOME")]  # fmt: skip


def cmd_keys_create(args: argparse.Namespace) -> int:
    expires = None
    if args.expires:
        try:
            expires = datetime.fromisoformat(args.expires)
        except ValueError as exc:
            raise CliError(f"--expires is not an ISO date/time: {exc}", 2) from exc
        if expires.tzinfo is None:
            raise CliError("--expires needs a time zone, e.g. 2027-01-31T00:00:00+00:00", 2)
    with make_client(args) as client:
        key = client.ops.create_key(args.name, args.scope, rate=args.rate, expires_at=expires)
    human = (
        f"created key {key.name!r} ({', '.join(key.scopes)}"
        f"{', ' + key.rate if key.rate else ''}). It is shown this once; store it now:\n"
        f"{key.key}"
    )
    emit(args, key, human)
    return 0


def cmd_keys_list(args: argparse.Namespace) -> int:
    with make_client(args) as client:
        keys = client.ops.keys(revoked=args.revoked)
    rows = [{**_fields(k), "scopes": ",".join(k.scopes)} for k in keys]
    emit(args, keys, table(rows, KEY_COLUMNS) if rows else "no named keys")
    return 0


def cmd_keys_revoke(args: argparse.Namespace) -> int:
    with make_client(args) as client:
        client.ops.revoke_key(args.name)
    emit(args, {"revoked": args.name}, f"revoked {args.name!r}: refused everywhere within seconds")
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    with make_client(args) as client:
        entries = client.ops.audit(key_name=args.key, action=args.action, limit=args.limit)
    emit(args, entries, table(entries, AUDIT_COLUMNS) if entries else _no_audit_entries(args))
    return 0


def _no_audit_entries(args: argparse.Namespace) -> str:
    given = [f"--{name} {value}" for name in ("key", "action") if (value := getattr(args, name))]
    return f"no operator action matches {' '.join(given)}" if given else "no operator actions yet"


def _fields(obj: Any) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in obj.__slots__}


def add_access_commands(
    add: Callable[..., argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """The ``keys`` and ``audit`` commands, on the parser's ``add(name, help)``; ``common``:
    the options every command takes."""
    keys = add("keys", "named API keys: create, list, revoke (needs the admin scope)")
    sub = keys.add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    p = sub.add_parser("create", help="create a key; it is printed once", parents=[common])
    p.add_argument("--name", required=True, help="e.g. billing-svc (letters, digits, . _ -)")
    p.add_argument(
        "--scope", action="append", required=True,
        choices=["submit", "read", "operate", "admin", "events"],
        help="repeat for more",
    )  # fmt: skip
    p.add_argument("--rate", help="requests per period across every sandbox, e.g. 5/s, 600/m")
    p.add_argument("--expires", help="ISO date/time with zone; default: never")
    p.set_defaults(func=cmd_keys_create)
    p = sub.add_parser("list", help="name, scopes, last used (never the key)", parents=[common])
    p.add_argument("--revoked", action="store_true", help="also the revoked keys")
    p.set_defaults(func=cmd_keys_list)
    p = sub.add_parser("revoke", help="refuse the key everywhere within seconds", parents=[common])
    p.add_argument("name")
    p.set_defaults(func=cmd_keys_revoke)

    p = add("audit", "operator actions, newest first: who did what, when, with what outcome")
    p.add_argument("--key", help="only this key's actions")
    p.add_argument("--action", help="e.g. purge, bulk_replay, cancel, key.create")
    p.add_argument("--limit", type=int, default=50)
    p.set_defaults(func=cmd_audit)
