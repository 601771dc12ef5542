"""What the in-memory store's parts (maintenance, dependencies, limits, activity, unique)
use of the store: its tables and a few of its steps. They are handed the store as this, so
none of them imports :class:`asyncz.testing.store.MemoryStore`."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from asyncz.jobs import NewJob
from asyncz.port_types import Row


class NeededJobs(Protocol):
    def needed(self, job_id: str) -> bool:
        """A job's row is still needed by a child (not to be deleted)."""
        ...


class StoreTables(Protocol):
    """The rows of the in-memory store (jobs, their attempts, periodic slots) and the
    steps the parts share with it."""

    jobs: dict[str, dict[str, Any]]
    attempts: dict[str, list[dict[str, Any]]]
    periodic: dict[tuple[str, datetime], str | None]  # (task, slot) -> job id

    @property
    def dependencies(self) -> NeededJobs: ...

    async def insert_job(self, job_id: str, new: NewJob, **state: Any) -> Row | None: ...

    async def get_by_idempotency_key(self, key: str) -> Row | None: ...

    def close_attempt(self, j: dict[str, Any], outcome: str, error: str | None) -> None: ...

    def delete(self, job_id: str) -> None: ...
