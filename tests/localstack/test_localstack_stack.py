"""The `local` stage deployed in LocalStack, driven only through its AWS interfaces.

Jobs go in through API Gateway (REST, API key), workers are Lambda invocations started
by the fleet function, recovery is the recovery function, and the DLQ alarm is a
CloudWatch alarm on the DLQDepth gauge recovery publishes.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

if TYPE_CHECKING:
    from tests.localstack.conftest import Stack

pytestmark = pytest.mark.localstack


def worker_processes(function_name: str) -> list[int]:
    """Pids of the host processes running ``function_name`` (hostprocess executor)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(a.endswith(b"bootstrap.py") for a in argv) and function_name.encode() in argv:
            pids.append(int(proc.name))
    return pids


def test_missing_api_key_is_rejected_by_api_gateway(api_base: str) -> None:
    with httpx.Client(base_url=api_base, timeout=30) as anonymous:
        resp = anonymous.post("/jobs", json={"task": "echo", "payload": {}})
        assert resp.status_code in (401, 403), resp.text
        resp = anonymous.post(
            "/jobs", json={"task": "echo", "payload": {}}, headers={"x-api-key": "not-the-key"}
        )
        assert resp.status_code in (401, 403), resp.text


def test_job_submitted_through_api_gateway_is_run_by_a_fleet_started_worker(
    stack: Stack,
) -> None:
    job_id = stack.submit("echo", {"hello": "localstack"})
    # The fleet function starts workers for the backlog (its schedule fires once a
    # minute; invoke it directly rather than wait).
    summary = stack.invoke("FleetFunctionName")
    assert summary["started"] + summary["live_workers"] >= 1, summary
    job = stack.wait_job(
        job_id,
        {"completed", "dead"},
        timeout=90,
        tick=lambda: stack.invoke("FleetFunctionName"),
        tick_every=10,
    )
    assert job["status"] == "completed", job
    assert job["result"] == {"hello": "localstack"}, job
    # The worker ran as a Lambda invocation, i.e. as a host process of the worker function.
    assert worker_processes(stack.outputs["WorkerFunctionName"]), "no worker host process"


def test_dead_job_raises_dlq_alarm_and_replay_clears_it(stack: Stack) -> None:
    alarm = stack.outputs["DlqAlarmName"]
    recover = lambda: stack.invoke("RecoveryFunctionName")  # noqa: E731
    start_workers = lambda: stack.invoke("FleetFunctionName")  # noqa: E731

    # A `fail` job with no retries ends dead, with its error kept.
    failed = stack.submit("fail", {"message": "broken on purpose"}, max_retries=0)
    job = stack.wait_job(failed, {"dead", "completed"}, timeout=90, tick=start_workers)
    assert job["status"] == "dead", job
    assert "broken on purpose" in (job.get("last_error") or ""), job

    # A `flaky` job that fails its first attempt dies too, but can succeed on replay.
    flaky = stack.submit("flaky", {"failures": 1}, max_retries=0)
    job = stack.wait_job(flaky, {"dead", "completed"}, timeout=90, tick=start_workers)
    assert job["status"] == "dead", job

    gauges = recover()["gauges"]
    assert gauges["DLQDepth"] >= 2, gauges
    state = stack.wait_alarm(alarm, "ALARM", timeout=60, tick=recover)
    assert state["StateValue"] == "ALARM"

    # Replay through the API: the flaky job runs again and completes.
    resp = stack.http.post(f"/dlq/{flaky}/replay")
    assert resp.status_code in (200, 202), resp.text
    job = stack.wait_job(flaky, {"completed", "dead"}, timeout=90, tick=start_workers)
    assert job["status"] == "completed", job

    # The `fail` job would only die again: purge it, and the DLQ is empty.
    resp = stack.http.delete(f"/dlq/{failed}")
    assert resp.status_code in (200, 204), resp.text

    gauges = recover()["gauges"]
    assert gauges["DLQDepth"] == 0, gauges
    state = stack.wait_alarm(alarm, "OK", timeout=60, tick=recover)
    assert state["StateValue"] == "OK"
    latest = _latest_datapoint(stack, "DLQDepth")
    assert latest == 0, f"latest DLQDepth datapoint is {latest}"


def _latest_datapoint(stack: Stack, metric: str) -> float | None:
    now = time.time()
    points = stack.cloudwatch.get_metric_statistics(
        Namespace="AsyncZ",
        MetricName=metric,
        StartTime=now - 120,
        EndTime=now + 10,
        Period=10,
        Statistics=["Maximum"],
    )["Datapoints"]
    if not points:
        return None
    return float(max(points, key=lambda p: p["Timestamp"])["Maximum"])


def test_job_of_a_killed_worker_is_recovered_by_the_recovery_function(stack: Stack) -> None:
    worker_fn = stack.outputs["WorkerFunctionName"]
    lease_timeout = float(
        stack.function_env("RecoveryFunctionName").get("ASYNCZ_LEASE_TIMEOUT_SECONDS", 60)
    )
    heartbeat = float(stack.function_env("WorkerFunctionName").get("ASYNCZ_HEARTBEAT_SECONDS", 10))
    job_id = stack.submit("sleep", {"seconds": 30}, max_retries=2)
    job = stack.wait_job(
        job_id,
        {"processing", "completed", "dead"},
        timeout=60,
        tick=lambda: stack.invoke("FleetFunctionName"),
        tick_every=10,
    )
    assert job["status"] == "processing", job

    # Kill every host process of the worker function: the job's worker dies mid-task.
    victims = worker_processes(worker_fn)
    assert victims, "no worker process to kill"
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    killed_at = time.monotonic()

    # Only the recovery function brings the job back, once its lease has gone stale: it
    # records the attempt as `lost` and re-queues the job. (Invoked here every few
    # seconds; its once-a-minute schedule may get there first, which is as good.)
    deadline = killed_at + lease_timeout + 60
    outcomes: list[str] = []
    while time.monotonic() < deadline:
        stack.invoke("RecoveryFunctionName")
        outcomes = [a["outcome"] for a in _items(stack.http.get(f"/jobs/{job_id}/attempts").json())]
        if "lost" in outcomes:
            break
        time.sleep(2)
    recovered_after = time.monotonic() - killed_at
    assert "lost" in outcomes, (
        f"no lost attempt {lease_timeout + 60:.0f} s after the kill: {outcomes}"
    )
    # The last heartbeat was at most one interval before the kill.
    assert recovered_after >= lease_timeout - heartbeat - 1, (
        f"recovered {recovered_after:.0f} s after the kill,"
        f" before the {lease_timeout:.0f} s lease expired"
    )

    # At least once: a new worker runs the job again to completion.
    job = stack.wait_job(
        job_id,
        {"completed", "dead"},
        timeout=120,
        tick=lambda: stack.invoke("FleetFunctionName"),
        tick_every=10,
    )
    assert job["status"] == "completed", job
    assert job["attempts"] >= 2, job


def _items(body: Any) -> list[dict[str, Any]]:
    if isinstance(body, list):
        return body
    for key in ("attempts", "items"):
        if isinstance(body.get(key), list):
            return list(body[key])
    raise AssertionError(f"no attempt list in {body}")
