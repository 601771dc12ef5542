"""Pieces of ``asyncz dev`` without servers: sandbox processes, the local Lambda Invoke
endpoint (driven by real boto3), the API key and the sandbox environment."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import stat
import time
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from asyncz.client.endpoint import default_data_dir
from asyncz.local.config import (
    DevOptions,
    resolve_api_key,
    sandbox_env,
)
from asyncz.local.lambda_.endpoint import LambdaEndpoint, function_name_of
from asyncz.local.lambda_.sandbox import (
    SandboxError,
    SandboxProcess,
    SandboxSpec,
    SandboxTimeoutError,
)
from asyncz.local.servers.embedded import ServerUrls
from tests.support.waiting import wait_until

pytestmark = pytest.mark.unit

HERE = "tests.unit.test_local_runner"


# Handlers the sandbox processes import by dotted path.
def echo_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return {
        "event": event,
        "request_id": context.aws_request_id,
        "function_name": context.function_name,
        "remaining_ms": context.get_remaining_time_in_millis(),
        "env": os.environ.get("LOCAL_RUNNER_TEST"),
        "pid": os.getpid(),
    }


def until_deadline_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if "started" in event:  # tells the test the handler runs (its SIGTERM must find it here)
        Path(event["started"]).touch()
    while context.get_remaining_time_in_millis() > 0:
        time.sleep(0.01)
    return {"stopped": True}


def crash_handler(event: dict[str, Any], context: Any) -> None:
    os._exit(3)


def raising_handler(event: dict[str, Any], context: Any) -> None:
    raise KeyError("missing")


def unmarshallable_handler(event: dict[str, Any], context: Any) -> object:
    return {"when": object()}


def _sandbox(handler: str) -> SandboxProcess:
    spec = SandboxSpec(
        name="t-1",
        function_name="asyncz-local-test",
        handler=f"{HERE}.{handler}",
        env={"LOCAL_RUNNER_TEST": "yes"},
    )
    sandbox = SandboxProcess(spec)
    sandbox.wait_ready(60)
    return sandbox


def _invoke(mode: str, sandbox: SandboxProcess, *args: Any, **kw: Any) -> dict[str, Any]:
    """Invoke through the blocking call (the fleet) or on an event loop (the HTTP front)."""
    if mode == "blocking":
        return sandbox.invoke(*args, **kw)
    return asyncio.run(sandbox.ainvoke(*args, **kw))


MODES = pytest.mark.parametrize("mode", ["blocking", "event-loop"])


@MODES
def test_sandbox_runs_invocations_warm_with_a_lambda_context(mode: str) -> None:
    sandbox = _sandbox("echo_handler")
    try:
        first = _invoke(mode, sandbox, {"a": 1}, 900, request_id="req-1")
        second = _invoke(mode, sandbox, {"a": 2}, 30)
    finally:
        sandbox.stop(grace_s=2)
    assert first["ok"] and second["ok"]
    assert first["result"]["event"] == {"a": 1}
    assert first["result"]["request_id"] == "req-1"
    assert first["result"]["function_name"] == "asyncz-local-test"
    assert 899_000 < first["result"]["remaining_ms"] <= 900_000
    assert second["result"]["remaining_ms"] <= 30_000
    assert first["result"]["env"] == "yes"
    assert first["result"]["pid"] == second["result"]["pid"] != os.getpid()  # same warm sandbox


def test_sigterm_brings_the_deadline_forward_so_the_handler_returns(tmp_path: Path) -> None:
    sandbox = _sandbox("until_deadline_handler")
    import threading

    replies: list[dict[str, Any]] = []
    running = tmp_path / "started"
    event = {"started": str(running)}
    worker = threading.Thread(target=lambda: replies.append(sandbox.invoke(event, 900)))
    worker.start()
    # the handler must be running when the SIGTERM comes (a fixed wait lost that race on a
    # loaded box: the sandbox, still idle, exited 0 and the invocation had no reply)
    wait_until(running.exists, timeout=30, interval=0.02, what="the handler running")
    started = time.monotonic()
    sandbox.stop(grace_s=10)
    worker.join(10)
    assert time.monotonic() - started < 5
    assert replies == [{"type": "result", "ok": True, "result": {"stopped": True}}]
    assert sandbox.process.returncode == 0


@MODES
def test_a_crashed_sandbox_is_reported_and_marked_dead(mode: str) -> None:
    sandbox = _sandbox("crash_handler")
    with pytest.raises(SandboxError, match="died"):
        _invoke(mode, sandbox, {}, 30)
    assert not sandbox.alive()
    sandbox.stop(grace_s=0)


def test_event_loop_invocation_past_its_wait_is_a_timeout_and_retires_the_sandbox() -> None:
    sandbox = _sandbox("until_deadline_handler")
    try:
        with pytest.raises(SandboxTimeoutError):
            _invoke("event-loop", sandbox, {}, 900, wait_s=0.3)
        assert not sandbox.alive()  # its late reply must not answer someone else
    finally:
        sandbox.stop(grace_s=0)


def test_event_loop_invocation_reads_a_reply_larger_than_the_pipe_buffer() -> None:
    sandbox = _sandbox("echo_handler")
    big = {"blob": "x" * (1024 * 1024)}  # a pipe holds 64 KiB: the reply arrives in pieces
    try:
        reply = _invoke("event-loop", sandbox, big, 30)
        again = _invoke("event-loop", sandbox, {"a": 1}, 30)
    finally:
        sandbox.stop(grace_s=2)
    assert reply["result"]["event"] == big
    assert again["result"]["event"] == {"a": 1}


def test_a_sandbox_that_dies_while_idle_is_noticed_by_the_loop_watching_it() -> None:
    sandbox = _sandbox("echo_handler")

    async def serve_then_lose_it() -> None:
        assert (await sandbox.ainvoke({"a": 1}, 30))["ok"]
        assert sandbox.alive()
        sandbox.process.kill()  # between requests, as an OOM kill would
        for _ in range(500):  # the pipe's EOF wakes the loop; no invocation is needed
            if sandbox.broken:
                break
            await asyncio.sleep(0.01)

    try:
        asyncio.run(serve_then_lose_it())
        assert sandbox.broken and not sandbox.alive()
    finally:
        sandbox.stop(grace_s=0)


@MODES
def test_an_invocation_of_a_sandbox_killed_while_idle_says_it_died(mode: str) -> None:
    sandbox = _sandbox("echo_handler")
    try:
        assert _invoke(mode, sandbox, {"a": 1}, 30)["ok"]
        sandbox.process.kill()  # between invocations, as an OOM kill would
        sandbox.process.wait(10)
        with pytest.raises(SandboxError, match="died"):
            _invoke(mode, sandbox, {"a": 2}, 30)
        assert not sandbox.alive()
    finally:
        sandbox.stop(grace_s=0)


def test_one_sandbox_refuses_a_second_concurrent_invocation() -> None:
    sandbox = _sandbox("until_deadline_handler")

    async def both() -> None:
        first = asyncio.ensure_future(sandbox.ainvoke({}, 1))
        await asyncio.sleep(0.05)
        with pytest.raises(SandboxError, match="already serving"):
            await sandbox.ainvoke({}, 1)
        assert (await first)["result"] == {"stopped": True}

    try:
        asyncio.run(both())
    finally:
        sandbox.stop(grace_s=2)


@pytest.mark.parametrize(
    ("handler", "error"),
    [
        (f"{HERE}.no_such_handler", "Runtime.HandlerNotFound: Handler 'no_such_handler' missing"),
        ("tests.unit.no_such_module.handler", "Runtime.ImportModuleError: Unable to import"),
        ("handler", "Runtime.MalformedHandlerName"),
    ],
)
def test_an_init_failure_is_reported_as_the_aws_runtime_names_it(handler: str, error: str) -> None:
    sandbox = SandboxProcess(SandboxSpec(name="t-2", function_name="f", handler=handler))
    with pytest.raises(SandboxError, match="failed to initialise") as failed:
        sandbox.wait_ready(60)
    assert error in str(failed.value)
    sandbox.stop(grace_s=0)


def test_handler_errors_come_back_as_the_aws_runtime_shapes_them_and_the_sandbox_stays_warm() -> (
    None
):
    """The local sandboxes and the LocalStack executor run one runtime loop
    (asyncz.local.lambda_.bootstrap): an exception and an unserialisable result are the invocation's
    error result, with the AWS error type, and the environment serves the next one."""
    raising = _sandbox("raising_handler")
    unmarshallable = _sandbox("unmarshallable_handler")
    try:
        reply = raising.invoke({}, 30)
        assert (reply["ok"], reply["error"]) == (False, "KeyError: 'missing'")
        assert "raising_handler" in reply["trace"]
        reply = unmarshallable.invoke({}, 30)
        assert not reply["ok"]
        assert reply["error"].startswith("Runtime.MarshalError: Unable to marshal response")
        assert raising.invoke({}, 30)["error"] == "KeyError: 'missing'"
        assert raising.alive() and unmarshallable.alive()
    finally:
        raising.stop(grace_s=2)
        unmarshallable.stop(grace_s=2)


def test_the_runtime_answers_json_text_with_json_text_and_an_object_with_an_object() -> None:
    """The LocalStack executor passes Lambda's bytes through (``payload``, JSON text); the
    local runner sends the event as an object and reads the result as one. Errors, including
    an unserialisable result, come back as the AWS runtime's error object in either form."""
    from asyncz.local.lambda_.bootstrap import LambdaContext, _answer

    ctx = LambdaContext(request_id="r1", deadline_ms=int(time.time() * 1000) + 30_000)

    def echo(event: Any, context: Any) -> Any:
        return {"got": event, "id": context.aws_request_id}

    text = json.loads(_answer(echo, {"request_id": "r1", "payload": '{"a": [1, "x"]}'}, ctx))
    assert text == {"type": "result", "ok": True, "payload": '{"got": {"a": [1, "x"]}, "id": "r1"}'}
    assert json.loads(_answer(echo, {"request_id": "r1", "payload": ""}, ctx))["payload"] == (
        '{"got": {}, "id": "r1"}'
    )
    inline = json.loads(_answer(echo, {"request_id": "r1", "event": {"a": [1, "x"]}}, ctx))
    assert inline == {"type": "result", "ok": True, "result": {"got": {"a": [1, "x"]}, "id": "r1"}}
    for form in ({"payload": "{}"}, {"event": {}}):
        bad = json.loads(_answer(lambda e, c: {1, 2}, {"request_id": "r1", **form}, ctx))
        assert bad["ok"] is False
        assert json.loads(bad["payload"])["errorType"] == "Runtime.MarshalError"
        failed = json.loads(_answer(lambda e, c: {}["k"], {"request_id": "r1", **form}, ctx))
        assert json.loads(failed["payload"])["errorType"] == "KeyError"


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/2015-03-31/functions/asyncz-local-worker/invocations", "asyncz-local-worker"),
        ("/2015-03-31/functions/asyncz-local-worker:live/invocations", "asyncz-local-worker"),
        (
            "/2015-03-31/functions/arn%3Aaws%3Alambda%3Aus-east-1%3A000000000000%3Afunction"
            "%3Aasyncz-local-worker/invocations",
            "asyncz-local-worker",
        ),
        ("/2015-03-31/functions/x/configuration", None),
        ("/jobs", None),
    ],
)
def test_function_name_of(path: str, name: str | None) -> None:
    assert function_name_of(path) == name


def test_boto3_async_invoke_reaches_the_local_endpoint() -> None:
    started: list[int] = []
    endpoint = LambdaEndpoint({"asyncz-local-worker": lambda: started.append(1)})
    endpoint.start()
    try:
        client = boto3.client(
            "lambda",
            endpoint_url=endpoint.url,
            region_name="us-east-1",
            aws_access_key_id="local",
            aws_secret_access_key="local",
            config=Config(retries={"max_attempts": 1}),
        )
        resp = client.invoke(
            FunctionName="asyncz-local-worker", InvocationType="Event", Payload=b"{}"
        )
        assert resp["StatusCode"] == 202
        assert started == [1]
        with pytest.raises(client.exceptions.ResourceNotFoundException):
            client.invoke(FunctionName="nope", InvocationType="Event", Payload=b"{}")
    finally:
        endpoint.close()


def test_api_key_comes_from_env_or_is_generated_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASYNCZ_DEV_API_KEY", "given")
    assert resolve_api_key(tmp_path) == ("given", "ASYNCZ_DEV_API_KEY")
    assert not (tmp_path / "api-key").exists()
    monkeypatch.delenv("ASYNCZ_DEV_API_KEY")
    key, source = resolve_api_key(tmp_path)
    assert source.endswith("(generated)") and len(key) > 30
    assert stat.S_IMODE((tmp_path / "api-key").stat().st_mode) == 0o600
    assert resolve_api_key(tmp_path) == (key, str(tmp_path / "api-key"))


def test_sandbox_env_accepts_the_key_and_keeps_aws_local(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASYNCZ_PUBLISH_GAUGES", raising=False)
    urls = ServerUrls("postgresql://p@h/db", "redis://h:1/0", True, True)
    env = sandbox_env(urls, "k", "http://127.0.0.1:9")
    assert env["ASYNCZ_API_KEY_HASHES"] == hashlib.sha256(b"k").hexdigest()
    assert env["ASYNCZ_DATABASE_URL"] == "postgresql://p@h/db"
    assert env["ASYNCZ_PUBLISH_GAUGES"] == "false"
    assert env["AWS_ENDPOINT_URL_LAMBDA"] == "http://127.0.0.1:9"
    assert env["ASYNCZ_WORKER_FUNCTION_NAME"] == "asyncz-local-worker"


def test_asyncz_dev_lets_webhooks_reach_a_receiver_on_this_machine_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("ASYNCZ_WEBHOOK_ALLOW_HTTP", "ASYNCZ_WEBHOOK_ALLOW_NETWORKS"):
        monkeypatch.delenv(name, raising=False)
    env = sandbox_env(ServerUrls("postgresql://p@h/db", "redis://h:1/0", True, True), "k", "")
    assert env["ASYNCZ_WEBHOOK_ALLOW_HTTP"] == "true"
    assert env["ASYNCZ_WEBHOOK_ALLOW_NETWORKS"] == "127.0.0.0/8,::1/128"  # loopback, no more


@pytest.mark.parametrize(("cores", "cap"), [(1, 2), (2, 4), (4, 8), (5, 10), (64, 10)])
def test_the_local_fleet_is_capped_at_two_worker_sandboxes_per_core(
    monkeypatch: pytest.MonkeyPatch, cores: int, cap: int
) -> None:
    """Every local sandbox shares this machine's cores: past two per core they add cold
    starts, not throughput. The api's and the fleet's plans get the same cap."""
    from asyncz.local import config

    monkeypatch.delenv("ASYNCZ_FLEET_MAX_WORKERS", raising=False)
    monkeypatch.setattr(config, "local_cores", lambda: cores)
    assert DevOptions.from_env().max_worker_sandboxes == cap
    assert DevOptions().max_worker_sandboxes == cap
    urls = ServerUrls("postgresql://p@h/db", "redis://h:1/0", True, True)
    assert sandbox_env(urls, "k", "http://127.0.0.1:9", cap)["ASYNCZ_FLEET_MAX_WORKERS"] == str(cap)
    assert sandbox_env(urls, "k", "http://127.0.0.1:9")["ASYNCZ_FLEET_MAX_WORKERS"] == str(cap)


def test_a_fleet_cap_the_user_sets_wins_over_the_core_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from asyncz.local import config

    monkeypatch.setattr(config, "local_cores", lambda: 2)
    monkeypatch.setenv("ASYNCZ_FLEET_MAX_WORKERS", "12")
    assert DevOptions.from_env().max_worker_sandboxes == 12
    urls = ServerUrls("postgresql://p@h/db", "redis://h:1/0", True, True)
    assert sandbox_env(urls, "k", "http://127.0.0.1:9", 12)["ASYNCZ_FLEET_MAX_WORKERS"] == "12"
    # 0 holds the workers off (the plans start none); the runner keeps its own cap
    monkeypatch.setenv("ASYNCZ_FLEET_MAX_WORKERS", "0")
    assert DevOptions.from_env().max_worker_sandboxes == 4
    assert sandbox_env(urls, "k", "http://127.0.0.1:9", 4)["ASYNCZ_FLEET_MAX_WORKERS"] == "0"


def test_default_data_dir_is_in_the_project_root(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "a" / "b").mkdir(parents=True)
    assert default_data_dir(tmp_path / "a" / "b") == tmp_path.resolve() / ".asyncz"


class _StuckSandbox:
    """A sandbox whose every invocation fails at once (a task module that does not import)."""

    ready = True
    process = type("Process", (), {"pid": 2**22 + 1})()  # no such pid

    def alive(self) -> bool:
        return True

    def stop(self, grace_s: float = 0) -> None:
        return None


def test_a_worker_that_keeps_failing_backs_off_and_says_why_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import threading

    from asyncz.local.lambda_ import workers as invokers

    monkeypatch.setattr(invokers, "FAILURE_BACKOFF_S", 0.05)
    stopping = threading.Event()
    fleet = invokers.WorkerFleet({}, DevOptions(workers=1), stopping)
    calls: list[bool] = []

    def failing(sandbox: Any, *, quiet: bool = False) -> bool:
        calls.append(quiet)
        return False

    monkeypatch.setattr(fleet, "_spawn", _StuckSandbox)
    monkeypatch.setattr(fleet, "_invoke_once", failing)
    assert fleet.invoke(repeat=True)
    time.sleep(1.0)
    stopping.set()
    fleet.stop(grace_s=1)
    # backing off 0.05, 0.1, 0.2, 0.4 s...: a handful of tries in a second, not thousands
    assert 3 <= len(calls) <= 8, len(calls)
    assert calls[0] is False and all(calls[1:])  # only the first failure is logged
    assert capsys.readouterr().out.count("backing off") == 1


def test_a_worker_sandbox_that_died_while_idle_gets_no_invocation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A warm sandbox killed between invocations (the soak's SIGKILL, an OOM kill) is put
    away; the next invocation runs in a fresh one."""
    import threading

    from asyncz.local.lambda_ import workers as invokers

    class _Sandbox(_StuckSandbox):
        def __init__(self, alive: bool) -> None:
            self.is_alive, self.stopped = alive, False

        def alive(self) -> bool:
            return self.is_alive

        def stop(self, grace_s: float = 0) -> None:
            self.stopped = True

    stopping = threading.Event()
    fleet = invokers.WorkerFleet({}, DevOptions(max_worker_sandboxes=2), stopping)
    dead, fresh = _Sandbox(alive=False), _Sandbox(alive=True)
    fleet._idle.append(dead)  # type: ignore[arg-type]
    invoked: list[Any] = []
    monkeypatch.setattr(fleet, "_spawn", lambda: fresh)
    monkeypatch.setattr(fleet, "_invoke_once", lambda s, quiet=False: invoked.append(s) or True)
    try:
        assert fleet.invoke()
        wait_until(lambda: invoked, timeout=10, what="an invocation")
    finally:
        stopping.set()
        fleet.stop(grace_s=1)
    assert invoked == [fresh]
    assert dead.stopped
