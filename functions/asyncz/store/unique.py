"""The PostgreSQL adapter's queries for unique jobs (``sql/unique.sql``): the store's
``unique`` part (:class:`asyncz.ports.UniqueStore`). The partial unique index
``jobs_unique_live_hold_idx`` decides who holds a key, also between concurrent submits."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from asyncz.jobs import NewJob, UniqueScope
from asyncz.port_types import Row
from asyncz.store.rows import new_job_params, new_jobs_document
from asyncz.store.runner import QueryRunner


def _unique_for(new: NewJob) -> float | None:
    return new.unique_for if new.unique_scope is UniqueScope.PERIOD else None


def unique_params(new: NewJob) -> dict[str, Any]:
    """A new job's unique-key parameters (none when it has no key)."""
    return {
        "unique_key": new.unique_key,
        "unique_scope": str(new.unique_scope) if new.unique_key is not None else None,
        "unique_for": _unique_for(new),
    }


def _params(job_id: str, new: NewJob) -> dict[str, Any]:
    return {**new_job_params(job_id, new), **unique_params(new)}


class UniqueQueries:
    def __init__(self, run: QueryRunner) -> None:
        self._run = run

    async def insert(self, job_id: str, new: NewJob) -> Row | None:
        """Insert a job with a unique key: ``{"id", "status", "run_at_ms", "due"}`` (with
        ``debounce``, the row may be the holder's, changed); ``None`` when the key or the
        idempotency key is held (the caller reads the holder)."""
        if not new.debounce:
            return await self._run.one("insert_unique_job", _params(job_id, new))
        try:
            return await self._run.one("insert_unique_job_debounced", _params(job_id, new))
        except psycopg.errors.UniqueViolation:  # the idempotency key is held
            return None

    async def insert_many(self, items: Sequence[tuple[str, NewJob]]) -> list[Row | None]:
        """A batch in one statement; per item, in order, its row or ``None`` when its key
        (or idempotency key) is held, by another job or by an earlier item."""
        document = new_jobs_document(items, [unique_params(new) for _, new in items])
        params = {"jobs": document, "unique_keys": [new.unique_key for _, new in items]}
        rows = await self._run.rows("insert_unique_jobs", params)
        by_id = {str(r["id"]): r for r in rows}
        return [by_id.get(job_id) for job_id, _ in items]

    async def holders(self, keys: Sequence[str]) -> dict[str, Row]:
        """``{key: {"id", "status", "queue", "priority", "run_at", "due", "submitted_by"}}``
        for the keys a job holds now."""
        rows = await self._run.rows("get_unique_holders", {"keys": list(keys)})
        return {r.pop("unique_key"): r for r in rows}
