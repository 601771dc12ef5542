"""Fixtures for the tests against the stack that ``localstack/deploy.sh`` put in LocalStack.

Run the tier with ``localstack/run-tests.sh`` (start, deploy, test, stop). Run on their
own, these tests need a LocalStack started and deployed by ``localstack/start.sh`` and
``localstack/deploy.sh``; without one they are skipped, except under the tier's script
(``ASYNCZ_LOCALSTACK_REQUIRED=1``), where a missing stack fails them.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

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


@pytest.fixture(scope="session")
def outputs() -> dict[str, str]:
    """The stack's CfnOutputs, as written by localstack/deploy.sh."""
    path = WORK / "outputs.json"
    if not path.exists():
        _unavailable(f"no deployed stack ({path} missing)")
    try:
        httpx.get(f"{ENDPOINT}/_localstack/health", timeout=3).raise_for_status()
    except httpx.HTTPError as exc:
        _unavailable(f"LocalStack does not answer at {ENDPOINT}: {exc}")
    return json.loads(path.read_text())


def _client(service: str) -> Any:
    return boto3.client(
        service,
        endpoint_url=ENDPOINT,
        region_name=REGION,
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )


@pytest.fixture(scope="session")
def lambda_client(outputs: dict[str, str]) -> Any:
    from botocore.config import Config

    # Synchronous invokes of the recovery function can take a while on a busy box.
    return boto3.client(
        "lambda",
        endpoint_url=ENDPOINT,
        region_name=REGION,
        aws_access_key_id="test",
        aws_secret_access_key="test",
        config=Config(read_timeout=120, retries={"max_attempts": 0}),
    )


@pytest.fixture(scope="session")
def cloudwatch(outputs: dict[str, str]) -> Any:
    return _client("cloudwatch")


def stage_key(outputs: dict[str, str]) -> str:
    """A stage's first API key: the ``api_key`` field of its ``ApiKeySecretArn`` secret."""
    secret = _client("secretsmanager").get_secret_value(SecretId=outputs["ApiKeySecretArn"])
    return str(json.loads(secret["SecretString"])["api_key"])


@pytest.fixture(scope="session")
def api_key(outputs: dict[str, str]) -> str:
    """The stage's first key (every scope), read from its secret as docs/deploy.md says."""
    return stage_key(outputs)


@pytest.fixture(scope="session")
def api_base(outputs: dict[str, str]) -> str:
    """The REST API's stage URL through LocalStack's path-style execute-api route.

    ``ApiUrl`` names ``<id>.execute-api.localhost.localstack.cloud``, which does not
    resolve everywhere; the path-style route reaches the same stage.
    """
    stage = urlparse(outputs["ApiUrl"]).path.strip("/").split("/")[0]
    return f"{ENDPOINT}/_aws/execute-api/{outputs['ApiId']}/{stage}"


@pytest.fixture(scope="session")
def http(api_base: str, api_key: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=api_base, headers={"x-api-key": api_key}, timeout=60) as client:
        yield client


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


@pytest.fixture(scope="session")
def stack(
    outputs: dict[str, str], http: httpx.Client, lambda_client: Any, cloudwatch: Any
) -> Stack:
    return Stack(outputs=outputs, http=http, lambda_client=lambda_client, cloudwatch=cloudwatch)
