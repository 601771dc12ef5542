"""Forward-only numbered SQL migrations, applied under an advisory lock (idempotent)."""

from __future__ import annotations

import re
import time
from importlib import resources

import psycopg
from psycopg import sql

RUNTIME_ROLE = "asyncz_app"  # created by migration 0002 with the functions' rights

# Any constant works; it only has to be the same for every process that migrates.
_LOCK_ID = 0x6173796E637A  # "asyncz"
# The statement triggers on jobs that write the outbox of lifecycle events (0023)
OUTBOX_TRIGGERS = ("jobs_outbox_inserted", "jobs_outbox_updated")
_FILE = re.compile(r"^(\d{4})_[\w-]+\.sql$")


def available_migrations() -> list[tuple[str, str]]:
    """(version, sql) for every migration file, in order."""
    folder = resources.files("asyncz.store").joinpath("sql/migrations")
    found = sorted(f.name for f in folder.iterdir() if _FILE.match(f.name))
    return [(name.removesuffix(".sql"), folder.joinpath(name).read_text("utf-8")) for name in found]


def _connect(conninfo: str, wait_seconds: float) -> psycopg.Connection[tuple[object, ...]]:
    """Connect, retrying for up to ``wait_seconds`` (a fresh RDS Proxy may not answer yet)."""
    deadline = time.monotonic() + wait_seconds
    delay = 1.0
    while True:
        try:
            return psycopg.connect(conninfo, autocommit=True)
        except psycopg.OperationalError:
            if time.monotonic() + delay > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 15.0)


def apply_migrations(conninfo: str, *, wait_seconds: float = 0.0) -> list[str]:
    """Apply every migration not yet applied; return the versions applied by this call.

    Safe to run concurrently: the first caller takes the advisory lock, the others wait
    and then find nothing left to do.
    """
    applied: list[str] = []
    with _connect(conninfo, wait_seconds) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (_LOCK_ID,))
        try:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            done = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
            for version, sql in available_migrations():
                if version in done:
                    continue
                with conn.transaction():
                    conn.execute(sql)  # type: ignore[arg-type]  # our own migration file
                    conn.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (version,))
                applied.append(version)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (_LOCK_ID,))
    return applied


def set_outbox(conninfo: str, on: bool) -> bool:
    """Enable (``on``) or disable the triggers that write ``job_outbox``; run as the owner,
    after the migrations. Return whether anything changed.

    A stage with no sink would only forget every row, so its migration turns them off. Only
    a trigger in the other state is altered: a deploy that changes nothing takes no lock
    on ``jobs`` (``ALTER TABLE`` takes one that holds back its writes while it waits).
    """
    with psycopg.connect(conninfo, autocommit=True) as conn, conn.transaction():
        states: dict[str, bool] = dict(
            conn.execute(
                "SELECT tgname, tgenabled <> 'D' FROM pg_trigger"
                " WHERE tgrelid = 'jobs'::regclass AND tgname = ANY(%s)",
                (list(OUTBOX_TRIGGERS),),
            ).fetchall()
        )
        missing = [name for name in OUTBOX_TRIGGERS if name not in states]
        if missing:
            raise LookupError(f"no trigger {', '.join(missing)} on jobs: migrate first")
        changed = [name for name in OUTBOX_TRIGGERS if states[name] != on]
        for name in changed:  # both in one transaction: never one end written, another not
            conn.execute(
                sql.SQL("ALTER TABLE jobs {} TRIGGER {}").format(
                    sql.SQL("ENABLE" if on else "DISABLE"), sql.Identifier(name)
                )
            )
    return bool(changed)


def provision_runtime_role_iam(conninfo: str) -> None:
    """Let the runtime role log in with RDS IAM auth tokens only; run as the owner.

    ``rds_iam`` is the role RDS and Aurora provide; a role granted it cannot log in with a
    password any more, so any password set by the standard profile stops working too.
    """
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("ALTER ROLE {} WITH LOGIN").format(sql.Identifier(RUNTIME_ROLE)))
        conn.execute(sql.SQL("GRANT rds_iam TO {}").format(sql.Identifier(RUNTIME_ROLE)))


def provision_runtime_role(conninfo: str, password: str) -> None:
    """Let the runtime role log in with ``password`` (its own secret's); run as the owner."""
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(
            sql.SQL("ALTER ROLE {} WITH LOGIN PASSWORD {}").format(
                sql.Identifier(RUNTIME_ROLE), sql.Literal(password)
            )
        )


def set_runtime_statement_timeout(conninfo: str, seconds: float) -> None:
    """Make ``seconds`` the runtime role's default statement timeout (0 = none); run as the
    owner. Behind RDS Proxy the functions send no startup parameter, so this is the bound."""
    value = f"{max(1, int(seconds * 1000))}ms" if seconds > 0 else "0"
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(
            sql.SQL("ALTER ROLE {} SET statement_timeout = {}").format(
                sql.Identifier(RUNTIME_ROLE), sql.Literal(value)
            )
        )
