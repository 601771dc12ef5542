"""What the publisher needs of the store: the outbox's pages, gauges and retention (the
PostgreSQL adapter: :mod:`asyncz.store.outbox`; in memory: :mod:`asyncz.testing.outbox`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from asyncz.port_types import Row

# Hands a page of outbox rows on; raising leaves them unpublished (offered again later).
Publish = Callable[[list[Row]], Awaitable[None]]

BACKLOG_CAP = 100_000  # the backlog gauge counts up to this many (a bounded read)


class OutboxStore(Protocol):
    async def publish_page(self, limit: int, result_bytes: int, publish: Publish) -> int:
        """Lock up to ``limit`` of the oldest unpublished events (rows another publisher
        holds are skipped), await ``publish(rows)`` and forget them, in one transaction;
        how many. A completed event's row carries ``result`` when ``result_bytes`` > 0 and
        the job's result is at most that long (JSON text) and still the one of that end."""
        ...

    async def any_pending(self) -> bool:
        """Whether any event is unpublished."""
        ...

    async def gauges(self) -> Row:
        """``backlog`` (unpublished events, counted up to :data:`BACKLOG_CAP`) and
        ``oldest_age`` (seconds since the oldest was written; 0 when none)."""
        ...

    async def prune(self, older_than: float, limit: int) -> int:
        """Retention: forget up to ``limit`` events nothing published for ``older_than``
        seconds, oldest first; how many."""
        ...
