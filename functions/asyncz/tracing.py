"""Trace context through the queue, with OpenTelemetry.

A submit's W3C ``traceparent``/``tracestate`` (or AWS ``X-Amzn-Trace-Id``, turned into a
traceparent) is stored with the job; each attempt runs in a span named after the task that
continues it: the first attempt is a child of the submit, a later one starts a new trace
with a link to it (the OpenTelemetry messaging conventions' answer for retries).

Tracing is off unless configured: ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``), ``ASYNCZ_TRACING=on``, or a host program that set an
SDK tracer provider itself. Off, nothing of OpenTelemetry is imported: the trace context is
parsed as text and stored, which is all a job costs.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator, Mapping
from typing import Any

_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_AMZN_ROOT = re.compile(r"1-([0-9a-f]{8})-([0-9a-f]{24})")
_NO_TRACE, _NO_SPAN = "0" * 32, "0" * 16
MAX_TRACESTATE = 512
ON_VALUES = ("1", "true", "on", "yes")


def valid_traceparent(value: str | None) -> str | None:
    """``value`` when it is a version-00 W3C traceparent with non-zero ids, else None."""
    if not value:
        return None
    value = value.strip().lower()
    m = _TRACEPARENT.fullmatch(value)
    if m is None or m[1] == _NO_TRACE or m[2] == _NO_SPAN:
        return None
    return value


def from_amzn_trace_id(value: str | None) -> str | None:
    """An ``X-Amzn-Trace-Id`` (``Root=1-…;Parent=…;Sampled=1``) as a W3C traceparent; None
    without a Root and a Parent (API Gateway's own header has a Root only)."""
    if not value:
        return None
    parts = dict(p.strip().split("=", 1) for p in value.split(";") if "=" in p)
    root = _AMZN_ROOT.fullmatch(parts.get("Root", "").lower())
    parent = parts.get("Parent", "").lower()
    if root is None or not re.fullmatch(r"[0-9a-f]{16}", parent):
        return None
    flags = "01" if parts.get("Sampled") == "1" else "00"
    return valid_traceparent(f"00-{root[1]}{root[2]}-{parent}-{flags}")


def incoming(headers: Mapping[str, str]) -> tuple[str | None, str | None]:
    """(traceparent, tracestate) of a request (headers by lower-case name): W3C first, else
    AWS's header; a malformed traceparent is ignored, as the W3C spec asks."""
    parent = valid_traceparent(headers.get("traceparent"))
    if parent is None:
        return from_amzn_trace_id(headers.get("x-amzn-trace-id")), None
    state = (headers.get("tracestate") or "").strip()
    if not (state.isascii() and state.isprintable()):  # W3C: printable ASCII only
        state = ""
    return parent, state[:MAX_TRACESTATE] or None


def trace_id_of(traceparent: str | None) -> str | None:
    """The 32-hex trace id of a stored traceparent."""
    return traceparent[3:35] if traceparent else None


# --- OpenTelemetry, only when configured ---------------------------------------------------

_tracer: Any = None
_decided = False


def configured() -> bool:
    """Whether this process traces: an exporter endpoint, ``ASYNCZ_TRACING``, or a tracer
    provider the host program set (read without importing OpenTelemetry when it is not)."""
    if os.environ.get("ASYNCZ_TRACING", "").lower() in ON_VALUES:
        return True
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    ):
        return True
    if "opentelemetry.trace" not in sys.modules:
        return False
    from opentelemetry import trace

    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def tracer() -> Any:
    """The OpenTelemetry tracer, or None when tracing is off (decided once per process)."""
    global _tracer, _decided
    if not _decided:
        _decided = True
        _tracer = _set_up() if configured() else None
    return _tracer


def reset() -> None:
    """Decide again at the next :func:`tracer`."""
    global _tracer, _decided
    _tracer, _decided = None, False


def use(tracer_: Any) -> None:
    """Trace with this OpenTelemetry tracer (None: off), whatever is configured: a host
    program with a provider of its own, and tests."""
    global _tracer, _decided
    _tracer, _decided = tracer_, True


def _set_up() -> Any:
    from opentelemetry import trace

    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        trace.set_tracer_provider(_sdk_provider())
    return trace.get_tracer("asyncz")


def _sdk_provider() -> Any:
    """The SDK provider (``asyncz dev``; in AWS the ADOT layer sets its own before we look):
    OTLP over HTTP to ``OTEL_EXPORTER_OTLP_ENDPOINT`` (when set), in batches; in Lambda with
    ``opentelemetry-sdk-extension-aws`` installed, X-Ray compatible trace ids."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    function = os.environ.get("AWS_LAMBDA_FUNCTION_NAME")
    resource = Resource.create(
        {"service.name": os.environ.get("OTEL_SERVICE_NAME") or function or "asyncz"}
    )
    id_generator = None
    if function:
        try:
            from opentelemetry.sdk.extension.aws.trace import AwsXRayIdGenerator

            id_generator = AwsXRayIdGenerator()
        except ImportError:
            pass
    provider = TracerProvider(resource=resource, id_generator=id_generator)
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    ):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider


def flush() -> None:
    """Export what is buffered: a Lambda sandbox may freeze after the invocation."""
    if _tracer is None:
        return
    from opentelemetry import trace

    force = getattr(trace.get_tracer_provider(), "force_flush", None)
    if force is not None:
        force(timeout_millis=5000)


def carrier(traceparent: str | None, tracestate: str | None) -> dict[str, str]:
    out = {"traceparent": traceparent} if traceparent else {}
    if traceparent and tracestate:
        out["tracestate"] = tracestate
    return out


class SubmitTrace:
    """The trace context a submit stores: the request's, or (tracing on) that of the
    ``asyncz submit`` span the api makes as the request's child."""

    __slots__ = ("span", "traceparent", "tracestate")

    def __init__(self, traceparent: str | None, tracestate: str | None, span: Any = None):
        self.traceparent, self.tracestate, self.span = traceparent, tracestate, span

    def annotate(self, **attributes: Any) -> None:
        if self.span is not None:
            self.span.set_attributes({f"asyncz.{k}": v for k, v in attributes.items()})


@contextlib.contextmanager
def submit_span(name: str, headers: Mapping[str, str]) -> Iterator[SubmitTrace]:
    """Around a submit: the context its jobs store (see :class:`SubmitTrace`)."""
    parent, state = incoming(headers)
    t = tracer()
    if t is None:
        yield SubmitTrace(parent, state)
        return
    from opentelemetry.trace import SpanKind
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    w3c = TraceContextTextMapPropagator()
    with t.start_as_current_span(
        name, context=w3c.extract(carrier(parent, state)), kind=SpanKind.PRODUCER
    ) as span:
        out: dict[str, str] = {}
        w3c.inject(out)
        yield SubmitTrace(out.get("traceparent"), out.get("tracestate"), span)


class AttemptTrace:
    """An attempt's span (tracing on) and the trace id its log lines carry."""

    __slots__ = ("_token", "span", "trace_id")

    def __init__(self, trace_id: str | None, span: Any = None, token: Any = None) -> None:
        self.trace_id, self.span, self._token = trace_id, span, token

    def end(self, status: str, error: str | None) -> None:
        """Close the span with the attempt's outcome (``completed``, ``retrying``, ``dead``,
        ``cancelled`` or ``lost``)."""
        if self.span is None:
            return
        from opentelemetry import context
        from opentelemetry.trace import Status, StatusCode

        self.span.set_attribute("asyncz.outcome", status)
        if status != "completed":
            self.span.set_status(Status(StatusCode.ERROR, (error or status)[:500]))
        self.span.end()
        if self._token is not None:
            context.detach(self._token)
            self._token = None


def child_context(traceparent: str | None, tracestate: str | None) -> tuple[str | None, str | None]:
    """The trace context of a job submitted from inside an attempt (a durable task's
    spawn): the attempt's span when tracing is on, else the attempt's own context."""
    if tracer() is None:
        return traceparent, tracestate
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    out: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(out)
    return out.get("traceparent", traceparent), out.get("tracestate", tracestate)


def step_event(name: str) -> None:
    """A durable task's step ran and was stored: an event on the attempt's span."""
    if tracer() is None:
        return
    from opentelemetry import trace

    trace.get_current_span().add_event("asyncz.step", {"asyncz.step": name})


def start_attempt(
    job_id: str, task: str, queue: str, attempt: int, traceparent: str | None,
    tracestate: str | None,
) -> AttemptTrace:  # fmt: skip
    """Open an attempt's span and make it current in the calling task's context: a child of
    the submit for the first attempt; a new trace linked to the submit for a later one."""
    t = tracer()
    if t is None:
        return AttemptTrace(trace_id_of(traceparent))
    from opentelemetry import context, trace
    from opentelemetry.trace import Link, SpanKind
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    submitted = TraceContextTextMapPropagator().extract(carrier(traceparent, tracestate))
    links = []
    if attempt > 1:
        linked = trace.get_current_span(submitted).get_span_context()
        links = [Link(linked)] if linked.is_valid else []
        submitted = context.Context()  # a root: a new trace
    span = t.start_span(
        task, context=submitted, kind=SpanKind.CONSUMER, links=links,
        attributes={"asyncz.job_id": job_id, "asyncz.task": task, "asyncz.attempt": attempt,
                    "messaging.system": "asyncz", "messaging.destination.name": queue,
                    "messaging.operation.type": "process"},
    )  # fmt: skip
    token = context.attach(trace.set_span_in_context(span))
    return AttemptTrace(format(span.get_span_context().trace_id, "032x"), span, token)
