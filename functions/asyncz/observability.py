"""Powertools singletons (Logger, Metrics, Tracer) shared by every handler.

Every handler wears :func:`lambda_entry`: tracer (outermost), metrics, logger.
"""

from __future__ import annotations

import functools
import logging
import os
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

T = TypeVar("T")
SERVICE = "asyncz"
NAMESPACE = "AsyncZ"

logger = Logger(service=SERVICE)
# Each deployment has its own namespace (set by the construct), so that two deployments in
# one account and region never mix their job metrics.
metrics = Metrics(
    namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or NAMESPACE, service=SERVICE
)
# A Tracer patches the X-Ray SDK and loads botocore even when tracing is off (0.3–0.5 s of a
# cold start's CPU), so it exists only when tracing is on, by Powertools' own rule: not
# disabled by POWERTOOLS_TRACE_DISABLED, and running in Lambda (not SAM local, not Chalice).
tracer: Tracer | None = None if Tracer._is_tracer_disabled() else Tracer(service=SERVICE)

# Read-only requests publish no metric; that is expected, not worth a warning per call.
warnings.filterwarnings("ignore", message="No application metrics to publish")

# The service and worker loop log through stdlib loggers under "asyncz"; give them the
# same JSON formatter and correlation keys as the Powertools logger.
logging.getLogger("asyncz").setLevel(logging.INFO)
logging.getLogger("asyncz").addHandler(logger.registered_handler)
logging.getLogger("asyncz").propagate = False


Event = dict[str, Any]
Handler = Callable[[Event, Any], T]


def lambda_entry(
    correlation_id: Callable[[Event], str | None] | None = None,
) -> Callable[[Handler[T]], Handler[T]]:
    """The decorators every handler wears, in one fixed order: tracer (outermost, only when
    tracing is on: a disabled tracer still builds a subsegment per call), metrics, logger.

    ``correlation_id`` picks the id from the event with plain Python (Powertools' JMESPath
    path costs more than the rest of the logger per invocation)."""

    def wrap(fn: Handler[T]) -> Handler[T]:
        inner = fn
        if correlation_id is not None:

            @functools.wraps(fn)
            def inner(event: Event, context: Any) -> T:
                logger.set_correlation_id(correlation_id(event))
                return fn(event, context)

        wrapped = logger.inject_lambda_context(clear_state=True)(inner)
        wrapped = metrics.log_metrics(wrapped)
        if tracer is not None and not tracer.disabled:
            wrapped = tracer.capture_lambda_handler(capture_response=False)(wrapped)
        return wrapped

    return wrap


class PowertoolsMetricsSink:
    """Adapts the service's MetricsSink protocol to Powertools Metrics (EMF).

    With metrics disabled (``POWERTOOLS_METRICS_DISABLED``, or ``POWERTOOLS_DEV`` alone,
    read when the sink is built) it records nothing: Powertools would keep every value (its
    flush skips a disabled set without clearing it), print the set anyway at each 100th
    value, and format the growing list into a debug message at every call."""

    def __init__(self) -> None:
        self.enabled = not is_metrics_disabled()

    def add_metric(self, name: str, unit: str, value: float) -> None:
        if self.enabled:
            metrics.add_metric(name=name, unit=MetricUnit(unit), value=value)
