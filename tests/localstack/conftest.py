"""Fixtures for the tests against the stack that ``localstack/deploy.sh`` put in LocalStack.

Run the tier with ``localstack/run-tests.sh`` (start, deploy, test, stop). Run on their
own, these tests need a LocalStack started and deployed by ``localstack/start.sh`` and
``localstack/deploy.sh``; without one they are skipped, except under the tier's script
(``ASYNCZ_LOCALSTACK_REQUIRED=1``), where a missing stack fails them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

import boto3
import httpx
import pytest

from tests.support.localstack import ENDPOINT, REGION, WORK, Stack, _client, _unavailable, stage_key


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


@pytest.fixture(scope="session")
def stack(
    outputs: dict[str, str], http: httpx.Client, lambda_client: Any, cloudwatch: Any
) -> Stack:
    return Stack(outputs=outputs, http=http, lambda_client=lambda_client, cloudwatch=cloudwatch)
