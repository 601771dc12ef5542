"""The publisher ("the pump"): drains the outbox in bounded pages, hands each page to every
sink, forgets what they took, then gives each sink its own due work. One at a time across
the deployment (a Redis lock with a TTL); without Redis it still runs, and the page's row
locks keep two publishers from sending the same page at once."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from asyncz.errors import BrokerUnavailableError
from asyncz.faults import crash_point
from asyncz.outbox.envelopes import envelope_of
from asyncz.outbox.ports import OutboxStore
from asyncz.outbox.sink import Sink
from asyncz.port_types import Row
from asyncz.ports import JobBroker, MetricsSink, NullMetrics
from asyncz.settings import Settings

log = logging.getLogger("asyncz.outbox")
LOCK = "outbox-pump"


@dataclass
class PumpReport:
    published: int = 0
    pages: int = 0
    failed: list[str] = field(default_factory=list)  # what went wrong, one line each


class Pump:
    def __init__(
        self,
        outbox: OutboxStore,
        broker: JobBroker,
        sinks: Sequence[Sink],
        settings: Settings,
        *,
        metrics: MetricsSink | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.outbox = outbox
        self.broker = broker
        self.sinks = list(sinks)
        self.settings = settings
        self.metrics: MetricsSink = metrics or NullMetrics()
        self.clock = clock

    async def run(self, deadline: float) -> PumpReport:
        """Publish until the outbox is empty or ``deadline`` (``clock()`` time), then run
        each sink's ``tick``. A run that finds another one draining leaves it to that one,
        which looks again after it lets go (so an event committed meanwhile is not left to
        the next sweep)."""
        report = PumpReport()
        while self.clock() < deadline:
            held = await self._lock(deadline)
            if held is False:
                break
            try:
                await self._drain(deadline, report)
            finally:
                if held:
                    await self._unlock()
            if report.failed or not await self._pending(report):
                break
        for sink in self.sinks:
            try:
                await sink.tick(deadline)
            except Exception as exc:  # noqa: BLE001 - one sink's trouble must not stop another's
                self._failed(report, f"{type(sink).__name__}.tick: {type(exc).__name__}: {exc}")
        if report.published:
            self.metrics.add_metric("EventsPublished", "Count", report.published)
        return report

    async def _lock(self, deadline: float) -> bool | None:
        """True: held; False: another publisher holds it; None: Redis is down (go on)."""
        ttl = max(1.0, deadline - self.clock() + 5.0)  # a dead holder's lock expires soon
        try:
            return await self.broker.try_lock(LOCK, ttl)
        except BrokerUnavailableError:
            log.warning("outbox lock unavailable (Redis down): publishing without it")
            return None

    async def _unlock(self) -> None:
        try:
            await self.broker.unlock(LOCK)
        except BrokerUnavailableError:
            log.warning("outbox lock not released (Redis down): it expires by itself")

    async def _pending(self, report: PumpReport) -> bool:
        try:
            return await self.outbox.any_pending()
        except Exception as exc:  # noqa: BLE001 - the sweep looks again
            self._failed(report, f"any_pending: {type(exc).__name__}: {exc}")
            return False

    async def _drain(self, deadline: float, report: PumpReport) -> None:
        size = self.settings.outbox_page_size
        while self.clock() < deadline:
            try:
                n = await self.outbox.publish_page(
                    size, self.settings.outbox_result_bytes, self._publish
                )
            except Exception as exc:  # noqa: BLE001 - the page stays; the next run retries it
                self._failed(report, f"publish: {type(exc).__name__}: {exc}")
                return
            report.published += n
            report.pages += 1 if n else 0
            if n < size:
                return

    async def _publish(self, rows: list[Row]) -> None:
        crash_point("outbox.before_publish")  # chaos: the page is not taken; the sweep is
        events = [envelope_of(row, self.settings.event_source) for row in rows]
        for sink in self.sinks:
            await sink.publish(events)

    def _failed(self, report: PumpReport, what: str) -> None:
        log.error("outbox publisher: %s", what)
        report.failed.append(what)
        self.metrics.add_metric("EventsPublishFailed", "Count", 1)
