"""The PostgreSQL adapter's queries for job dependencies (``sql/dependencies.sql``): the
store's ``dependencies`` part (:class:`asyncz.ports.DependencyStore`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from asyncz.errors import DuplicateKeyError
from asyncz.ports import Plan, PlannedJob, Row
from asyncz.store.rows import new_job_columns
from asyncz.store.runner import QueryRunner


def _jobs_params(planned: Sequence[PlannedJob]) -> dict[str, Any]:
    return {
        **new_job_columns([(p.job_id, p.new) for p in planned]),
        "statuses": [p.status.value for p in planned],
        "opens": [p.open_parents for p in planned],
        "depths": [p.depth for p in planned],
        "has_dependents": [p.has_dependents for p in planned],
        "errors": [p.last_error for p in planned],
    }


def _edges_params(planned: Sequence[PlannedJob]) -> dict[str, Any]:
    edges = [(p.job_id, e) for p in planned for e in p.edges]
    return {
        "children": [child for child, _ in edges],
        "parents": [e.parent_id for _, e in edges],
        "rules": [e.on_parent_failure for _, e in edges],
        "refs": [e.parent_ref for _, e in edges],
        "settled": [e.settled for _, e in edges],
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

    async def settle(self, parent_ids: Sequence[str]) -> list[Row]:
        return await self._run.rows("settle_parents", {"ids": list(parent_ids)})

    async def heal(self, replayed: Sequence[str]) -> list[Row]:
        async with self._run.transaction("heal") as run:
            locked = await run("lock_heal", {"ids": list(replayed)})
            healed = [r["id"] for r in locked if r["status"] == "dead"]
            if healed:
                await run("revive_healed", {"ids": healed})
            everyone = [r["id"] for r in locked]
            await run("reopen_edges", {"ids": everyone})
            return await run("reevaluate_waiting", {"ids": everyone})

    async def stuck_parents(self, limit: int) -> list[str]:
        return [r["id"] for r in await self._run.rows("stuck_parents", {"limit": limit})]

    async def release_orphaned(self, limit: int) -> list[Row]:
        return await self._run.rows("release_orphaned_waiting", {"limit": limit})

    async def parents(self, child_ids: Sequence[str], *, results: bool) -> list[Row]:
        return await self._run.rows("list_parents", {"ids": list(child_ids), "results": results})

    async def dependents(self, job_id: str, limit: int) -> tuple[list[Row], int]:
        rows = await self._run.rows("list_dependents", {"id": job_id, "limit": limit})
        total = rows[0]["total"] if rows else 0
        return [{k: v for k, v in r.items() if k != "total"} for r in rows], total

    async def any_waiting(self) -> bool:
        row = await self._run.one("any_waiting")
        return bool(row and row["any"])
