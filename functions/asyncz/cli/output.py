"""How the CLI prints: rich tables and progress for people, JSON with ``--json``."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from rich.console import Console
from rich.table import Table

from asyncz.client import Job


def console(stderr: bool = False) -> Console:
    """A console on stdout (or stderr); wide when not a terminal, so ids are never cut."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(file=stream, width=None if stream.isatty() else 240, highlight=False)


def as_data(value: Any) -> Any:
    """Models as the API's JSON shapes (a job's ``id`` is ``job_id``)."""
    if isinstance(value, Job):
        fields = {f.name: as_data(getattr(value, f.name)) for f in dataclasses.fields(value)}
        data = {"job_id": fields.pop("id"), **fields}
        if not data.pop("duplicate"):
            return data
        return {**data, "duplicate": True}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: as_data(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [as_data(v) for v in value]
    if isinstance(value, dict):
        return {k: as_data(v) for k, v in value.items()}
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), default=str)
    return str(value)


def emit(args: argparse.Namespace, data: Any, human: Any) -> None:
    """``--json``: the data as JSON; else ``human`` (text or a rich renderable)."""
    if args.json:
        print(json.dumps(as_data(data), indent=2, default=str))
    else:
        console().print(human)


def table(rows: Sequence[Any], columns: Sequence[tuple[str, str]]) -> Table:
    """A table of objects or dicts; ``columns`` are (attribute, title) pairs."""
    out = Table(box=None, header_style="bold", pad_edge=False)
    for _, title in columns:
        out.add_column(title, overflow="fold")
    for row in rows:
        get = row.get if isinstance(row, dict) else lambda k, r=row: getattr(r, k, None)
        out.add_row(*(cell(get(key)) for key, _ in columns))
    return out


JOB_COLUMNS = [
    ("id", "JOB ID"),
    ("task", "TASK"),
    ("queue", "QUEUE"),
    ("status", "STATUS"),
    ("attempts", "ATTEMPTS"),
    ("created_at", "CREATED (UTC)"),
    ("finished_at", "FINISHED (UTC)"),
]
DEAD_COLUMNS = [
    ("id", "JOB ID"),
    ("task", "TASK"),
    ("queue", "QUEUE"),
    ("attempts", "ATTEMPTS"),
    ("finished_at", "DEAD SINCE (UTC)"),
    ("last_error", "LAST ERROR"),
]
_DESCRIBED = ["id", "task", "queue", "status", "waiting_for", "priority", "attempts",
              "max_retries", "timeout_seconds", "run_at", "created_at", "started_at", "finished_at",
              "last_error", "result", "payload", "open_parents", "depends_on",
              "dependents", "spawned_by", "spawned"]  # fmt: skip


def describe(job: Job) -> Table:
    """One job, a field per line."""
    out = Table.grid(padding=(0, 2))
    out.add_column(style="bold")
    out.add_column(overflow="fold")
    for key in _DESCRIBED:
        value = getattr(job, key)
        if key in ("depends_on", "dependents") and value:
            value = " ".join(f"{p['job_id']} ({p['status']})" for p in value)
        if key == "spawned" and value:  # its spawned jobs: counts, and how to list them
            counts = ", ".join(f"{n} {s}" for s, n in value["by_status"].items())
            value = f"{value['total']} ({counts}): asyncz list --spawned-by {job.id}"
        if key == "open_parents" and job.status != "waiting":
            continue
        if (value is not None and value != []) or key in ("status", "result"):
            out.add_row("job_id" if key == "id" else key, cell(value))
    return out
