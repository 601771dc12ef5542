"""Lambda semantics of the LocalStack the tier runs (host mode: the hostprocess executor).

A throwaway function with a layer, created through the Lambda API: the handler sees its
layer, its environment and LocalStack's endpoint, runs on the main thread, and errors,
timeouts, crashes and import failures come back shaped as AWS Lambda shapes them.
"""

from __future__ import annotations

import io
import json
import os
import time
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

pytestmark = pytest.mark.localstack

HANDLER = """
import asyncio, os, tempfile, threading, time
import probe_layer

def handler(event, context):
    action = event.get("action")
    if action == "raise":
        raise ValueError("raised on purpose")
    if action == "sleep":
        time.sleep(event["seconds"])
    if action == "exit":
        os._exit(3)
    if action == "tmp":
        probe = os.path.join(tempfile.gettempdir(), event["name"])
        with open(probe, "a") as f:
            f.write("x")
        return {"size": os.path.getsize(probe)}
    loop = asyncio.new_event_loop()
    try:
        answer = loop.run_until_complete(asyncio.sleep(0, result=42))
    finally:
        loop.close()
    import boto3
    account = boto3.client("sts").get_caller_identity()["Account"]
    return {
        "layer": probe_layer.VALUE,
        "main_thread": threading.current_thread() is threading.main_thread(),
        "remaining_ms": context.get_remaining_time_in_millis(),
        "request_id": context.aws_request_id,
        "function_name": context.function_name,
        "env": os.environ.get("PROBE_SETTING"),
        "account": account,
        "answer": answer,
        "pid": os.getpid(),
    }
"""


TIMEOUT_S = 6


def _zip(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return buf.getvalue()


@pytest.fixture(scope="module")
def probe(lambda_client: Any) -> Iterator[dict[str, str]]:
    """A python3.12 function with a layer and a 6 s timeout, and one whose import fails.
    LocalStack counts a fresh sandbox's start (the handler imports boto3) inside the
    timeout: 3 s was too little for a cold start on a loaded 2-core machine."""
    suffix = uuid.uuid4().hex[:8]
    iam = boto3.client(
        "iam",
        endpoint_url=lambda_client.meta.endpoint_url,
        region_name=lambda_client.meta.region_name,
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )
    role = iam.create_role(
        RoleName=f"probe-{suffix}",
        AssumeRolePolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Principal": {"Service": "lambda.amazonaws.com"},
                        "Action": "sts:AssumeRole",
                    }
                ],
            }
        ),
    )["Role"]["Arn"]
    layer = lambda_client.publish_layer_version(
        LayerName=f"probe-{suffix}",
        Content={"ZipFile": _zip({"python/probe_layer.py": "VALUE = 'from the layer'\n"})},
        CompatibleRuntimes=["python3.12"],
    )["LayerVersionArn"]
    code = _zip({"probe.py": HANDLER})
    names = {"ok": f"probe-{suffix}", "broken": f"probe-broken-{suffix}"}
    for key, handler in (("ok", "probe.handler"), ("broken", "missing_module.handler")):
        lambda_client.create_function(
            FunctionName=names[key],
            Runtime="python3.12",
            Role=role,
            Handler=handler,
            Code={"ZipFile": code},
            Layers=[layer],
            Timeout=TIMEOUT_S,
            Environment={"Variables": {"PROBE_SETTING": "set by the function config"}},
        )
    for name in names.values():
        lambda_client.get_waiter("function_active_v2").wait(FunctionName=name)
    yield names
    for name in names.values():
        lambda_client.delete_function(FunctionName=name)


def _invoke(lambda_client: Any, name: str, event: dict[str, Any]) -> tuple[str | None, Any]:
    resp = lambda_client.invoke(FunctionName=name, Payload=json.dumps(event))
    return resp.get("FunctionError"), json.loads(resp["Payload"].read())


def test_handler_sees_layer_environment_endpoint_and_main_thread(
    lambda_client: Any, probe: dict[str, str]
) -> None:
    error, body = _invoke(lambda_client, probe["ok"], {})
    assert error is None, body
    assert body["layer"] == "from the layer"
    assert body["env"] == "set by the function config"
    assert body["main_thread"] is True
    assert body["answer"] == 42
    assert body["account"] == "000000000000"  # boto3 in the function reached LocalStack
    assert body["function_name"] == probe["ok"]
    assert 0 < body["remaining_ms"] <= TIMEOUT_S * 1000
    # A warm invoke reuses the sandbox.
    error, again = _invoke(lambda_client, probe["ok"], {})
    assert error is None and again["pid"] == body["pid"], again


def test_handler_exception_is_returned_as_a_lambda_error(
    lambda_client: Any, probe: dict[str, str]
) -> None:
    error, body = _invoke(lambda_client, probe["ok"], {"action": "raise"})
    assert error == "Unhandled"
    assert body["errorType"] == "ValueError"
    assert body["errorMessage"] == "raised on purpose"
    assert any("probe.py" in frame for frame in body["stackTrace"]), body


def test_timeout_kills_the_sandbox_and_the_next_invoke_gets_a_fresh_one(
    lambda_client: Any, probe: dict[str, str]
) -> None:
    _, before = _invoke(lambda_client, probe["ok"], {})
    started = time.monotonic()
    error, body = _invoke(lambda_client, probe["ok"], {"action": "sleep", "seconds": 20})
    elapsed = time.monotonic() - started
    assert error == "Unhandled"
    assert body["errorType"] == "Sandbox.Timedout", body
    assert f"Task timed out after {TIMEOUT_S}.00 seconds" in body["errorMessage"], body
    assert TIMEOUT_S - 0.5 < elapsed < TIMEOUT_S + 10, elapsed
    error, after = _invoke(lambda_client, probe["ok"], {})
    assert error is None, after
    assert after["pid"] != before["pid"], "the timed-out sandbox was reused"


def test_crash_is_a_runtime_exit_error(lambda_client: Any, probe: dict[str, str]) -> None:
    error, body = _invoke(lambda_client, probe["ok"], {"action": "exit"})
    assert error == "Unhandled"
    assert body["errorType"] == "Runtime.ExitError", body
    error, body = _invoke(lambda_client, probe["ok"], {})
    assert error is None, body


def test_import_failure_is_a_runtime_import_module_error(
    lambda_client: Any, probe: dict[str, str]
) -> None:
    error, body = _invoke(lambda_client, probe["broken"], {})
    assert error == "Unhandled"
    assert body["errorType"] == "Runtime.ImportModuleError", body
    assert "missing_module" in body["errorMessage"], body


def test_sandbox_tmp_is_private(lambda_client: Any, probe: dict[str, str]) -> None:
    """Each sandbox has its own /tmp (host mode binds it into LocalStack's work folder)."""
    mode_file = Path(__file__).resolve().parents[2] / ".work" / "localstack" / "mode"
    host_mode = not mode_file.exists() or mode_file.read_text().strip() == "host"
    if host_mode and os.geteuid() != 0:
        pytest.skip("a private /tmp needs a mount namespace (root) in host mode")
    name = f"asyncz-tmp-probe-{uuid.uuid4().hex}"  # no host file can have this name already
    error, body = _invoke(lambda_client, probe["ok"], {"action": "tmp", "name": name})
    assert error is None, body
    assert body["size"] >= 1
    assert not (Path("/tmp") / name).exists(), "the function wrote to the host's /tmp"
