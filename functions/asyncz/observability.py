"""Powertools singletons (Logger, Metrics, Tracer) shared by every handler.

Decorator order on every handler: tracer.capture_lambda_handler (outermost),
then metrics.log_metrics, then logger.inject_lambda_context.
"""

from __future__ import annotations

import logging
import warnings

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit

SERVICE = "asyncz"
NAMESPACE = "AsyncZ"

logger = Logger(service=SERVICE)
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)
tracer = Tracer(service=SERVICE)

# Read-only requests publish no metric; that is expected, not worth a warning per call.
warnings.filterwarnings("ignore", message="No application metrics to publish")

# The service and worker loop log through stdlib loggers under "asyncz"; give them the
# same JSON formatter and correlation keys as the Powertools logger.
logging.getLogger("asyncz").setLevel(logging.INFO)
logging.getLogger("asyncz").addHandler(logger.registered_handler)
logging.getLogger("asyncz").propagate = False


class PowertoolsMetricsSink:
    """Adapts the service's MetricsSink protocol to Powertools Metrics (EMF)."""

    def add_metric(self, name: str, unit: str, value: float) -> None:
        metrics.add_metric(name=name, unit=MetricUnit(unit), value=value)
