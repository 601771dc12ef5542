"""How the ``asyncz dev`` console words each kind of line (the whole console is tested
through ``asyncz dev`` in tests/integration/test_dev_console.py)."""

from __future__ import annotations

import json
import os
import threading
import time
from datetime import datetime

import pytest

from asyncz.jobs import Lease
from asyncz.local.console import relay, render
from asyncz.worker.outcomes import outcome_line

pytestmark = pytest.mark.unit

NOON = datetime(2026, 12, 5, 12, 0, 1)


def line(**record: object) -> str:
    return json.dumps(record) + "\n"


def outcome(task: str, attempt: int, status: str, ms: float, error: str | None = None) -> str:
    """The line the worker writes for an attempt's outcome."""
    lease = Lease(
        job_id="1a2b3c4d-0000", token="t", task=task, payload={}, queue="default", priority=0,
        attempt=attempt, attempt_base=0, max_retries=3, timeout_seconds=30,
    )  # fmt: skip
    return outcome_line(lease, status, ms, error, trace_id="ab")


def test_each_kind_of_line_is_one_short_sentence() -> None:
    access = line(
        timestamp="t",
        level="INFO",
        component="gateway",
        message="POST /jobs 202",
        request_id="r",
        status=202,
        ms=3.1,
    )
    assert render(access, False, NOON) == "12:00:01 api      POST /jobs 202 3.1 ms\n"
    assert render(outcome("echo", 1, "completed", 4.0), False, NOON) == (
        "12:00:01 worker   job 1a2b3c4d echo completed in 4 ms (attempt 1)\n"
    )
    retry = outcome("fail", 2, "retrying", 1.5, "TaskFailedError: no")
    assert render(retry, False, NOON).endswith(
        "fail retrying in 1.5 ms (attempt 2): TaskFailedError: no\n"
    )
    task_line = line(
        level="INFO",
        message="building the report",
        function_name="asyncz-worker",
        job_id="1a2b3c4d-0000",
        task="report",
        attempt=1,
        queue="q",
        trace_id="ab",
    )
    assert render(task_line, False, NOON) == (
        "12:00:01 worker   [job 1a2b3c4d report #1] building the report\n"
    )
    assert render(line(_aws={}, JobsSubmitted=[1.0]), False, NOON) == ""  # metrics left out
    assert render("  plain text, as written\n", False, NOON) == "  plain text, as written\n"


def test_an_error_stands_out_with_its_traceback_once_and_colour_only_when_asked() -> None:
    error = line(
        level="ERROR",
        message="task crashed",
        function_name="asyncz-worker",
        exception='Traceback (most recent call last):\n  File "t.py"\nValueError: x',
    )
    plain = render(error, False, NOON)
    assert plain.count("Traceback") == 1 and plain.endswith("ValueError: x\n")
    assert "\033[" not in plain
    coloured = render(error, True, NOON)
    assert "\033[31m" in coloured and coloured.count("Traceback") == 1
    completed = render(outcome("echo", 1, "completed", 1), True, NOON)
    assert "\033[32m" in completed  # completed in green


def test_lines_cut_across_reads_are_printed_whole_in_order_and_the_last_one_unended() -> None:
    source, sink = os.pipe()
    out_read, out_write = os.pipe()
    pump = threading.Thread(target=relay, args=(source, out_write, False))
    pump.start()
    text = outcome("echo", 1, "completed", 4.0) + "plain é\n" + line(_aws={}) + "tail"
    data = text.encode()
    for cut in (3, 40, 41, len(data) - 2):  # inside a JSON line, a character, the tail
        os.write(sink, data[:cut])
        data = data[cut:]
        time.sleep(0.01)  # each piece its own read
    os.write(sink, data)
    os.close(sink)
    pump.join(5)
    os.close(out_write)
    with os.fdopen(out_read) as printed:
        got = printed.read().splitlines()
    assert [g.split(" ", 1)[1] for g in got[:1]] == [
        "worker   job 1a2b3c4d echo completed in 4 ms (attempt 1)"
    ]
    assert got[1:] == ["plain é", "tail"]  # the metrics line left out
