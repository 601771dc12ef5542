"""The PostgreSQL adapter's queries of events (``sql/events.sql``): the store's ``events``
part (:class:`asyncz.wait_ports.EventStore`). A delivery's first page runs in the
transaction that stores the event, under the advisory lock a wait's look-back takes too
(the wait's side: ``open_event_wait``, run by :meth:`asyncz.store.steps.StepQueries.open_wait`)."""

from __future__ import annotations

from typing import Any

from asyncz.durable.events import event_value
from asyncz.port_types import Row
from asyncz.store.runner import QueryRunner
from asyncz.store.steps import NO_JOB


class EventQueries:
    def __init__(self, run: QueryRunner) -> None:
        self._run = run

    async def send(self, event: Row, limit: int) -> tuple[int, str, list[Row]]:
        """Store an event (``event``: name, key, wait_key, payload as JSON text, sent_by,
        sent_by_key_id) and resolve the first ``limit`` waits on it, in one transaction
        under its routing key's lock (a full page: the event is marked pending until
        :meth:`finish`): the event's id, the value its waits took (JSON text) and the page's
        rows (as ``StepStore.resolve_keyed``'s)."""
        async with self._run.transaction("send_event") as run:
            await run("lock_event_wait", {"wait_key": event["wait_key"]})
            [row] = await run("insert_event", event)
            value = event_value(row["id"], event["payload"])
            params: dict[str, Any] = {
                "kind": "event", "wait_key": event["wait_key"], "result": value,
                "result_bytes": len(value), "resolver": event["sent_by"], "after_job": NO_JOB,
                "limit": limit,
            }  # fmt: skip
            rows = await run("resolve_keyed_waits", params)
            if len(rows) == limit:  # more may follow: pending until its last page
                await run("mark_event_pending", {"id": row["id"]})
        return int(row["id"]), value, rows

    async def finish(self, event_id: int, woke: int) -> None:
        """The delivery is done: keep how many waits it woke; pending no more."""
        await self._run.rows("finish_event_delivery", {"id": event_id, "woke": woke})

    async def pending(self, older_than: float, limit: int) -> list[Row]:
        """Deliveries left pending for longer than ``older_than`` seconds: id, wait_key,
        payload (JSON text), sent_by."""
        params = {"older_than": float(older_than), "limit": limit}
        return await self._run.rows("pending_events", params)

    async def prune(self, older_than: float, limit: int) -> int:
        """Retention: up to ``limit`` events older than ``older_than`` seconds; how many."""
        rows = await self._run.rows("prune_events", {"older_than": float(older_than),
                                                     "limit": limit})  # fmt: skip
        return len(rows)
