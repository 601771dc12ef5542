"""The PostgreSQL adapter's queries for job dependencies (``sql/dependencies.sql``): the
store's ``dependencies`` part (:class:`asyncz.ports.DependencyStore`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import psycopg

from asyncz.errors import DuplicateKeyError
from asyncz.port_types import Plan, PlannedJob, Row
from asyncz.store.rows import new_jobs_document
from asyncz.store.runner import QueryRunner


def _jobs_params(planned: Sequence[PlannedJob]) -> dict[str, Any]:
    more = [
        {"status": p.status.value, "open_parents": p.open_parents, "depth": p.depth,
         "has_dependents": p.has_dependents, "last_error": p.last_error}
        for p in planned
    ]  # fmt: skip
    return {"jobs": new_jobs_document([(p.job_id, p.new) for p in planned], more)}


def _edges_params(planned: Sequence[PlannedJob]) -> dict[str, Any]:
    edges = [(p.job_id, e) for p in planned for e in p.edges]
    return {
        "children": [child for child, _ in edges],
        "parents": [e.parent_id for _, e in edges],
        "rules": [e.on_parent_failure for _, e in edges],
        "refs": [e.parent_ref for _, e in edges],
        "settled": [e.settled for _, e in edges],
        "ended": [e.parent_ended for _, e in edges],
    }


class DependencyQueries:
    def __init__(self, run: QueryRunner) -> None:
        self._run = run

    async def insert_planned(self, parent_ids: Sequence[str], plan: Plan) -> list[Row]:
        try:
            async with self._run.transaction("insert_planned_jobs") as run:
                found = await run("lock_parents", {"ids": list(parent_ids)}) if parent_ids else []
                planned = plan({r["id"]: r for r in found})
                unflagged = [r["id"] for r in found if not r["has_dependents"]]
                if unflagged:
                    await run("flag_parents", {"ids": unflagged})
                rows = await run("insert_planned_jobs", _jobs_params(planned))
                if any(p.edges for p in planned):
                    await run("insert_dependencies", _edges_params(planned))
        except psycopg.errors.UniqueViolation as exc:
            raise DuplicateKeyError("an idempotency key of this submit exists") from exc
        by_id = {r["id"]: r for r in rows}
        return [by_id[p.job_id] for p in planned]

    async def settle(self, parent_ids: Sequence[str], limit: int) -> tuple[list[Row], bool]:
        rows = await self._run.rows("settle_parents", {"ids": list(parent_ids), "limit": limit})
        page = next(r["page"] for r in rows if r["id"] is None)
        return [r for r in rows if r["id"] is not None], page >= limit

    async def reevaluate(self, job_ids: Sequence[str]) -> list[Row]:
        async with self._run.transaction("reevaluate") as run:
            await run("reopen_edges", {"ids": list(job_ids)})
            return await run("reevaluate_waiting", {"ids": list(job_ids)})

    async def heal(self, replayed: Sequence[str], limit: int) -> tuple[list[Row], bool]:
        async with self._run.transaction("heal") as run:
            await run("lock_heal_parents", {"ids": list(replayed)})
            picked = await run("lock_heal_page", {"ids": list(replayed), "limit": limit})
            healed = [r["id"] for r in picked]
            if not healed:
                return [], False
            await run("revive_healed", {"ids": healed})
            await run("reopen_edges", {"ids": healed})
            return await run("reevaluate_waiting", {"ids": healed}), len(healed) >= limit

    async def mark_cascades(self, job_ids: Sequence[str]) -> None:
        await self._run.rows("mark_cascades", {"ids": list(job_ids)})

    async def finish_cascades(self, job_ids: Sequence[str]) -> list[str]:
        return [r["id"] for r in await self._run.rows("finish_cascades", {"ids": list(job_ids)})]

    async def pending_cascades(self, limit: int) -> list[Row]:
        return await self._run.rows("pending_cascades", {"limit": limit})

    async def scan_waiting(self, after: tuple[datetime, str] | None, limit: int) -> list[Row]:
        at, job_id = after if after else (None, None)
        return await self._run.rows(
            "scan_waiting", {"after_at": at, "after_id": job_id, "limit": limit}
        )

    async def stuck_parents(self, child_ids: Sequence[str]) -> list[str]:
        return [r["id"] for r in await self._run.rows("stuck_parents", {"ids": list(child_ids)})]

    async def release_orphaned(self, child_ids: Sequence[str]) -> list[Row]:
        return await self._run.rows("release_orphaned_waiting", {"ids": list(child_ids)})

    async def parents(self, child_ids: Sequence[str], *, results: bool) -> list[Row]:
        return await self._run.rows("list_parents", {"ids": list(child_ids), "results": results})

    async def dependents(self, job_id: str, limit: int) -> tuple[list[Row], int]:
        rows = await self._run.rows("list_dependents", {"id": job_id, "limit": limit})
        total = rows[0]["total"] if rows else 0
        return [{k: v for k, v in r.items() if k != "total"} for r in rows], total

    async def any_waiting(self) -> bool:
        row = await self._run.one("any_waiting")
        return bool(row and row["any"])
