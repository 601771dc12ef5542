"""The PostgreSQL adapter's queries of the outbox (``sql/outbox.sql``): the store's
``outbox`` part (:class:`asyncz.outbox.ports.OutboxStore`)."""

from __future__ import annotations

from asyncz.outbox.ports import BACKLOG_CAP, Publish
from asyncz.port_types import Row
from asyncz.store.runner import QueryRunner


class OutboxQueries:
    def __init__(self, run: QueryRunner) -> None:
        self._run = run

    async def publish_page(self, limit: int, result_bytes: int, publish: Publish) -> int:
        # The page is deleted in the transaction the sinks take it in: a sink that raises
        # rolls the deletion back, and until the commit a second publisher skips its rows.
        async with self._run.transaction("publish_outbox") as run:
            rows = await run("take_outbox_page", {"limit": limit, "result_bytes": result_bytes})
            if rows:
                await publish(rows)
        return len(rows)

    async def any_pending(self) -> bool:
        row = await self._run.one("any_unpublished")
        return bool(row and row["pending"])

    async def gauges(self) -> Row:
        row = await self._run.one("outbox_gauges", {"cap": BACKLOG_CAP})
        assert row is not None
        return row

    async def prune(self, older_than: float, limit: int) -> int:
        params = {"older_than": float(older_than), "limit": limit}
        return len(await self._run.rows("prune_outbox", params))
