"""One short log line per attempt's outcome: what an operator searches for (job id, task,
attempt, status, duration in ms, error; the queue when not the default), and nothing else.

The Powertools logger adds the Lambda context to every line (about 300 bytes: function ARN,
memory, request id, cold start); the outcome line is the one line a job costs, so it goes
to stdout as compact JSON of its own (Lambda keeps a JSON line as written). The invocation's
other lines still carry the context, and its request id joins them.
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from asyncz.jobs import Lease

DEFAULT_QUEUE = "default"
# the statuses an attempt can leave its job in, and the level each is logged at
LEVELS = {"completed": "INFO", "retrying": "INFO", "cancelled": "INFO", "dead": "WARNING"}
_COMPACT = json.JSONEncoder(separators=(",", ":"))  # made once (json.dumps makes one a call)


def outcome_line(
    lease: Lease, status: str, duration_ms: float, error: str | None, trace_id: str | None = None,
    steps: dict[str, Any] | None = None,
) -> str:  # fmt: skip
    """No timestamp of its own: CloudWatch stamps every event (and ``asyncz dev`` prints the
    line as the sandbox wrote it). Short keys, no message that repeats the status, the
    queue only when it is not the default one, and the level only when it is not INFO
    (Lambda's log-level filtering reads a line without one as INFO): about 105 bytes a job."""
    level = LEVELS.get(status, "INFO")
    record: dict[str, Any] = {} if level == "INFO" else {"level": level}
    record |= {
        "job_id": lease.job_id,
        "task": lease.task,
        "attempt": lease.attempt,
        "status": status,
        "ms": round(duration_ms, 1),
    }
    if lease.queue != DEFAULT_QUEUE:
        record["queue"] = lease.queue
    if trace_id:
        record["trace_id"] = trace_id
    if steps:  # a durable task's: steps run by this attempt, and the last it asked for
        record |= steps
    if error:
        record["error"] = error[:500]
    return _COMPACT.encode(record) + "\n"


def log_outcome(
    lease: Lease,
    status: str,
    duration_ms: float,
    error: str | None,
    out: TextIO | None = None,
    trace_id: str | None = None,
    steps: dict[str, Any] | None = None,
) -> None:
    (out or sys.stdout).write(outcome_line(lease, status, duration_ms, error, trace_id, steps))
