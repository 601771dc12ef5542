"""The console of ``asyncz dev``: one short human line per event.

Every component writes structured lines to its stdout (the runner's JSON lines, the access
log, the sandboxes' Powertools lines, the worker's outcome lines, EMF metrics) and
tracebacks to stderr. In the human format, the runner points its own stdout and stderr,
which every sandbox inherits, at one pipe; one thread reads it and writes each event as a
line (``12:00:01 api      POST /jobs 202 3.1 ms``; ``12:00:01 worker   job 1a2b3c4d echo
completed in 4 ms (attempt 1)``) to the real output: colour only on a terminal, metrics
left out, an error's traceback printed once under it. ``--log-format json`` keeps the lines
as written.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any, TextIO

FORMATS = ("human", "json")
_RESET, _DIM, _RED, _YELLOW, _GREEN = "\033[0m", "\033[2m", "\033[31m", "\033[33m", "\033[32m"
_STATUS_COLOUR = {"completed": _GREEN, "retrying": _YELLOW, "dead": _RED, "cancelled": _YELLOW}
_LEVEL_COLOUR = {"ERROR": _RED, "CRITICAL": _RED, "WARNING": _YELLOW}
# Powertools' own keys: the rest of a line's keys are what the call added
_STANDARD = frozenset({
    "level", "location", "message", "timestamp", "service", "cold_start", "function_name",
    "function_memory_size", "function_arn", "function_request_id", "xray_trace_id",
    "sampling_rate", "correlation_id", "exception", "exception_name", "stack_trace",
    "component", "logger", "name", "taskName",
})  # fmt: skip
_ATTEMPT_KEYS = ("job_id", "task", "queue", "attempt", "trace_id")


def _short(job_id: Any) -> str:
    return str(job_id)[:8]


def _clip(value: Any, width: int = 60) -> str:
    text = str(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def _is_outcome(record: dict[str, Any]) -> bool:
    """The worker's line for an attempt's outcome (asyncz.worker.outcomes): no message, the
    status and the duration in ms."""
    return "job_id" in record and "status" in record and "ms" in record and "message" not in record


def _component(record: dict[str, Any]) -> str:
    if _is_outcome(record):
        return "worker"
    if "component" in record:
        return "api" if record["component"] == "gateway" else str(record["component"])
    function = str(record.get("function_name") or record.get("service") or "")
    return function.rsplit("-", 1)[-1] or "asyncz"


def describe(record: dict[str, Any]) -> str | None:
    """What one structured line says, in a few words; None for a line a person does not
    need (EMF metrics)."""
    if "_aws" in record:
        return None
    message = str(record.get("message", ""))
    if record.get("component") == "gateway" and "ms" in record:
        return f"{message} {record['ms']} ms"
    if _is_outcome(record):
        text = (f"job {_short(record['job_id'])} {record.get('task')} {record['status']} "
                f"in {record['ms']:g} ms (attempt {record.get('attempt')})")  # fmt: skip
        return text + (f": {record['error']}" if record.get("error") else "")
    if "job_id" in record and "attempt" in record:  # a line logged during an attempt
        message = (f"[job {_short(record['job_id'])} {record.get('task', '')} "
                   f"#{record['attempt']}] {message}")  # fmt: skip
    extras = [f"{k}={_clip(v)}" for k, v in record.items()
              if k not in _STANDARD and k not in _ATTEMPT_KEYS]  # fmt: skip
    return " ".join([message, *extras[:8]])


def render(line: str, colour: bool, now: datetime | None = None) -> str:
    """The console's text for one line a component wrote ("" to leave it out); a line that is
    not a JSON object (a traceback, the banner) is kept as it is."""
    try:
        record = json.loads(line) if line.startswith("{") else None
    except ValueError:
        record = None
    if not isinstance(record, dict):
        if colour and (line.startswith("[ERROR]") or line.startswith("Traceback")):
            return f"{_RED}{line.rstrip()}{_RESET}\n"
        return line if line.endswith("\n") else line + "\n"
    text = describe(record)
    if text is None:
        return ""
    stamp = now.strftime("%H:%M:%S") if now is not None else _stamp()
    component = _component(record)
    level = str(record.get("level", "INFO")).upper()
    trace = record.get("exception") or record.get("stack_trace")
    trace_text = f"\n{str(trace).rstrip()}" if trace else ""
    if not colour:
        return f"{stamp} {component:<8} {text}{trace_text}\n"
    tint = _LEVEL_COLOUR.get(level) or _STATUS_COLOUR.get(str(record.get("status")), "")
    body = f"{tint}{text}{trace_text}{_RESET}" if tint else text + trace_text
    return f"{_DIM}{stamp}{_RESET} {component:<8} {body}\n"


_stamped: tuple[int, str] = (-1, "")


def _stamp() -> str:
    """The local time of day, formatted once a second (a burst prints thousands a second)."""
    global _stamped
    second = int(time.time())
    if second != _stamped[0]:
        _stamped = (second, datetime.fromtimestamp(second).strftime("%H:%M:%S"))
    return _stamped[1]


def relay(source: int, target: int, colour: bool) -> None:
    """Every whole line read at once is rendered and written in one go: a burst of jobs
    writes thousands of lines a second, a write each cost the runner more than rendering
    them. A line is printed as soon as it has arrived whole."""
    with open(source, "rb", closefd=True) as lines, open(
        target, "w", encoding="utf-8", errors="replace", closefd=False
    ) as out:  # fmt: skip
        rest = b""
        while chunk := lines.read1(1 << 16):
            *whole, rest = (rest + chunk).split(b"\n")
            _write(out, "".join(render(raw.decode("utf-8", "replace") + "\n", colour)
                                for raw in whole))  # fmt: skip
        if rest:  # the last line, cut off by the end
            _write(out, render(rest.decode("utf-8", "replace"), colour))


def _write(out: TextIO, text: str) -> None:
    if text:
        with contextlib.suppress(OSError):
            out.write(text)
            out.flush()


@contextlib.contextmanager
def rendering(log_format: str) -> Iterator[None]:
    """While inside, what this process and its children write to stdout and stderr reaches
    the real stdout as human lines (``log_format`` "human"); "json" changes nothing."""
    if log_format != "human":
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    real_out, real_err = os.dup(1), os.dup(2)
    colour = os.isatty(real_out) and not os.environ.get("NO_COLOR")
    source, sink = os.pipe()
    os.dup2(sink, 1)
    os.dup2(sink, 2)
    os.close(sink)
    pump = threading.Thread(target=relay, args=(source, real_out, colour), name="console",
                            daemon=True)  # fmt: skip
    pump.start()
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(real_out, 1)  # the pipe's last writer here: EOF once the children are gone
        os.dup2(real_err, 2)
        pump.join(timeout=3)
        os.close(real_out)
        os.close(real_err)
