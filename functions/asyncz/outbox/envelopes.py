"""An outbox row as the event consumers see (:class:`asyncz.outbox.sink.Envelope`), and the
JSON Schema of its ``data`` (docs/events.md; the OpenAPI document's ``JobEvent``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from asyncz.outbox.sink import EVENT_TYPES, Envelope
from asyncz.port_types import Row

_TIMES = ("submitted_at", "started_at", "finished_at")
_FIELDS = ("job_id", "task", "queue", "status", "attempts", "submitted_by", "traceparent",
           "tracestate")  # fmt: skip


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def envelope_of(row: Row, source: str) -> Envelope:
    """The envelope of an outbox row (``result`` only when the row carries one)."""
    data: dict[str, Any] = {name: row[name] for name in _FIELDS}
    data.update({name: _time(row[name]) for name in _TIMES})
    if row.get("result") is not None:
        data["result"] = row["result"]
    return Envelope(id=str(row["id"]), type=str(row["type"]), time=_time(row["created_at"]) or "",
                    data=data, source=source)  # fmt: skip


_TIME = {"type": ["string", "null"], "format": "date-time"}
_TEXT = {"type": ["string", "null"]}

# The CloudEvents envelope with our data: what a webhook's body and an EventBridge event's
# `detail` hold.
EVENT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "JobEvent",
    "description": "A job's lifecycle event (CloudEvents 1.0, structured mode). `id` is "
    "stable across every retry and redelivery: deduplicate on it.",
    "type": "object",
    "required": ["specversion", "id", "type", "source", "time", "data"],
    "properties": {
        "specversion": {"const": "1.0"},
        "id": {"type": "string", "format": "uuid"},
        "type": {"enum": list(EVENT_TYPES)},
        "source": {"type": "string"},
        "subject": {"type": "string", "description": "the job's id"},
        "time": {"type": "string", "format": "date-time",
                 "description": "when the change was made (its transaction's time)"},
        "datacontenttype": {"const": "application/json"},
        "data": {
            "type": "object",
            "required": ["job_id", "task", "queue", "status", "attempts", "submitted_at"],
            "properties": {
                "job_id": {"type": "string", "format": "uuid"},
                "task": {"type": "string"},
                "queue": {"type": "string"},
                "status": {"enum": ["completed", "dead", "cancelled", "queued", "waiting"],
                           "description": "the job's status after the change"},
                "attempts": {"type": "integer", "minimum": 0},
                "submitted_at": {"type": "string", "format": "date-time"},
                "started_at": _TIME,
                "finished_at": _TIME,
                "submitted_by": {**_TEXT, "description": "the submitting key's name"},
                "traceparent": {**_TEXT, "description": "W3C trace context of the submit"},
                "tracestate": _TEXT,
                "result": {"description": "completed events only, when the deployment asks "
                           "for results (ASYNCZ_OUTBOX_RESULT_BYTES) and it fits the bound"},
            },
        },
    },
}  # fmt: skip
