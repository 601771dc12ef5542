"""How the CLI prints: tables for people, the API's JSON with ``--json``."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

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


def _flat(values: Any) -> dict[str, Any]:
    """One level of nesting flattened ({"counts": {"queued": 1}} -> {"queued": 1})."""
    out: dict[str, Any] = {}
    for key, value in (values or {}).items():
        if isinstance(value, dict):
            out.update(value)
        else:
            out[key] = value
    return out
