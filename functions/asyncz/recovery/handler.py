"""Recovery Lambda (once a minute): rescues stale leases and orphaned ids, enqueues the
due periodic jobs, applies retention, publishes the gauges."""

from __future__ import annotations

from typing import Any

from asyncz import runtime
from asyncz.observability import PowertoolsMetricsSink, lambda_entry, logger
from asyncz.settings import Settings, get_settings


def publish_gauges(settings: Settings, gauges: dict[str, float]) -> None:
    """PutMetricData (not EMF) so alarms behave the same in AWS and under LocalStack."""
    import boto3  # only this handler and fleet talk to AWS APIs

    boto3.client("cloudwatch").put_metric_data(
        Namespace=settings.metrics_namespace,
        MetricData=[
            {"MetricName": name, "Value": value, "Unit": "Seconds" if "Age" in name else "Count"}
            for name, value in gauges.items()
        ],
    )


async def _recover() -> dict[str, Any]:
    settings = get_settings().require_for("recovery")
    service = await runtime.current_service(settings, metrics=PowertoolsMetricsSink())
    summary: dict[str, Any] = {}
    failure: Exception | None = None
    try:
        report = await service.recover()
        periodic = await service.run_periodic()
        pruned = await service.prune()
        summary = {
            "requeued": len(report.requeued),
            "dead": len(report.dead),
            "reenqueued": report.reenqueued,
            "restored_delayed": report.restored_delayed,
            "periodic": len(periodic),
            "pruned": pruned,
        }
    except Exception as exc:  # noqa: BLE001 - reported below, after the gauges
        failure = exc
    # The gauges go out even when a dependency is down: the alarms must get louder then,
    # not quieter. What cannot be read is left out (the alarms treat missing as breaching).
    gauges: dict[str, float] = {}
    try:
        gauges.update(await service.gauges())
    except Exception as exc:  # noqa: BLE001
        failure = failure or exc
    gauges["Degraded"] = 1.0 if failure else 0.0
    if settings.publish_gauges:
        publish_gauges(settings, gauges)
    summary["gauges"] = gauges
    if failure is not None:
        logger.exception("recovery failed; gauges published as degraded", exc_info=failure)
        raise failure  # the function's Errors metric (and its alarm) count this run
    return summary


@lambda_entry()
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    summary = runtime.run(_recover())
    logger.info("recovery finished", extra=summary)
    return summary
