"""Trace context end to end through ``asyncz dev``: the client sends its caller's context,
the api sandbox and the worker sandbox export their spans over OTLP/HTTP
(``OTEL_EXPORTER_OTLP_ENDPOINT``) to a collector the test runs, and the spans join up: the
submit under the caller, the first attempt under the submit, the retry in a new trace
linked to the submit."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk.trace import TracerProvider

from asyncz.client import Client
from tests.support.databases import empty_backends
from tests.support.devrun import API_KEY, DevRun, dev_env

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(180)]


class Collector:
    """An OTLP/HTTP trace receiver: the spans every export brought, by name."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.lock = threading.Lock()
        collector = self

        class Receive(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest.FromString(body)
                with collector.lock:
                    for resource in request.resource_spans:
                        for scope in resource.scope_spans:
                            collector.spans.extend(scope.spans)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Receive)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def named(self, name: str) -> list[Span]:
        with self.lock:
            return [s for s in self.spans if s.name == name]


@pytest.fixture(scope="module")
def traced_dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DevRun, Collector]]:
    collector = Collector()
    env = dev_env(*empty_backends("trace", 3), API_KEY)
    env.update({"OTEL_EXPORTER_OTLP_ENDPOINT": collector.url, "OTEL_BSP_SCHEDULE_DELAY": "200",
                "OTEL_SERVICE_NAME": "asyncz-dev-test"})  # fmt: skip
    run = DevRun(tmp_path_factory.mktemp("trace") / "data", env, API_KEY)
    try:
        run.wait_healthy()
        yield run, collector
    finally:
        run.stop()
        collector.server.shutdown()


def test_a_retried_job_traces_from_the_callers_span_through_asyncz_dev(
    traced_dev: tuple[DevRun, Collector],
) -> None:
    run, collector = traced_dev
    caller = TracerProvider().get_tracer("checkout-service")
    with Client(run.url, API_KEY) as client, caller.start_as_current_span("checkout") as span:
        job = client.submit("flaky", {"failures": 1}, max_retries=2)
        caller_ctx = span.get_span_context()
    run.wait_status(job.id, {"completed"}, timeout=60)
    trace_id = caller_ctx.trace_id.to_bytes(16, "big")

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(collector.named("flaky")) < 2:
        time.sleep(0.2)
    submits = [s for s in collector.named("asyncz submit") if s.trace_id == trace_id]
    assert len(submits) == 1, collector.spans
    submit = submits[0]
    assert submit.parent_span_id == caller_ctx.span_id.to_bytes(8, "big")
    attempts = {a.key: a.value for a in submit.attributes}
    assert attempts["asyncz.job_id"].string_value == job.id

    first, retry = sorted(collector.named("flaky"), key=lambda s: s.start_time_unix_nano)
    assert first.trace_id == trace_id and first.parent_span_id == submit.span_id
    assert first.kind == Span.SPAN_KIND_CONSUMER
    assert retry.trace_id != trace_id and not retry.parent_span_id
    assert [(link.trace_id, link.span_id) for link in retry.links] == [(trace_id, submit.span_id)]
    outcomes = [{a.key: a.value for a in s.attributes}["asyncz.outcome"].string_value
                for s in (first, retry)]  # fmt: skip
    assert outcomes == ["retrying", "completed"]
    status, shown = run.call("GET", f"/jobs/{job.id}")
    assert status == 200 and shown["trace_id"] == trace_id.hex()
