"""Trace context through the queue, through the api and worker Lambda handlers (real
PostgreSQL and Redis; AWS APIs served by moto): a submit's traceparent reaches each attempt's
span (first attempt a child of the submit, a retry a new trace linked to it), the job shows
its trace id, and every log line of an attempt, the task's own included, carries the
attempt's fields."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws
from opentelemetry import trace
from opentelemetry.propagate import inject
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from asyncz import tracing
from asyncz.api import handler as api_handler
from asyncz.connections import hash_api_key
from asyncz.fleet import invoke as fleet_invoke
from asyncz.settings import Settings, get_settings
from asyncz.worker import handler as worker_handler
from tests.support.apigw import FakeContext, call, drop_sandbox
from tests.support.settings import settings_env

pytestmark = pytest.mark.integration

KEY = "trace-key-" + "x" * 24
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{CALLER_SPAN}-01"


@pytest.fixture
def env(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    configured = settings.model_copy(
        update={"api_key_hashes": hash_api_key(KEY), "wake_worker": False,
                "worker_idle_exit_seconds": 2.5, "backoff_base_seconds": 0.05,
                "backoff_max_seconds": 0.1, "publish_gauges": False,
                "task_modules": "tests.support.logging_tasks"}
    )  # fmt: skip
    for name, value in settings_env(configured).items():
        if name.startswith("ASYNCZ_"):
            monkeypatch.setenv(name, value)
    monkeypatch.delenv("ASYNCZ_WORKER_FUNCTION_NAME", raising=False)
    for name, value in {"AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "testing",
                        "AWS_SECRET_ACCESS_KEY": "testing"}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    drop_sandbox()
    fleet_invoke._client = None
    with mock_aws():
        yield get_settings()
    drop_sandbox()
    fleet_invoke._client = None
    get_settings.cache_clear()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The SDK's in-memory exporter behind the tracer asyncz uses (a provider of the test's
    own: the process's global one stays untouched)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use(provider.get_tracer("asyncz"))
    yield exporter
    tracing.reset()
    provider.shutdown()


def api(method: str, target: str, **kw: Any) -> Any:
    reply = call(api_handler.handler, method, target, api_key=KEY, **kw)
    return reply.status, reply.json()


def work() -> dict[str, Any]:
    return worker_handler.handler({}, FakeContext("asyncz-worker", timeout_s=930))


def by_name(spans: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    found = [s for s in spans.get_finished_spans() if s.name == name]
    return sorted(found, key=lambda s: s.attributes["asyncz.attempt"] if s.attributes else 0)


def hex_id(value: int, width: int) -> str:
    return format(value, f"0{width}x")


def test_first_attempt_is_a_child_of_the_submit_and_a_retry_links_to_it(
    env: Settings, spans: InMemorySpanExporter
) -> None:
    flaky = {"task": "flaky", "payload": {"failures": 1}, "max_retries": 2}
    status, body = api("POST", "/jobs", headers={"traceparent": TRACEPARENT}, body=flaky)
    assert status == 202, body
    job_id = body["job_id"]
    assert work()["completed"] == 1

    [submit] = [s for s in spans.get_finished_spans() if s.name == "asyncz submit"]
    assert hex_id(submit.context.trace_id, 32) == TRACE_ID
    assert submit.parent is not None and hex_id(submit.parent.span_id, 16) == CALLER_SPAN
    assert submit.kind is SpanKind.PRODUCER and submit.attributes["asyncz.job_id"] == job_id

    first, retry = by_name(spans, "flaky")
    assert first.context.trace_id == submit.context.trace_id
    assert first.parent is not None and first.parent.span_id == submit.context.span_id
    assert first.kind is SpanKind.CONSUMER
    assert dict(first.attributes or {}).items() >= {
        "asyncz.job_id": job_id, "asyncz.attempt": 1, "asyncz.task": "flaky",
        "messaging.destination.name": "default", "asyncz.outcome": "retrying",
    }.items()  # fmt: skip
    assert not first.status.is_ok

    assert retry.context.trace_id != submit.context.trace_id and retry.parent is None
    [link] = retry.links
    assert link.context.trace_id == submit.context.trace_id
    assert link.context.span_id == submit.context.span_id
    assert retry.attributes is not None and retry.attributes["asyncz.attempt"] == 2
    assert retry.attributes["asyncz.outcome"] == "completed" and retry.status.is_ok

    status, job = api("GET", f"/jobs/{job_id}")
    assert status == 200 and job["trace_id"] == TRACE_ID


def test_tracing_off_still_stores_the_context_and_aws_headers_count_too(env: Settings) -> None:
    tracing.use(None)
    try:
        amzn = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
        _, plain = api("POST", "/jobs", headers={"traceparent": TRACEPARENT},
                       body={"task": "echo"})  # fmt: skip
        _, aws = api("POST", "/jobs", headers={"X-Amzn-Trace-Id": amzn}, body={"task": "echo"})
        _, bad = api("POST", "/jobs", headers={"traceparent": "00-zz"}, body={"task": "echo"})
        assert api("GET", f"/jobs/{plain['job_id']}")[1]["trace_id"] == TRACE_ID
        assert (
            api("GET", f"/jobs/{aws['job_id']}")[1]["trace_id"]
            == "5759e988bd862e3fe1be46a994272793"
        )
        assert api("GET", f"/jobs/{bad['job_id']}")[1]["trace_id"] is None  # ignored, as W3C asks
    finally:
        tracing.reset()


def test_each_batch_item_continues_its_own_context_or_the_batch_one(
    env: Settings, spans: InMemorySpanExporter
) -> None:
    own = f"00-{'ab' * 16}-{'cd' * 8}-01"
    status, body = api(
        "POST", "/jobs/batch", headers={"traceparent": TRACEPARENT},
        body={"jobs": [{"task": "echo", "traceparent": own, "tracestate": "vendor=1"},
                       {"task": "echo"}]},
    )  # fmt: skip
    assert status == 202, body
    mine, batch = (api("GET", f"/jobs/{j['job_id']}")[1] for j in body["jobs"])
    assert mine["trace_id"] == "ab" * 16 and batch["trace_id"] == TRACE_ID
    work()
    attempts = {s.attributes["asyncz.job_id"]: s for s in by_name(spans, "echo") if s.attributes}
    assert hex_id(attempts[mine["job_id"]].context.trace_id, 32) == "ab" * 16
    assert attempts[mine["job_id"]].parent.span_id == int("cd" * 8, 16)  # type: ignore[union-attr]
    bad_item = {"task": "echo", "traceparent": "00-nope"}
    status, bad = api("POST", "/jobs/batch", body={"jobs": [bad_item]})
    assert status == 422 and bad["index"] == 0


def test_a_tasks_own_log_lines_carry_the_attempt_and_its_trace(
    env: Settings, spans: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    caller = TracerProvider().get_tracer("caller")
    with caller.start_as_current_span("checkout"):
        headers: dict[str, str] = {}
        inject(headers)  # what asyncz.client sends for its caller
        trace_id = hex_id(trace.get_current_span().get_span_context().trace_id, 32)
    ids = [
        api("POST", "/jobs", headers=headers, body={"task": task, "payload": {"customer": "c1"}})[
            1
        ]["job_id"]
        for task in ("log_and_return", "log_async")
    ]
    with caplog.at_level(logging.INFO):
        assert work()["completed"] == 2
    lines = [r for r in caplog.records if r.name == "user_tasks.report"]
    assert {r.__dict__.get("job_id") for r in lines} == set(ids)
    for record in lines:
        assert record.__dict__["attempt"] == 1 and record.__dict__["queue"] == "default"
        assert record.__dict__["trace_id"] == trace_id
        assert record.__dict__["task"] in ("log_and_return", "log_async")
    # outside an attempt, a line carries none of it
    logging.getLogger("user_tasks.report").warning("after the attempts")
    assert "job_id" not in caplog.records[-1].__dict__
