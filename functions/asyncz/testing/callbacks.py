"""In-memory callbacks of durable tasks: the store's ``callbacks`` part
(:class:`asyncz.store_ports.CallbackStore`) over the in-memory steps, as
``sql/callbacks.sql`` is over ``job_steps``."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from asyncz.port_types import Row
from asyncz.testing.maintenance import now_utc
from asyncz.testing.steps import LIVE, MemorySteps


class MemoryCallbacks:
    def __init__(self, steps: MemorySteps) -> None:
        self.steps = steps

    def _find(self, token_hash: str) -> tuple[str, dict[str, Any]] | None:
        for job_id, rows in self.steps.rows.items():
            for row in rows.values():
                if row["kind"] == "callback" and row["wait_key"] == token_hash:
                    return job_id, row
        return None

    async def find(self, token_hash: str) -> Row | None:
        found = self._find(token_hash)
        if found is None:
            return None
        job_id, row = found
        job = self.steps.store.jobs[job_id]
        return {"job_id": job_id, "seq": row["seq"], "status": row["status"],
                "job_status": str(job["status"]), "wait_until": row["wait_until"]}  # fmt: skip

    async def heartbeat(self, token_hash: str) -> datetime | None:
        found = self._find(token_hash)
        if found is None:
            return None
        job_id, row = found
        if row["status"] != "waiting" or str(self.steps.store.jobs[job_id]["status"]) not in LIVE:
            return None
        later = now_utc() + timedelta(seconds=float(row["result"]["timeout"]))
        row["wait_until"] = max(row["wait_until"], later)
        return row["wait_until"]  # type: ignore[no-any-return]
