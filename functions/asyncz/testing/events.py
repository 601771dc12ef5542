"""In-memory events: the store's ``events`` part (:class:`asyncz.store_ports.EventStore`) on
a list, with the look-back of an event wait (``open_event_wait``) registered as the steps'
opener of kind ``event``. One event loop, so no lock is needed to order a delivery and a
wait's look-back."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from asyncz.durable.events import event_value
from asyncz.port_types import Row
from asyncz.testing.maintenance import now_utc
from asyncz.testing.steps import MemorySteps


class MemoryEvents:
    def __init__(self, jobs: dict[str, dict[str, Any]], steps: MemorySteps) -> None:
        self.jobs, self.steps = jobs, steps  # the store's jobs table and its steps part
        self.rows: list[dict[str, Any]] = []
        steps.openers["event"] = self.look_back

    def look_back(self, job_id: str, step: dict[str, Any]) -> str | None:
        """The first event a new wait takes at once (as ``open_event_wait``), if any."""
        job = self.jobs[job_id]
        taken = [r["result"]["event"] for r in self.steps.rows.get(job_id, {}).values()
                 if r["kind"] == "event" and r["wait_key"] == step["wait_key"]
                 and r["status"] == "completed" and isinstance(r["result"], dict)
                 and "event" in r["result"]]  # fmt: skip
        terms = json.loads(step["result"]) if step["result"] else {}
        for e in self.rows:
            if (e["wait_key"] == step["wait_key"] and e["id"] > max(taken, default=0)
                    and e["created_at"] >= job["created_at"]
                    and ("from" not in terms or e["sent_by"] in terms["from"])):  # fmt: skip
                return event_value(e["id"], json.dumps(e["payload"]))
        return None

    async def send(self, event: Row, limit: int) -> tuple[int, str, list[Row]]:
        event_id = len(self.rows) + 1 if not self.rows else self.rows[-1]["id"] + 1
        self.rows.append({**event, "id": event_id, "payload": json.loads(event["payload"]),
                          "woke": 0, "created_at": now_utc()})  # fmt: skip
        value = event_value(event_id, event["payload"])
        rows = await self.steps.resolve_keyed("event", event["wait_key"], value, len(value),
                                              event["sent_by"], None, limit)  # fmt: skip
        self.rows[-1]["pending"] = len(rows) == limit
        return event_id, value, rows

    async def finish(self, event_id: int, woke: int) -> None:
        for e in self.rows:
            if e["id"] == event_id:
                e.update(woke=e["woke"] + woke, pending=False)

    async def pending(self, older_than: float, limit: int) -> list[Row]:
        cutoff = now_utc() - timedelta(seconds=older_than)
        left = [e for e in self.rows if e["pending"] and e["created_at"] < cutoff][:limit]
        return [{"id": e["id"], "wait_key": e["wait_key"], "payload": json.dumps(e["payload"]),
                 "sent_by": e["sent_by"]} for e in left]  # fmt: skip

    async def prune(self, older_than: float, limit: int) -> int:
        cutoff = now_utc() - timedelta(seconds=older_than)
        old = [e for e in self.rows if e["created_at"] < cutoff][:limit]
        self.rows = [e for e in self.rows if e not in old]
        return len(old)
