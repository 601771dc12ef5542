"""examples/sizes, a user's project, deployed in LocalStack beside our own deployment:
its own task, importing its own dependency, runs through API Gateway to completed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest

from tests.support.localstack import ENDPOINT, WORK, Stack, _unavailable, stage_key

pytestmark = pytest.mark.localstack


@pytest.fixture(scope="module")
def example(lambda_client: Any, cloudwatch: Any) -> Iterator[Stack]:
    path = WORK / "example-outputs.json"
    if not path.exists():
        _unavailable(f"the example is not deployed ({path} missing)")
    outputs = json.loads(path.read_text())
    key = stage_key(outputs)
    stage = urlparse(outputs["ApiUrl"]).path.strip("/").split("/")[0]
    base = f"{ENDPOINT}/_aws/execute-api/{outputs['ApiId']}/{stage}"
    with httpx.Client(base_url=base, headers={"x-api-key": key}, timeout=60) as http:
        yield Stack(outputs=outputs, http=http, lambda_client=lambda_client, cloudwatch=cloudwatch)


def test_example_custom_task_completes_with_its_own_result(
    example: Stack, outputs: dict[str, str]
) -> None:
    # A deployment of its own: other functions than ours, which import the example's tasks.
    assert example.outputs["WorkerFunctionName"] != outputs["WorkerFunctionName"]
    assert example.function_env("WorkerFunctionName")["ASYNCZ_TASK_MODULES"] == "tasks"

    job_id = example.submit("human_size", {"bytes": 3_000_000})
    job = example.wait_job(
        job_id,
        {"completed", "dead"},
        timeout=120,
        tick=lambda: example.invoke("FleetFunctionName"),
        tick_every=10,
    )
    assert job["status"] == "completed", job
    assert job["result"] == {"text": "3.0 MB"}, job  # humanize.naturalsize, from the layer


def test_example_rejects_tasks_it_does_not_define(example: Stack) -> None:
    # Our built-ins are there; a name no module registered is refused at submit.
    resp = example.http.post("/jobs", json={"task": "no_such_task", "payload": {}})
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"] == "unknown_task", resp.text
