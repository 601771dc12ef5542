"""The webhook sink of the event pump: ``publish`` writes one delivery per event and
matching webhook (one statement per page); ``tick`` sends the due ones, each webhook with at
most ``ASYNCZ_WEBHOOK_PER_ENDPOINT_IN_FLIGHT`` requests in flight and each request bounded
by ``ASYNCZ_WEBHOOK_TIMEOUT_SECONDS``, so one dead or slow endpoint holds only its own."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from asyncz.faults import crash_point
from asyncz.outbox.sink import Envelope
from asyncz.retry import backoff_delay
from asyncz.setting_groups import WebhookSettings
from asyncz.webhook_ports import WebhookStore
from asyncz.webhooks.addresses import Resolver, parse_networks, system_resolver
from asyncz.webhooks.cipher import SecretCipher
from asyncz.webhooks.sending import Outcome, Sender

log = logging.getLogger("asyncz.webhooks")
# a claim outlives its request by this much: a sender that died mid-request is retried then
_CLAIM_MARGIN_SECONDS = 10.0
_POLL_SECONDS = 0.2
# no request starts with less time than this before the deadline (unless the timeout is less)
_SHORTEST_REQUEST_SECONDS = 0.5


class WebhookSink:
    """A sink of the event pump (:class:`asyncz.outbox.sink.Sink`)."""

    def __init__(
        self,
        store: WebhookStore,
        cipher: SecretCipher,
        settings: WebhookSettings,
        *,
        resolve: Resolver = system_resolver,
        rand: Callable[[], float] = random.random,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.settings = settings
        self.sender = Sender(
            cipher, allow_http=settings.webhook_allow_http,
            allowed=parse_networks(settings.webhook_allow_networks), resolve=resolve,
        )  # fmt: skip
        self._rand = rand
        self._clock = clock
        self._live_seen = False  # a live webhook was seen: every page is written from then on

    async def publish(self, events: Sequence[Envelope]) -> None:
        """A delivery per event and matching webhook, in one statement (raises: retried).
        Until a live webhook is seen, each page first counts them and, with none, is not
        encoded at all: a deployment that registered none pays one small read a page. A
        webhook registered meanwhile is counted by the next page, as the statement would
        have joined it."""
        if not events:
            return
        if not self._live_seen:
            if not await self.store.count():
                return
            self._live_seen = True
        rows = []
        for envelope in events:
            data = envelope.data
            rows.append({"id": envelope.id, "type": envelope.type, "queue": data.get("queue"),
                         "task": data.get("task"), "body": envelope.as_dict()})  # fmt: skip
        await self.store.add_deliveries(rows, self.settings.webhook_retry_for_seconds)

    async def tick(self, deadline: float) -> None:
        """Send what is due until nothing is, or until ``deadline`` (``time.monotonic()``).
        Every request ends by then: one started near it gets what is left of its timeout
        (at least a moment), so a dead endpoint's requests never hold the others' past it."""
        timeout = self.settings.webhook_timeout_seconds
        in_flight: dict[asyncio.Task[None], int] = {}
        try:
            while True:
                bound = min(timeout, deadline - self._clock())
                if bound >= min(timeout, _SHORTEST_REQUEST_SECONDS):
                    busy = sorted(set(in_flight.values()))
                    rows = await self.store.claim_due(
                        limit=self.settings.webhook_page_size,
                        per_endpoint=self.settings.webhook_per_endpoint_in_flight,
                        busy=busy, hold_seconds=bound + min(bound, _CLAIM_MARGIN_SECONDS),
                        retry_for_seconds=self.settings.webhook_retry_for_seconds,
                    )  # fmt: skip
                    for row in rows:
                        task = asyncio.create_task(self._deliver(row, bound))
                        in_flight[task] = row["webhook_id"]
                if not in_flight:
                    return
                # go on at the first request that ends (its endpoint may take more), or after a
                # moment: what became due for another endpoint never waits on a slow one
                done, _ = await asyncio.wait(
                    in_flight, timeout=_POLL_SECONDS, return_when=asyncio.FIRST_COMPLETED
                )
                for task in done:
                    del in_flight[task]
                    if task.exception() is not None:
                        log.error("webhook delivery failed to record", exc_info=task.exception())
        finally:
            if in_flight:
                await asyncio.gather(*in_flight, return_exceptions=True)

    async def _deliver(self, row: dict[str, Any], timeout: float) -> None:
        if row["deleted"]:
            outcome = Outcome(None, "webhook deleted", 0)
        else:
            outcome = await self.sender.send(row, timeout)
        crash_point("webhook.after_send")  # a crash here: sent again when the claim lapses
        ok = outcome.status_code is not None and 200 <= outcome.status_code < 300
        delay = backoff_delay(
            row["attempts"] + 1, self.settings.webhook_retry_base_seconds,
            self.settings.webhook_retry_max_seconds, self._rand,
        )  # fmt: skip
        finished = await self.store.finish_attempt(
            row["id"], row["claim_token"], ok=ok, final=bool(row["deleted"]),
            delay_seconds=delay, status_code=outcome.status_code, error=outcome.error,
            duration_ms=outcome.duration_ms,
        )  # fmt: skip
        if finished is None:
            log.warning("webhook delivery %s: its claim lapsed before its outcome", row["id"])

    async def aclose(self) -> None:
        await self.sender.aclose()
