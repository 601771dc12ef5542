"""Trace context as text (W3C and AWS headers), off by default at no cost, the client sending
its caller's context, and the attempt's fields on log lines."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider

from asyncz import tracing
from asyncz.attempt_logs import ATTEMPT_FIELDS, reset_attempt_fields, set_attempt_fields
from asyncz.client import Client
from asyncz.tracing import from_amzn_trace_id, incoming, trace_id_of, valid_traceparent

pytestmark = pytest.mark.unit

PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_a_traceparent_is_valid_only_in_the_w3c_form_with_real_ids() -> None:
    assert valid_traceparent(PARENT) == PARENT
    assert valid_traceparent(PARENT.upper()) == PARENT
    for bad in ("", "00-zz", PARENT + "-x", "01" + PARENT[2:],
                f"00-{'0' * 32}-00f067aa0ba902b7-01", f"00-{'a' * 32}-{'0' * 16}-01"):  # fmt: skip
        assert valid_traceparent(bad) is None, bad
    assert trace_id_of(PARENT) == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert trace_id_of(None) is None


def test_an_aws_trace_header_becomes_a_traceparent() -> None:
    amzn = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
    assert from_amzn_trace_id(amzn) == "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"
    assert from_amzn_trace_id(amzn.replace("Sampled=1", "Sampled=0")).endswith("-00")  # type: ignore[union-attr]
    assert from_amzn_trace_id("Root=1-5759e988-bd862e3fe1be46a994272793") is None  # no parent
    assert from_amzn_trace_id("Root=garbage;Parent=53995c3f42cd8ad8") is None
    # the W3C header wins; a tracestate rides along with it only
    both = {"traceparent": PARENT, "tracestate": "a=1", "x-amzn-trace-id": amzn}
    assert incoming(both) == (PARENT, "a=1")
    assert incoming({"x-amzn-trace-id": amzn, "tracestate": "a=1"})[1] is None
    assert incoming({}) == (None, None)
    assert incoming({"traceparent": PARENT, "tracestate": "a=\x00"}) == (PARENT, None)
    assert incoming({"traceparent": PARENT, "tracestate": "a=1" * 300})[1] == ("a=1" * 300)[:512]


def test_tracing_is_off_by_default_and_sets_up_no_sdk() -> None:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "ASYNCZ_TRACING"))}  # fmt: skip
    code = (
        "import sys; import asyncz.api.handler, asyncz.worker.handler, asyncz.client;"
        "from asyncz import tracing; assert tracing.tracer() is None;"
        "t = tracing.start_attempt('j', 'echo', 'default', 1, "
        f"'{PARENT}', None); t.end('completed', None); assert t.trace_id == '{PARENT[3:35]}';"
        "print(sorted(m for m in sys.modules "
        "if m.startswith(('opentelemetry.sdk.trace', 'opentelemetry.exporter'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    # (redis-py and FastAPI import parts of OpenTelemetry whenever it is installed)
    assert out.stdout.strip() == "[]"


def test_an_exporter_endpoint_turns_tracing_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    assert tracing.configured()
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT")
    monkeypatch.setenv("ASYNCZ_TRACING", "on")
    assert tracing.configured()


def test_the_client_sends_its_callers_trace_context() -> None:
    seen: list[httpx.Request] = []

    def reply(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(202, json={"job_id": "j1", "status": "queued"})

    tracer = TracerProvider().get_tracer("caller")
    with Client("http://api.test", "k", transport=httpx.MockTransport(reply)) as client:
        client.submit("echo", {})
        with tracer.start_as_current_span("checkout") as span:
            client.submit("echo", {})
            trace_id = format(span.get_span_context().trace_id, "032x")
    assert "traceparent" not in seen[0].headers  # no current span: nothing to send
    assert seen[1].headers["traceparent"].split("-")[1] == trace_id


def test_log_lines_in_an_attempt_carry_its_fields_as_json() -> None:
    from asyncz.observability import logger

    record = logging.LogRecord("user", logging.INFO, __file__, 1, "hello", None, None)
    token = set_attempt_fields("job-1", 2, "echo", "reports", "ab" * 16)
    try:
        ATTEMPT_FIELDS.filter(record)
    finally:
        reset_attempt_fields(token)
    line = json.loads(logger.registered_formatter.format(record))
    assert {k: line[k] for k in ("job_id", "attempt", "task", "queue", "trace_id")} == {
        "job_id": "job-1", "attempt": 2, "task": "echo", "queue": "reports",
        "trace_id": "ab" * 16,
    }  # fmt: skip
    outside = logging.LogRecord("user", logging.INFO, __file__, 1, "later", None, None)
    ATTEMPT_FIELDS.filter(outside)
    assert "job_id" not in outside.__dict__
