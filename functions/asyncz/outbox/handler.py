"""The events function: publishes the outbox's lifecycle events to the configured sinks.
Woken by an async invoke from a process that committed ends (at most about once a second
per sandbox), and by its rate(1 minute) rule, the sweep that also picks up what a crash or a
lost invoke left."""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

from asyncz import composition, eventloop
from asyncz.errors import BrokerUnavailableError
from asyncz.observability import PowertoolsMetricsSink, lambda_entry, logger
from asyncz.outbox.pump import Pump
from asyncz.outbox.sink import Sink
from asyncz.service import JobService
from asyncz.settings import Settings, get_settings

MARGIN_SECONDS = 5.0  # the run ends this long before the invocation's own timeout

_sinks: list[Sink] | None = None


def build_sinks(settings: Settings, service: JobService | None = None) -> list[Sink]:
    """The sinks the settings configure: EventBridge when a bus is named, the console
    when asked for (asyncz dev), webhooks when they are on (they need the service's store
    and the cipher of their secrets)."""
    sinks: list[Sink] = []
    if settings.webhooks and service is not None:
        from asyncz.webhooks.sink import WebhookSink

        sinks.append(WebhookSink(service.store.webhooks, service.webhooks.cipher, settings))
    if settings.event_bus:
        from asyncz.outbox.eventbridge import EventBridgeSink

        sinks.append(EventBridgeSink(settings.event_bus))
    if settings.console_events:
        from asyncz.outbox.console import ConsoleSink

        sinks.append(ConsoleSink())
    return sinks


def sandbox_sinks(settings: Settings, service: JobService | None = None) -> list[Sink]:
    global _sinks
    if _sinks is None:
        _sinks = build_sinks(settings, service)
    return _sinks


def run_seconds(settings: Settings, context: Any) -> float:
    """How long this run may take: the setting, within the invocation's remaining time."""
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if remaining is None:
        return settings.outbox_run_seconds
    left = float(remaining()) / 1000 - MARGIN_SECONDS
    return max(1.0, min(settings.outbox_run_seconds, left))


async def _idle(service: JobService) -> bool:
    """Recovery noted PostgreSQL idle with no event unpublished, and nothing was enqueued
    since (so nothing ended): a paused database stays paused (serverless profile)."""
    if not service.settings.recovery_idle_check_seconds:
        return False
    try:
        return await service.idle_gauges() is not None
    except BrokerUnavailableError:
        return False


async def _publish(seconds: float) -> dict[str, Any]:
    settings = get_settings().require_for("events")
    metrics = PowertoolsMetricsSink()
    service = await composition.current_service(settings, metrics=metrics)
    if await _idle(service):
        return {"skipped": "postgres idle, nothing enqueued since"}
    pump = Pump(service.store.outbox, service.broker, sandbox_sinks(settings, service), settings,
                metrics=metrics)  # fmt: skip
    report = await pump.run(time.monotonic() + seconds)
    return asdict(report)


@lambda_entry()
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    settings = get_settings()
    summary = eventloop.sandbox_loop().run_until_complete(_publish(run_seconds(settings, context)))
    logger.info("events published", extra=summary)
    return summary
