"""Recovery Lambda (once a minute): rescues stale leases and orphaned ids, enqueues the
due periodic jobs, applies retention, publishes the gauges."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

from asyncz import composition, eventloop
from asyncz.errors import BrokerUnavailableError, RecoveryStepError
from asyncz.fleet.invoke import lambda_scale_out
from asyncz.jobs import RecoveryReport
from asyncz.maintenance.recovery import run_step
from asyncz.observability import PowertoolsMetricsSink, lambda_entry, logger
from asyncz.service import JobService
from asyncz.settings import Settings, get_settings


def _unit(name: str) -> str:
    return "Seconds" if "Age" in name else "Count"


def emf_line(namespace: str, gauges: dict[str, float], timestamp_ms: int | None = None) -> str:
    """The gauges as one CloudWatch Embedded Metric Format line, without dimensions (as
    PutMetricData sends them, so the same alarms watch either)."""
    return json.dumps(
        {
            "_aws": {
                "Timestamp": timestamp_ms if timestamp_ms is not None else int(time.time() * 1000),
                "CloudWatchMetrics": [
                    {
                        "Namespace": namespace,
                        "Dimensions": [[]],
                        "Metrics": [{"Name": n, "Unit": _unit(n)} for n in gauges],
                    }
                ],
            },
            **gauges,
        }
    )


def publish_gauges(settings: Settings, gauges: dict[str, float]) -> None:
    """PutMetricData, so alarms behave the same in AWS and under LocalStack; or, where no
    CloudWatch endpoint exists (lean, serverless), an EMF line on stdout."""
    if settings.gauges_as_emf:
        print(emf_line(settings.metrics_namespace, gauges), flush=True)
        return
    import boto3  # only this handler and fleet talk to AWS APIs

    boto3.client("cloudwatch").put_metric_data(
        Namespace=settings.metrics_namespace,
        MetricData=[
            {"MetricName": name, "Value": value, "Unit": _unit(name)}
            for name, value in gauges.items()
        ],
    )


def clock() -> datetime:
    """This run's time for periodic slots (a seam for tests)."""
    return datetime.now(UTC)


async def _skip_if_idle(service: JobService, now: datetime) -> dict[str, float] | None:
    """The noted gauges when Redis shows that Postgres is still idle and no periodic slot
    has come due (serverless: a paused database stays paused); None when this run must
    look at Postgres."""
    try:
        return await service.idle_gauges(now)
    except BrokerUnavailableError:
        return None  # Redis cannot vouch for anything: look at Postgres


async def _recover() -> dict[str, Any]:
    settings = get_settings().require_for("recovery")
    service = await composition.current_service(settings, metrics=PowertoolsMetricsSink())
    now = clock()
    idle = await _skip_if_idle(service, now)
    if idle is not None:
        # nothing enqueued since, nothing failed
        noted = {**idle, "JobsSubmitted": 0.0, "Degraded": 0.0, "RecoveryStepsFailed": 0.0}
        if settings.publish_gauges:
            publish_gauges(settings, noted)
        return {"skipped": "postgres idle, nothing enqueued since", "gauges": noted}
    activity: int | None = None
    if settings.recovery_idle_check_seconds:
        try:
            activity = await service.broker.activity()  # before any look at Postgres
        except BrokerUnavailableError:
            activity = None
    # Each step runs alone: one that fails (a statement timeout, a dependency down) is
    # logged and counted, and the others still run.
    report = RecoveryReport()
    failure: Exception | None = None
    await service.recover(report)
    periodic = await run_step(report, "periodic", service.run_periodic(now), service.metrics)
    pruned = await run_step(report, "retention", service.prune(), service.metrics)
    folded = await run_step(report, "fold", service.fold_counts(), service.metrics)
    summary: dict[str, Any] = {
        "requeued": len(report.requeued),
        "dead": len(report.dead),
        "reenqueued": report.reenqueued,
        "restored_delayed": report.restored_delayed,
        "released": report.released,
        "periodic": len(periodic or []),
        "pruned": pruned or 0,
        "folded": folded or 0,
        "failed_steps": report.failed,
    }
    if periodic or report.requeued or report.reenqueued or report.released:
        # what this run enqueued runs now, not at the fleet's next tick
        try:
            scale_out = lambda_scale_out(settings, settings.worker_function_name)
            summary["started_workers"] = await scale_out(service.broker) if scale_out else 0
        except Exception as exc:  # noqa: BLE001 - reported below, after the gauges
            failure = exc
    # The gauges go out even when a dependency is down: the alarms must get louder then,
    # not quieter. What cannot be read is left out (the alarms treat missing as breaching).
    gauges: dict[str, float] = {}
    try:
        gauges.update(await service.gauges())
    except Exception as exc:  # noqa: BLE001
        failure = failure or exc
    gauges["Degraded"] = 1.0 if failure or report.failed else 0.0
    gauges["RecoveryStepsFailed"] = float(len(report.failed))
    if settings.publish_gauges:
        publish_gauges(settings, gauges)
    summary["gauges"] = gauges
    if failure is not None:
        logger.exception("recovery failed; gauges published as degraded", exc_info=failure)
        raise failure  # the function's Errors metric (and its alarm) count this run
    if report.failed:
        # the function's Errors metric (and its alarm) count this run too
        raise RecoveryStepError(f"recovery steps failed (the others ran): {report.failed}")
    if activity is not None:
        clean = {k: v for k, v in gauges.items() if k not in ("Degraded", "RecoveryStepsFailed")}
        summary["noted_idle"] = await service.note_if_idle(activity, clean)
    return summary


@lambda_entry()
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    summary = eventloop.run(_recover())
    logger.info("recovery finished", extra=summary)
    return summary
