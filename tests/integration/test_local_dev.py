"""``asyncz dev`` as a user runs it: a subprocess on a free port, driven over HTTP.

Uses the test servers (ASYNCZ_TEST_DATABASE_URL / ASYNCZ_TEST_REDIS_URL, else the system ones)
with its own database and Redis db named after the test ones (``tests.support.databases``), so
it never meets other tests' data.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.support.devrun import (
    API_KEY,
    TERMINAL,
    DevRun,
    free_port,
    request,
    submit_many,
    wait_terminal,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(240)]


def call(base: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    return request(base, API_KEY, method, path, body)


def test_dev_completes_200_jobs_and_loses_none_across_sigkill(
    dev_env: dict[str, str], tmp_path: Path, runs: list[DevRun]
) -> None:
    data_dir = tmp_path / "data"
    port = free_port()

    first = DevRun(data_dir, dev_env, API_KEY, port=port, args=[])  # the fleet controller decides
    runs.append(first)
    first.wait_healthy()
    assert "given by ASYNCZ_DATABASE_URL" in first.log()
    assert not (data_dir / "postgres").exists() and not (data_dir / "redis").exists()

    ids = submit_many(
        first.url, API_KEY, [{"task": "echo", "payload": {"n": i}} for i in range(200)]
    )
    jobs = wait_terminal(first.url, API_KEY, ids, timeout=90)
    assert {job["status"] for job in jobs.values()} == {"completed"}
    assert jobs[ids[7]]["result"] == {"n": 7}

    sleepers = submit_many(
        first.url,
        API_KEY,
        [{"task": "sleep", "payload": {"seconds": 2}, "max_retries": 5} for _ in range(30)],
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        states = [call(first.url, "GET", f"/jobs/{j}")[1]["status"] for j in sleepers]
        if states.count("processing") >= 3:
            break
        time.sleep(0.1)
    assert "processing" in states, states

    os.killpg(first.pgid, signal.SIGKILL)  # the whole run dies at once: no cleanup at all
    first.proc.wait(10)
    time.sleep(0.5)
    assert first.live_group_members() == []

    second = DevRun(data_dir, dev_env, API_KEY, port=port, args=["--workers", "2"])
    runs.append(second)
    second.wait_healthy()
    jobs = wait_terminal(second.url, API_KEY, sleepers, timeout=120)
    assert len(jobs) == len(sleepers)
    assert {job["status"] for job in jobs.values()} == {"completed"}, jobs

    outcomes = []
    for job_id in sleepers:
        status, attempts = call(second.url, "GET", f"/jobs/{job_id}/attempts")
        assert status == 200
        outcomes += [a["outcome"] for a in attempts["items"]]
    assert "lost" in outcomes  # the attempts cut by the SIGKILL are on record

    os.killpg(second.pgid, signal.SIGINT)  # Ctrl-C
    assert second.proc.wait(30) == 0, second.log()[-3000:]
    time.sleep(0.5)
    assert second.live_group_members() == []
    assert "supervisor stopped" in " ".join(second.log().split())  # the console's last line


def test_dev_ends_a_cancel_refuses_bad_input_and_restores_a_flushed_redis(
    dev_env: dict[str, str], tmp_path: Path, runs: list[DevRun]
) -> None:
    """Against `asyncz dev`: a cancel during a timing-out attempt ends cancelled,
    an undeclared queue is refused, NUL and NaN payloads get a 4xx with a code, and after a
    Redis flush every queued row comes back however many runs of recovery it takes."""
    env = {
        **dev_env,
        "ASYNCZ_HEARTBEAT_SECONDS": "30",  # the cancel must not reach the worker in time
        "ASYNCZ_LEASE_TIMEOUT_SECONDS": "90",
        "ASYNCZ_RECOVERY_BATCH_SIZE": "50",
        "ASYNCZ_RECOVERY_MAX_BATCHES": "2",
    }
    dev = DevRun(tmp_path / "data", env, API_KEY, port=free_port(), args=["--workers", "1"])
    runs.append(dev)
    dev.wait_healthy()

    [job] = submit_many(
        dev.url, API_KEY, [{"task": "sleep", "payload": {"seconds": 4}, "timeout_seconds": 2}]
    )
    deadline = time.monotonic() + 30
    while call(dev.url, "GET", f"/jobs/{job}")[1]["status"] != "processing":
        assert time.monotonic() < deadline, "the sleep job never started"
        time.sleep(0.05)
    assert call(dev.url, "POST", f"/jobs/{job}/cancel")[0] == 200
    assert wait_terminal(dev.url, API_KEY, [job], timeout=30)[job]["status"] == "cancelled"

    status, body = call(dev.url, "POST", "/jobs", {"task": "echo", "queue": "emails"})
    assert (status, body["error"]) == (422, "unknown_queue")
    status, body = call(dev.url, "POST", "/jobs", {"task": "echo", "payload": {"a": "x\u0000"}})
    assert (status, body["error"]) == (422, "invalid_payload")
    req = urllib.request.Request(
        dev.url + "/jobs", data=b'{"task": "echo", "payload": {"a": NaN}}', method="POST"
    )
    req.add_header("x-api-key", API_KEY)
    req.add_header("Content-Type", "application/json")
    with pytest.raises(urllib.error.HTTPError) as nan:
        urllib.request.urlopen(req, timeout=30)
    assert nan.value.code == 422 and json.loads(nan.value.read())["error"] == "invalid_payload"

    delayed = submit_many(
        dev.url,
        API_KEY,
        [{"task": "echo", "payload": {"i": i}, "delay_seconds": 3600} for i in range(300)],
    )
    r = redis.Redis.from_url(env["ASYNCZ_REDIS_URL"])
    r.flushdb()  # one recovery run restores at most 100: it takes three
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        back = sum(r.zcard(k) for k in r.scan_iter("asyncz:*:delayed"))
        if back == len(delayed):
            break
        time.sleep(0.5)
    assert back == len(delayed), f"{back} of {len(delayed)} delayed jobs back in Redis"


SHOUT = """from asyncz.tasks import task


@task("shout")
def shout(payload):
    return {"text": payload["text"].upper()}
"""


def _dev_in(folder: Path, env: dict[str, str], *args: str) -> tuple[subprocess.Popen[bytes], Path]:
    log_path = folder / "dev.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "asyncz", "dev", "--quiet", *args],
            cwd=folder,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return proc, log_path


def test_dev_runs_the_users_own_tasks_from_the_current_folder(
    dev_env: dict[str, str], tmp_path: Path
) -> None:
    project = tmp_path / "myproject"  # outside the repository, like a user's folder
    project.mkdir()
    (project / "mytasks.py").write_text(SHOUT)
    port = free_port()
    env = {**dev_env, "PYTHONPATH": ""}
    proc, log_path = _dev_in(project, env, "--tasks", "mytasks", "--port", str(port), "--reload")
    url = f"http://127.0.0.1:{port}"
    try:
        dev = DevRun.__new__(DevRun)  # reuse its health wait on our process
        dev.proc, dev.url, dev.log_path, dev.api_key = proc, url, log_path, API_KEY
        dev.wait_healthy()
        status, body = call(url, "POST", "/jobs", {"task": "shout", "payload": {"text": "hi"}})
        assert status == 202, body
        done = wait_terminal(url, API_KEY, [body["job_id"]], timeout=60)[body["job_id"]]
        assert (done["status"], done["result"]) == ("completed", {"text": "HI"}), done

        # --reload: the changed task runs after a restart of everything
        (project / "mytasks.py").write_text(SHOUT.replace(".upper()", ".upper() + '!'"))
        deadline = time.monotonic() + 120
        job_id = None
        while time.monotonic() < deadline:
            try:  # while it restarts, a call may be refused or answered 503: ask again
                if job_id is None:
                    status, body = call(
                        url, "POST", "/jobs", {"task": "shout", "payload": {"text": "a"}}
                    )
                    job_id = body["job_id"] if status == 202 else None
                else:
                    status, job = call(url, "GET", f"/jobs/{job_id}")
                    if status == 200 and job["status"] in TERMINAL:
                        if job["result"] == {"text": "A!"}:
                            break
                        job_id = None  # the old code ran it: try a new job
            except OSError:
                pass
            time.sleep(0.3)
        else:
            raise AssertionError(f"the edit never ran:\n{log_path.read_text()[-3000:]}")
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(40)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def test_dev_stops_at_once_naming_a_task_module_that_does_not_import(
    dev_env: dict[str, str], tmp_path: Path
) -> None:
    env = {**dev_env, "ASYNCZ_TASK_MODULES": "no_such_tasks"}
    proc, log_path = _dev_in(tmp_path, env, "--port", str(free_port()))
    try:
        code = proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    out = log_path.read_text()
    assert code != 0 and "no_such_tasks" in out and "ModuleNotFoundError" in out, out


def test_dev_serves_the_http_apis_events_as_lean_and_serverless_deploy_them(
    dev_env: dict[str, str], tmp_path: Path, runs: list[DevRun]
) -> None:
    """``--api-events http``: the api sandboxes get payload format 2.0 events (the HTTP API
    of ``-c api=http``) and answer as they do behind the REST API."""
    run = DevRun(
        tmp_path / "data", dev_env, API_KEY, port=free_port(), args=["--api-events", "http"]
    )
    runs.append(run)
    run.wait_healthy()
    job = run.submit({"task": "echo", "payload": {"via": "http api"}})
    assert run.wait_status(job, {"completed"})["result"] == {"via": "http api"}
    status, page = call(run.url, "GET", "/jobs?status=completed&limit=1")
    assert status == 200 and [j["job_id"] for j in page["items"]] == [job]
    assert request(run.url, "not-a-key", "GET", "/jobs")[0] == 401
    assert call(run.url, "POST", "/jobs", {"task": "nope"})[1]["error"] == "unknown_task"
    with urllib.request.urlopen(run.url + "/ui", timeout=30) as page_reply:
        assert page_reply.status == 200 and b"AsyncZ dashboard" in page_reply.read()
    bad = subprocess.run(
        [sys.executable, "-m", "asyncz", "dev", "--api-events", "soap"],
        capture_output=True, text=True, timeout=60, env=dev_env,
    )  # fmt: skip
    assert bad.returncode == 2 and "invalid choice: 'soap'" in bad.stderr
