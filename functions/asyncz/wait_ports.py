"""The protocols of the store's parts that durable tasks' waits use (``store.events``,
``.callbacks``, ``.spawns``), beside :mod:`asyncz.store_ports` (``.steps``). Protocols only."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from asyncz.jobs import Job, Lease, NewJob
    from asyncz.port_types import Row


class EventStore(Protocol):
    """Events and their delivery to the waits on them (see :mod:`asyncz.store.events`)."""

    async def send(self, event: Row, limit: int) -> tuple[int, str, list[Row]]:
        """Store an event (name, key, wait_key, payload JSON, sent_by, sent_by_key_id) and
        resolve the first ``limit`` waits on it, in one transaction under the lock a wait's
        look-back takes: its id, the value its waits took (JSON) and the page's rows."""
        ...

    async def finish(self, event_id: int, woke: int) -> None:
        """A delivery is done: keep how many waits it woke; the event is pending no more
        (``send`` marks one whose first page was full)."""
        ...

    async def pending(self, older_than: float, limit: int) -> list[Row]:
        """Deliveries left pending longer than ``older_than`` seconds (id, wait_key,
        payload as JSON text, sent_by), for recovery to finish."""
        ...

    async def prune(self, older_than: float, limit: int) -> int:
        """Retention: up to ``limit`` events older than ``older_than`` seconds."""
        ...


class CallbackStore(Protocol):
    """What durable tasks' callbacks (:mod:`asyncz.durable.callbacks`, the ``/callbacks``
    routes) need from Postgres (see :mod:`asyncz.store.callbacks`)."""

    async def find(self, token_hash: str) -> Row | None:
        """The callback of a token's SHA-256 (hex): job_id, seq, status, job_status,
        wait_until; None: no such token."""
        ...

    async def heartbeat(self, token_hash: str) -> datetime | None:
        """Move a waiting callback's deadline to at least now plus its timeout; the new
        deadline, or None when it does not wait."""
        ...


class SpawnStore(Protocol):
    """What durable tasks' spawned jobs (:mod:`asyncz.service.spawns`) need from Postgres
    (see :mod:`asyncz.store.spawns`)."""

    async def insert(self, lease: Lease, job_id: str, new: NewJob, max_depth: int) -> Row | None:
        """Store a spawned job, fenced by the spawner's ``lease``: ``too_deep``, ``inserted``,
        ``run_at_ms``, ``due``; None: the lease is lost."""
        ...

    async def find(self, job_id: str, new: NewJob) -> Row | None:
        """After a spawn that inserted nothing: the job holding its id, idempotency key or
        unique key (id, spawned_by, status, queue, priority, run_at, due)."""
        ...

    async def cascade(self, ended_ids: Sequence[str], limit: int) -> list[Row]:
        """A cascade's page over ended jobs: the live jobs cancelled spawners created,
        cancelled (``kind`` "cancelled", at most ``limit``), and the gatherers that have not
        counted them yet (``kind`` "gatherer")."""
        ...

    async def settle(self, gatherer_id: str, ended_ids: Sequence[str] | None, *,
                     wake: bool = True) -> list[Row]:  # fmt: skip
        """Count ended jobs (None: all) for a gatherer's waits, once each; the gatherer as a
        dispatch row when a wait of it was completed (and ``wake``)."""
        ...

    async def waiting_gatherers(self, after: str, limit: int) -> list[str]:
        """A page of the jobs with a waiting gather, by id after ``after``."""
        ...

    async def progress(self, job_id: str) -> Row | None:
        """A gathering job's waiting gather: ``name``, ``pending``, ``total``."""
        ...

    async def count(self, job_id: str, limit: int) -> dict[str, int]:
        """A spawner's jobs by status (at most ``limit`` counted)."""
        ...

    async def list(self, spawner_id: str, after: tuple[datetime, str] | None,
                   limit: int) -> list[Job]:  # fmt: skip
        """A page of a spawner's jobs, newest first."""
        ...
