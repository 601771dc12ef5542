"""In-memory unique jobs: the store's ``unique`` part (:class:`asyncz.ports.UniqueStore`)
on the memory store's dicts, with the same "holds" rule as ``jobs_unique_live_hold_idx``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from asyncz.jobs import NewJob, UniqueScope
from asyncz.port_types import Row, epoch_ms
from asyncz.testing.maintenance import dispatch_row, now_utc

if TYPE_CHECKING:
    from asyncz.testing.tables import StoreTables


def holds(j: dict[str, Any]) -> bool:
    """Whether the job holds its unique key now (the partial unique index's predicate)."""
    if j.get("unique_key") is None or j["attempt_base"] != 0:
        return False
    status = str(j["status"])
    if j["unique_scope"] == UniqueScope.QUEUED:
        return status in ("waiting", "queued") and j["attempts"] == 0
    if j["unique_scope"] == UniqueScope.QUEUED_OR_RUNNING:
        return status in ("waiting", "queued", "processing", "suspended")
    return j.get("unique_until") is not None


class MemoryUnique:
    def __init__(self, store: StoreTables) -> None:
        self.store = store

    def _holder(self, key: str) -> dict[str, Any] | None:
        now = now_utc()
        for j in self.store.jobs.values():
            if j.get("unique_key") == key and holds(j):
                if j["unique_scope"] == UniqueScope.PERIOD and j["unique_until"] <= now:
                    j["unique_until"] = None  # its period has passed
                    continue
                return j
        return None

    async def insert(self, job_id: str, new: NewJob) -> Row | None:
        assert new.unique_key is not None
        holder = self._holder(new.unique_key)
        if holder is None:
            until = None
            if new.unique_scope is UniqueScope.PERIOD:
                until = now_utc() + timedelta(seconds=new.unique_for or 0)
            row = await self.store.insert_job(
                job_id, new, unique_key=new.unique_key, unique_scope=new.unique_scope,
                unique_until=until,
            )  # fmt: skip
            return None if row is None else {**row, "id": job_id, "status": "queued"}
        key = new.idempotency_key
        if key is not None and await self.store.get_by_idempotency_key(key) is not None:
            return None
        waiting = holder["status"] == "queued" and holder["attempts"] == 0
        if not new.debounce or not waiting or holder["cancel_requested"]:
            return None
        if (holder["task"], holder["submitted_by_key_id"]) != (new.task, new.submitted_by_key_id):
            return None  # another task's or another key's job: it changes nothing
        now = now_utc()
        run_at = new.run_at or now + timedelta(seconds=new.delay_seconds)
        holder.update(payload=new.payload, run_at=run_at, updated_at=now)
        return {**dispatch_row(holder), "run_at_ms": epoch_ms(run_at), "due": run_at <= now}

    async def insert_many(self, items: Sequence[tuple[str, NewJob]]) -> list[Row | None]:
        return [
            await (self.insert(job_id, new) if new.unique_key is not None
                   else self.store.insert_job(job_id, new))
            for job_id, new in items
        ]  # fmt: skip

    async def holders(self, keys: Sequence[str]) -> dict[str, Row]:
        now = now_utc()
        found = {k: j for k in keys if (j := self._holder(k)) is not None}
        return {k: {**dispatch_row(j), "due": j["run_at"] <= now,
                    "submitted_by": j["submitted_by"],
                    "submitted_by_key_id": j["submitted_by_key_id"]}
                for k, j in found.items()}  # fmt: skip
