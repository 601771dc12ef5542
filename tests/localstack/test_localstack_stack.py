"""The `local` stage deployed in LocalStack, driven only through its AWS interfaces.

Jobs go in through API Gateway (REST, API key), workers are Lambda invocations started
by the fleet function, recovery is the recovery function, and the DLQ alarm is a
CloudWatch alarm on the DLQDepth gauge recovery publishes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.support.localstack import WORK

if TYPE_CHECKING:
    from tests.support.localstack import Stack

pytestmark = pytest.mark.localstack

# How start.sh ran LocalStack: Lambda sandboxes are host processes, or Docker containers.
MODE = (WORK / "mode").read_text().strip() if (WORK / "mode").exists() else "host"


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


def worker_containers(function_name: str) -> list[str]:
    """Ids of the Lambda containers running ``function_name`` (Docker mode)."""
    fragment = function_name.lower().replace("_", "-")
    out = subprocess.run(
        ["docker", "ps", "-q", "--filter", f"name=lambda-{fragment}-"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.split()


def worker_sandboxes(function_name: str) -> list[str]:
    """Whatever runs the function's invocations right now: host pids or containers."""
    if MODE == "docker":
        return worker_containers(function_name)
    return [str(pid) for pid in worker_processes(function_name)]


def kill_sandboxes(sandboxes: list[str]) -> None:
    """SIGKILL them: what a Lambda sandbox crash looks like to the job."""
    if MODE == "docker":
        subprocess.run(["docker", "kill", *sandboxes], capture_output=True, check=True)
        return
    for pid in sandboxes:
        os.kill(int(pid), signal.SIGKILL)


@pytest.fixture
def api_without_wake_up(stack: Stack) -> Iterator[None]:
    """The api function with its scale-from-zero wake-up off, so only the fleet starts workers."""
    name = stack.outputs["ApiFunctionName"]
    client = stack.lambda_client
    env = client.get_function_configuration(FunctionName=name)["Environment"]["Variables"]

    def set_env(variables: dict[str, str]) -> None:
        client.update_function_configuration(
            FunctionName=name, Environment={"Variables": variables}
        )
        client.get_waiter("function_updated_v2").wait(FunctionName=name)

    set_env({**env, "ASYNCZ_WAKE_WORKER": "false"})
    yield
    set_env(env)


def test_a_missing_or_wrong_key_is_refused_through_api_gateway(api_base: str) -> None:
    with httpx.Client(base_url=api_base, timeout=30) as anonymous:
        resp = anonymous.post("/jobs", json={"task": "echo", "payload": {}})
        assert (resp.status_code, resp.json()["error"]) == (401, "unauthorized"), resp.text
        resp = anonymous.post(
            "/jobs", json={"task": "echo", "payload": {}}, headers={"x-api-key": "not-the-key"}
        )
        assert (resp.status_code, resp.json()["error"]) == (401, "unauthorized"), resp.text


def test_job_submitted_through_api_gateway_is_run_by_a_fleet_started_worker(
    stack: Stack, api_without_wake_up: None
) -> None:
    job_id = stack.submit("echo", {"hello": "localstack"})
    # The fleet function starts workers for the backlog (its schedule fires once a
    # minute; invoke it directly rather than wait). With the api's wake-up off, any
    # live worker was started by the fleet too, and so was a starting one: the scheduled
    # tick can fire at the same moment, and then the first of the two starts the worker
    # and the other sees it as starting.
    summary = stack.invoke("FleetFunctionName")
    assert summary["backlog"] >= 1 or summary["live_workers"] >= 1, summary
    assert summary["started"] + summary["live_workers"] + summary["starting_workers"] >= 1, summary
    job = stack.wait_job_with_fleet(job_id, {"completed", "dead"}, timeout=90)
    assert job["status"] == "completed", job
    assert job["result"] == {"hello": "localstack"}, job
    # The worker ran as a Lambda invocation of the worker function (a host process, or a
    # container in Docker mode), still polling for work.
    assert worker_sandboxes(stack.outputs["WorkerFunctionName"]), "no worker sandbox"


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
    job = stack.wait_job_with_fleet(job_id, {"processing", "completed", "dead"}, timeout=60)
    assert job["status"] == "processing", job

    # Kill every sandbox of the worker function: the job's worker dies mid-task.
    victims = worker_sandboxes(worker_fn)
    assert victims, "no worker sandbox to kill"
    kill_sandboxes(victims)
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
    job = stack.wait_job_with_fleet(job_id, {"completed", "dead"}, timeout=120)
    assert job["status"] == "completed", job
    assert job["attempts"] >= 2, job


def _items(body: Any) -> list[dict[str, Any]]:
    if isinstance(body, list):
        return body
    for key in ("attempts", "items"):
        if isinstance(body.get(key), list):
            return list(body[key])
    raise AssertionError(f"no attempt list in {body}")


def test_a_batch_goes_through_api_gateway_with_the_python_client(
    api_base: str, api_key: str
) -> None:
    from asyncz.client import Client, InvalidInput

    with Client(api_base, api_key, timeout=60) as client:
        jobs = client.submit_many([{"task": "echo", "payload": {"i": i}} for i in range(3)])
        assert len({j.id for j in jobs}) == 3 and not any(j.duplicate for j in jobs)
        assert client.get(jobs[1].id).payload == {"i": 1}
        again = client.submit_many([{"task": "echo", "idempotency_key": jobs[0].idempotency_key}])
        assert again[0].id == jobs[0].id and again[0].duplicate  # the existing job
        with pytest.raises(InvalidInput) as info:
            client.submit_many([{"task": "echo"}, {"task": "no_such_task"}])
        assert info.value.index == 1 and info.value.code == "unknown_task"
