"""The stack that ``localstack/deploy.sh`` put in LocalStack: where it is, its clients, its
first API key, and the few operations the tests repeat (:class:`Stack`). Without a deployed
stack the tests are skipped, except under the tier's script (``ASYNCZ_LOCALSTACK_REQUIRED=1``),
where it fails them."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.exceptions import ClientError

REPO = Path(__file__).resolve().parents[2]
WORK = Path(os.environ.get("ASYNCZ_LS_WORK", REPO / ".work" / "localstack"))
ENDPOINT = "http://127.0.0.1:4566"
REGION = os.environ.get("AWS_DEFAULT_REGION", "us-east-1")


def _unavailable(reason: str) -> None:
    if os.environ.get("ASYNCZ_LOCALSTACK_REQUIRED") == "1":
        pytest.fail(f"LocalStack tier: {reason}", pytrace=False)
    pytest.skip(f"{reason} (run localstack/run-tests.sh)")


def _client(service: str) -> Any:
    return boto3.client(
        service,
        endpoint_url=ENDPOINT,
        region_name=REGION,
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )


def stage_key(outputs: dict[str, str]) -> str:
    """A stage's first API key: the ``api_key`` field of its ``ApiKeySecretArn`` secret."""
    secret = _client("secretsmanager").get_secret_value(SecretId=outputs["ApiKeySecretArn"])
    return str(json.loads(secret["SecretString"])["api_key"])


@dataclass
class Stack:
    """The deployed stack, with the few operations the tests repeat."""

    outputs: dict[str, str]
    http: httpx.Client
    lambda_client: Any
    cloudwatch: Any

    def submit(self, task: str, payload: dict[str, Any], max_retries: int = 0) -> str:
        resp = self.http.post(
            "/jobs", json={"task": task, "payload": payload, "max_retries": max_retries}
        )
        assert resp.status_code == 202, f"POST /jobs -> {resp.status_code}: {resp.text}"
        body = resp.json()
        assert body["status"] == "queued", body
        return str(body["job_id"])

    def job(self, job_id: str) -> dict[str, Any]:
        resp = self.http.get(f"/jobs/{job_id}")
        assert resp.status_code == 200, f"GET /jobs/{job_id} -> {resp.status_code}: {resp.text}"
        return dict(resp.json())

    def invoke(self, output_name: str, event: dict[str, Any] | None = None) -> dict[str, Any]:
        """Invoke one of the stack's functions synchronously; fail on a function error."""
        name = self.outputs[output_name]
        for attempt in range(10):
            try:
                resp = self.lambda_client.invoke(FunctionName=name, Payload=json.dumps(event or {}))
                break
            except ClientError as exc:
                # fleet and recovery have a reserved concurrency of 1: the schedule's run
                # of the same function may hold it for a moment.
                if exc.response["Error"]["Code"] != "TooManyRequestsException" or attempt == 9:
                    raise
                time.sleep(0.5 * (attempt + 1))
        body = resp["Payload"].read().decode()
        assert not resp.get("FunctionError"), f"{output_name} failed: {body}"
        return dict(json.loads(body)) if body and body != "null" else {}

    def function_env(self, output_name: str) -> dict[str, str]:
        config = self.lambda_client.get_function_configuration(
            FunctionName=self.outputs[output_name]
        )
        return dict(config.get("Environment", {}).get("Variables", {}))

    def wait_job(
        self,
        job_id: str,
        statuses: set[str],
        timeout: float,
        tick: Callable[[], None] | None = None,
        tick_every: float = 5.0,
    ) -> dict[str, Any]:
        """Poll the job until its status is one of ``statuses``; call ``tick`` now and then."""
        deadline = time.monotonic() + timeout
        next_tick = time.monotonic()
        job: dict[str, Any] = {}
        while time.monotonic() < deadline:
            if tick is not None and time.monotonic() >= next_tick:
                tick()
                next_tick = time.monotonic() + tick_every
            job = self.job(job_id)
            if job["status"] in statuses:
                return job
            time.sleep(0.5)
        raise AssertionError(f"job {job_id} not {sorted(statuses)} after {timeout:.0f} s: {job}")

    def wait_job_with_fleet(
        self, job_id: str, statuses: set[str], timeout: float
    ) -> dict[str, Any]:
        """``wait_job``, invoking the fleet function every 10 s (its schedule fires once a
        minute: the test does not wait for it)."""

        def tick() -> None:
            self.invoke("FleetFunctionName")

        return self.wait_job(job_id, statuses, timeout, tick=tick, tick_every=10)

    def wait_alarm(
        self, alarm_name: str, state: str, timeout: float, tick: Callable[[], None]
    ) -> dict[str, Any]:
        """Poll the alarm until ``state``, calling ``tick`` (e.g. recovery) every few seconds."""
        deadline = time.monotonic() + timeout
        alarm: dict[str, Any] = {}
        while time.monotonic() < deadline:
            tick()
            for _ in range(6):
                alarms = self.cloudwatch.describe_alarms(AlarmNames=[alarm_name])["MetricAlarms"]
                assert alarms, f"alarm {alarm_name} does not exist"
                alarm = alarms[0]
                if alarm["StateValue"] == state:
                    return alarm
                time.sleep(1)
        raise AssertionError(
            f"alarm {alarm_name} not {state} after {timeout:.0f} s: "
            f"{alarm.get('StateValue')} ({alarm.get('StateReason')})"
        )
