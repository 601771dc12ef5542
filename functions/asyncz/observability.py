"""Powertools singletons (Logger, Metrics, Tracer) shared by every handler, and the fields
every log line written during an attempt carries (job id, attempt, task, queue, trace id).

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
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

from asyncz.attempt_logs import ATTEMPT_FIELDS

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

# Every line logged during an attempt carries its fields (asyncz.attempt_logs).
logger.registered_handler.addFilter(ATTEMPT_FIELDS)


def join_task_logs() -> None:
    """Make the tasks' own ``logging`` lines (the root logger's) joinable: JSON lines with
    the attempt's fields. Without a root handler, ours; the Lambda runtime's handler gets our
    JSON formatter; any other handler (a host program's) keeps its format and gains the
    fields. A root logger left at Python's default (WARNING) is set to INFO."""
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(logger.registered_handler)
    for handler in root.handlers:
        if type(handler).__name__ == "LambdaLoggerHandler":
            handler.setFormatter(logger.registered_formatter)
        handler.addFilter(ATTEMPT_FIELDS)
    if root.level in (logging.NOTSET, logging.WARNING):
        root.setLevel(logging.INFO)


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


def publish_task_metrics(task: str, runs: int, failures: int, run_ms: list[float]) -> None:
    """One EMF line of a task's figures (dimension ``task``): TaskRuns, TaskFailures and a
    sample of TaskRunTime (asyncz.worker.task_metrics)."""
    if is_metrics_disabled():
        return
    emf = EphemeralMetrics(namespace=metrics.namespace, service=SERVICE)
    emf.add_dimension(name="task", value=task)
    emf.add_metric(name="TaskRuns", unit=MetricUnit.Count, value=runs)
    emf.add_metric(name="TaskFailures", unit=MetricUnit.Count, value=failures)
    for value in run_ms:
        emf.add_metric(name="TaskRunTime", unit=MetricUnit.Milliseconds, value=value)
    emf.flush_metrics()
