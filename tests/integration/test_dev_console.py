"""The console of ``asyncz dev`` as a person sees it: a submitted and completed job is two
short human lines (the request, the outcome), and its lifecycle event a third (no bus is
configured: the events function prints it), also on a database whose outbox was turned off;
``--log-format json`` gives JSON lines."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from asyncz.store.migrations import apply_migrations, set_outbox
from tests.support.databases import empty_backends
from tests.support.devrun import API_KEY, DevRun, dev_env
from tests.support.ledger import rows

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(180)]

HUMAN = re.compile(r"^\d\d:\d\d:\d\d \S+\s+\S")


def run_one_job(tmp_path: Path, *args: str, outbox_off: bool = False) -> tuple[str, str, list[str]]:
    """(job id, the whole console, the console's lines about the job), for one ``echo``
    submitted to a fresh ``asyncz dev`` that is stopped with Ctrl-C once it completed.
    ``outbox_off``: the database is migrated before, with its outbox's triggers off."""
    database_url, redis_url = empty_backends("console", 4)
    if outbox_off:  # as `ASYNCZ_OUTBOX=off asyncz migrate` leaves it
        apply_migrations(database_url)
        set_outbox(database_url, on=False)
    env = {**dev_env(database_url, redis_url, API_KEY), "ASYNCZ_FLEET_INTERVAL_SECONDS": "60",
           "ASYNCZ_RECOVERY_INTERVAL_SECONDS": "60"}  # fmt: skip
    run = DevRun(tmp_path / "data", env, API_KEY, quiet=False, args=["--workers", "1", *args])
    try:
        run.wait_healthy()
        job_id = run.submit({"task": "echo", "payload": {"hello": "console"}})
        deadline = time.monotonic() + 60
        query = "SELECT status FROM jobs WHERE id = %(id)s"
        while rows(database_url, query, {"id": job_id})[0]["status"] != "completed":
            assert time.monotonic() < deadline, run.log()[-3000:]
            time.sleep(0.1)
        # the completion wakes the events function, which prints the event
        while f'"job_id": "{job_id}"' not in run.log():
            assert time.monotonic() < deadline, run.log()[-3000:]
            time.sleep(0.1)
        time.sleep(0.5)  # the outcome line is written as the attempt ends
        os.killpg(run.pgid, signal.SIGINT)
        try:
            code = run.proc.wait(60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"asyncz dev still runs 60 s after Ctrl-C:\n{run.log()[-3000:]}")
        assert code == 0, run.log()[-3000:]
    finally:
        run.stop()
    console = run.log()
    about = [line for line in console.splitlines()
             if job_id[:8] in line or "POST /jobs" in line]  # fmt: skip
    return job_id, console, about


def test_a_submitted_and_completed_job_is_two_human_lines_and_its_event(tmp_path: Path) -> None:
    job_id, console, about = run_one_job(tmp_path)
    assert len(about) == 3, console[-3000:]
    # in either order: the job may end before the request's access line is written
    request, outcome, event = sorted(
        about, key=lambda line: (line.startswith("event "), " worker " in line)
    )
    assert event.startswith("event asyncz.job.completed {"), event  # as the sink prints it
    assert json.loads(event.split(" asyncz.job.completed ", 1)[1])["data"]["job_id"] == job_id
    assert HUMAN.match(request) and re.search(r" api +POST /jobs 202 [\d.]+ ms$", request)
    assert re.search(rf" worker +job {job_id[:8]} echo completed in [\d.]+ ms \(attempt 1\)$",
                     outcome)  # fmt: skip
    assert "\033[" not in console  # no colour when the output is not a terminal
    events = [line for line in console.splitlines() if line.startswith("{")]
    assert events == [], events[:3]  # no raw JSON (metrics left out)
    assert re.search(r" supervisor +stopped$", console.rstrip().splitlines()[-1])


def test_json_format_gives_json_lines(tmp_path: Path) -> None:
    job_id, _, about = run_one_job(tmp_path, "--log-format", "json")
    records = [json.loads(line) for line in about if "asyncz.job.completed" not in line]
    # in either order: the job may end before the request's access line is written
    request, outcome = sorted(records, key=lambda r: "job_id" in r)
    assert request["message"] == "POST /jobs 202", records
    assert outcome["job_id"] == job_id and outcome["attempt"] == 1, records
    assert outcome["status"] == "completed"  # the worker's outcome line, as written


def test_dev_turns_on_an_outbox_a_migration_turned_off(tmp_path: Path) -> None:
    """Its console is a sink: a database whose triggers were off still gets its events."""
    job_id, console, about = run_one_job(tmp_path, outbox_off=True)
    assert re.search(r" supervisor +outbox turned on$", console, re.MULTILINE), console[:3000]
    [event] = [line for line in about if line.startswith("event ")]
    assert json.loads(event.split(" asyncz.job.completed ", 1)[1])["data"]["job_id"] == job_id
