"""The fields every log line written during an attempt carries (job id, attempt, task, queue,
trace id), the task's own ``logging`` calls included: set in the attempt's own context (its
asyncio task, copied to the thread of a sync task), so concurrent attempts never see each
other's, and added to each record by a handler filter (asyncz.observability puts it on the
handlers). Light on purpose: the worker loop imports it, Powertools stays out."""

from __future__ import annotations

import logging
from contextvars import ContextVar, Token
from typing import Any

_fields: ContextVar[dict[str, Any] | None] = ContextVar("asyncz_attempt", default=None)


class AttemptFields(logging.Filter):
    """Adds the running attempt's fields to a record (a field the call gave in ``extra`` is
    kept). On a handler it sees every record, propagated ones included."""

    def filter(self, record: logging.LogRecord) -> bool:
        fields = _fields.get()
        if fields:
            for name, value in fields.items():
                record.__dict__.setdefault(name, value)
        return True


ATTEMPT_FIELDS = AttemptFields()


def set_attempt_fields(
    job_id: str, attempt: int, task: str, queue: str, trace_id: str | None
) -> Token[dict[str, Any] | None]:
    """Every line logged from here in this context carries these (until reset)."""
    fields: dict[str, Any] = {"job_id": job_id, "attempt": attempt, "task": task, "queue": queue}
    if trace_id:
        fields["trace_id"] = trace_id
    return _fields.set(fields)


def reset_attempt_fields(token: Token[dict[str, Any] | None]) -> None:
    _fields.reset(token)


def attempt_fields() -> dict[str, Any] | None:
    """The running attempt's fields in this context (None outside an attempt)."""
    return _fields.get()
