"""The PostgreSQL adapter's queries of events (``sql/events.sql``): the store's ``events``
part (:class:`asyncz.store_ports.EventStore`). A delivery's first page runs in the
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
        under its routing key's lock: the event's id, the value its waits took (JSON text)
        and the page's rows (as ``StepStore.resolve_keyed``'s)."""
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
        return int(row["id"]), value, rows

    async def count_wakes(self, event_id: int, woke: int) -> None:
        """Keep on the event how many waits it woke."""
        await self._run.rows("count_event_wakes", {"id": event_id, "woke": woke})

    async def prune(self, older_than: float, limit: int) -> int:
        """Retention: up to ``limit`` events older than ``older_than`` seconds; how many."""
        rows = await self._run.rows("prune_events", {"older_than": float(older_than),
                                                     "limit": limit})  # fmt: skip
        return len(rows)
