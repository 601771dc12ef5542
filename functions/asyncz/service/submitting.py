"""Submitting jobs, one or a batch: defaults, the durable INSERT, then the enqueue. A part
of :class:`asyncz.service.JobService`.

The order is the same for one job and for a batch: the rows are committed (one statement)
before their ids reach Redis (one pipelined round trip); when Redis fails in between, the
jobs are still accepted and recovery enqueues them.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Sequence
from dataclasses import replace
from typing import Any

from asyncz.errors import (
    AsyncZError,
    BatchSizeError,
    DuplicateJobError,
    DuplicateKeyError,
    InvalidInputError,
    OutcomeUnknownError,
    StoreOutcomeUnknownError,
    StoreUnavailableError,
    UniqueKeyHeldError,
    UnknownQueueError,
)
from asyncz.faults import crash_point
from asyncz.jobs import MAX_PARENTS, JobStatus, NewJob, UniqueScope, bounds_error
from asyncz.port_types import BatchItem, Dispatch, Row, SubmitOutcome, epoch_ms
from asyncz.ports import JobStore, MetricsSink
from asyncz.service.dependency_plan import plan_jobs, resolve_refs
from asyncz.service.enqueue import Enqueuer
from asyncz.service.unique import UniqueSubmits
from asyncz.settings import Settings
from asyncz.tasks.registry import TaskRegistry

log = logging.getLogger("asyncz.service")

MAX_BATCH_JOBS = 500
# A batch that is a graph (its items name each other's refs) may hold a whole fan-in: the
# most parents one job may have, with their root and the job that merges them.
MAX_GRAPH_JOBS = MAX_PARENTS + 2
# Tries of an INSERT whose idempotency key's holder was purged before it could be read (the
# key is free again): more than one in a row is a race nobody runs on purpose.
KEY_ROUNDS = 3
# How long a submit whose answer was lost looks for its row before saying the outcome is
# unknown (a database that stopped answering must not hold the caller for long).
RESOLVE_SECONDS = 1.0


class Submitting:
    def __init__(
        self,
        store: JobStore,
        enqueuer: Enqueuer,
        registry: TaskRegistry,
        settings: Settings,
        metrics: MetricsSink,
    ) -> None:
        self.store = store
        self.enqueuer = enqueuer
        self.registry = registry
        self.settings = settings
        self.metrics = metrics
        self.unique = UniqueSubmits(store, enqueuer, metrics)

    def complete_defaults(self, new: NewJob) -> NewJob:
        """Fill per-task then global defaults; raises UnknownTaskError for an unknown task,
        InvalidPayloadError for a payload that does not fit a typed task, InvalidInputError
        for a value out of a job's bounds (jobs.bounds_error)."""
        spec = self.registry.get(new.task)
        spec.check_payload(new.payload)  # a typed task's payload fits, or nothing is stored
        s = self.settings
        if new.queue not in s.queue_list:  # no worker polls it: it would never run
            raise UnknownQueueError(
                f"unknown queue {new.queue!r}; this deployment runs {', '.join(s.queue_list)} "
                "(ASYNCZ_QUEUES)"
            )
        max_retries = new.max_retries
        if max_retries is None:
            max_retries = (
                spec.max_retries if spec.max_retries is not None else s.default_max_retries
            )
        timeout = new.timeout_seconds or spec.timeout_seconds or s.default_timeout_seconds
        done = replace(
            new,
            max_retries=max_retries,
            timeout_seconds=min(timeout, s.max_timeout_seconds),
            unique_scope=new.unique_scope or (
                UniqueScope.QUEUED_OR_RUNNING if new.unique_key is not None else None),
        )  # fmt: skip
        if (why := bounds_error(done)) is not None:
            raise InvalidInputError(why)
        return done

    async def submit(self, new: NewJob) -> SubmitOutcome:
        """Commit the row, then enqueue its id. A Redis failure still returns the job; a
        database answer lost after the INSERT was sent is resolved before answering."""
        new = self.complete_defaults(new)
        if new.depends_on:
            item = (await self._submit_planned([new]))[0]
            assert item.job_id is not None
            return SubmitOutcome(item.job_id, JobStatus(item.status), item.enqueued)
        job_id = str(uuid.uuid4())
        if new.unique_key is not None:
            return await self.unique.submit(job_id, new, self._resolve_insert)
        for _ in range(KEY_ROUNDS):
            try:
                row = await self.store.insert_job(job_id, new)
            except StoreOutcomeUnknownError as exc:
                row = await self._resolve_insert(job_id, new, look=exc.answering)
            if row is not None:
                break
            assert new.idempotency_key is not None
            existing = await self.store.get_by_idempotency_key(new.idempotency_key)
            if existing is not None:
                await self.enqueuer.enqueue_queued([existing])
                raise DuplicateJobError(str(existing["id"]), existing["status"])
            # the other job was purged between the two statements: the key is free again
        else:
            raise DuplicateJobError("unknown", "purged")
        crash_point("submit.after_commit")  # chaos: the row is durable, Redis never hears
        it = Dispatch(
            job_id, new.queue, new.priority, row["run_at_ms"], row["due"], new.concurrency_key
        )
        enqueued = await self.enqueuer.dispatch_quietly([it])
        return SubmitOutcome(job_id=job_id, status=JobStatus.QUEUED, enqueued=enqueued)

    async def _resolve_insert(self, job_id: str, new: NewJob, *, look: bool) -> Row | None:
        """After an INSERT whose answer was lost: its row when it was stored, ``None`` when
        the idempotency key belongs to another job (a duplicate either way); else
        :class:`OutcomeUnknownError` (at once when the database is not answering at all)."""
        found = await self._find([job_id]) if look else None
        if found and job_id in found:
            return {"run_at_ms": epoch_ms(found[job_id]["run_at"]), "due": found[job_id]["due"]}
        if found is not None and new.idempotency_key is not None:
            other = await self._holders([new.idempotency_key])
            if other is not None and new.idempotency_key in other:
                return None
        raise OutcomeUnknownError(
            f"the database did not answer in time: job {job_id} may have been stored "
            f"(GET /jobs/{job_id} tells; if it was, it runs). Resubmitting with the same "
            "idempotency key is safe; without one it may make a second job",
            job_id=job_id,
        )

    async def _find(self, ids: Sequence[str]) -> dict[str, Row] | None:
        """The jobs among ``ids`` that exist; ``None`` when the database cannot tell soon."""
        return await _soon(self.store.find_jobs(ids))

    async def _holders(self, keys: Sequence[str]) -> dict[str, Row] | None:
        return await _soon(self.store.get_by_idempotency_keys(keys))

    async def submit_many(self, news: Sequence[NewJob]) -> list[BatchItem]:
        """A batch, all or nothing at validation (an error names the item's ``index``): one
        INSERT, then one enqueue. An item whose idempotency key exists is reported as a
        duplicate of that job; the others are accepted. One result per item, in order."""
        graph = any(new.depends_on or new.ref for new in news)
        limit = MAX_GRAPH_JOBS if graph else MAX_BATCH_JOBS
        if not 1 <= len(news) <= limit:
            raise BatchSizeError(
                f"a batch holds 1 to {MAX_BATCH_JOBS} jobs ({MAX_GRAPH_JOBS} when its items "
                f"depend on each other's refs), not {len(news)}"
            )
        completed = []
        for index, new in enumerate(news):
            try:
                completed.append(self.complete_defaults(new))
            except AsyncZError as exc:
                exc.args = (f"jobs[{index}]: {exc}",)
                exc.index = index
                raise
        if graph:
            return await self._submit_planned(completed)
        items = [(str(uuid.uuid4()), new) for new in completed]
        rows: list[Row | None] = [None] * len(items)
        existing: dict[str, Row] = {}
        held: dict[str, Row] = {}  # unique keys' holders
        unique = any(new.unique_key is not None for new in completed)
        insert = self.store.unique.insert_many if unique else self.store.insert_jobs
        todo = list(range(len(items)))
        for _ in range(KEY_ROUNDS):
            batch = [items[i] for i in todo]
            try:
                inserted = await insert(batch)
            except StoreOutcomeUnknownError as exc:
                inserted = await self._resolve_batch(batch, look=exc.answering)
            for i, row in zip(todo, inserted, strict=True):
                rows[i] = row
            keys = [items[i][1].idempotency_key for i in todo if rows[i] is None]
            if keys:
                existing |= await self.store.get_by_idempotency_keys([k for k in keys if k])
            if unique:
                held |= await self.unique.holders_of([new for _, new in items], rows, set(existing))
            # a key whose job was purged (or left its scope) meanwhile is free again
            todo = [i for i in todo if rows[i] is None
                    and items[i][1].idempotency_key not in existing
                    and items[i][1].unique_key not in held]  # fmt: skip
            if not todo:
                break
        crash_point("submit.after_commit")  # chaos: the rows are durable, Redis never hears
        dispatch = [
            Dispatch(
                job_id, new.queue, new.priority, row["run_at_ms"], row["due"], new.concurrency_key
            )
            for (job_id, new), row in zip(items, rows, strict=True)
            if row is not None
        ]
        enqueued = await self.enqueuer.dispatch_quietly(dispatch)
        duplicates = [existing[k] for _, new in items if (k := new.idempotency_key) in existing]
        duplicates += [held[k] for _, new in items if (k := new.unique_key) in held]
        await self.enqueuer.enqueue_queued([r for r in duplicates if str(r["id"]) not in {
            d.job_id for d in dispatch}])  # fmt: skip
        return [
            _result(job_id, new, row, existing, held, enqueued)
            for (job_id, new), row in zip(items, rows, strict=True)
        ]

    async def _resolve_batch(
        self, items: Sequence[tuple[str, NewJob]], *, look: bool
    ) -> list[Row | None]:
        """After a batch INSERT whose answer was lost (one statement: all of it committed or
        none): each item's row when it was stored, ``None`` for an item whose key another
        job holds; else :class:`OutcomeUnknownError`."""
        found = await self._find([job_id for job_id, _ in items]) if look else None
        if found:  # it committed: the items not found were duplicates
            return [
                {"run_at_ms": epoch_ms(r["run_at"]), "due": r["due"]}
                if (r := found.get(job_id)) else None
                for job_id, _ in items
            ]  # fmt: skip
        keys = [new.idempotency_key for _, new in items]
        if found is not None and all(keys):
            holders = await self._holders([k for k in keys if k])
            if holders is not None and all(k in holders for k in keys):
                return [None] * len(items)  # every item is a duplicate either way
        raise OutcomeUnknownError(
            "the database did not answer in time: this batch may have been stored. "
            "Resubmitting it with the same idempotency keys is safe; items without one may "
            "be stored twice"
        )

    async def _submit_planned(self, news: Sequence[NewJob]) -> list[BatchItem]:
        """Jobs with parents, or a batch with refs: one transaction that locks the parents,
        plans each job's status from theirs and stores the whole graph, or nothing."""
        items = resolve_refs([(str(uuid.uuid4()), new) for new in news])
        ids = [job_id for job_id, _ in items]
        external = sorted({d.job_id for _, new in items for d in new.depends_on} - set(ids))
        try:
            rows = await self.store.dependencies.insert_planned(
                external, lambda found: plan_jobs(items, found)
            )
        except DuplicateKeyError:
            return await self._planned_duplicates(items)
        except StoreOutcomeUnknownError as exc:
            found = await self._find(ids) if exc.answering else None
            if not found:  # one transaction: all of it committed, or none
                raise OutcomeUnknownError(
                    "the database did not answer in time: these jobs may have been stored "
                    f"(GET /jobs/{ids[0]} tells). Resubmitting with the same idempotency "
                    "keys is safe",
                    job_id=ids[0] if len(ids) == 1 else None,
                ) from exc
            rows = [{**found[i], "run_at_ms": epoch_ms(found[i]["run_at"])} for i in ids]
        crash_point("submit.after_commit")  # chaos: the rows are durable, Redis never hears
        dispatch = [
            Dispatch(
                job_id, new.queue, new.priority, row["run_at_ms"], row["due"], new.concurrency_key
            )
            for (job_id, new), row in zip(items, rows, strict=True)
            if row["status"] == JobStatus.QUEUED.value
        ]
        enqueued = await self.enqueuer.dispatch_quietly(dispatch)
        return [
            BatchItem(job_id, row["status"], duplicate=False,
                      enqueued=enqueued or row["status"] != JobStatus.QUEUED.value, ref=new.ref)
            for (job_id, new), row in zip(items, rows, strict=True)
        ]  # fmt: skip

    async def _planned_duplicates(self, items: Sequence[tuple[str, NewJob]]) -> list[BatchItem]:
        """An idempotency key of a graph exists: the graph was stored before when every
        item's key holds a job (the answer is that graph); else the first is a 409."""
        keys = [new.idempotency_key for _, new in items]
        holders = await self.store.get_by_idempotency_keys([k for k in keys if k])
        await self.enqueuer.enqueue_queued(list(holders.values()))
        if len(items) > 1 and all(k in holders for k in keys):
            return [
                BatchItem(str(holders[k]["id"]), holders[k]["status"], duplicate=True, ref=new.ref)
                for (_, new), k in zip(items, keys, strict=True)
                if k is not None
            ]
        index, key = next(((i, k) for i, k in enumerate(keys) if k in holders), (0, None))
        other = holders.get(key or "")
        error = DuplicateJobError(str(other["id"]), other["status"]) if other else (
            DuplicateJobError("unknown", "purged"))  # fmt: skip
        if len(items) > 1:
            error.args = (f"jobs[{index}]: {error}; a batch with dependencies is stored whole "
                          "or not at all",)  # fmt: skip
            error.index = index
        raise error


async def _soon(lookup: Awaitable[dict[str, Row]]) -> dict[str, Row] | None:
    """A look-up's answer within ``RESOLVE_SECONDS``, or ``None``. A database that stopped
    answering is not waited on: the look-up is left to finish in the background (its
    driver may take seconds more to give up), and the caller is told the outcome is
    unknown."""
    task = asyncio.ensure_future(lookup)
    done, _ = await asyncio.wait({task}, timeout=RESOLVE_SECONDS)
    if not done:
        task.cancel()
        task.add_done_callback(_forget)
        return None
    try:
        return task.result()
    except StoreUnavailableError:
        return None


def _forget(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: an abandoned look-up's failure is expected


def _result(
    job_id: str,
    new: NewJob,
    row: Row | None,
    existing: dict[str, Row],
    held: dict[str, Row],
    enqueued: bool,
) -> BatchItem:
    if row is not None:
        return BatchItem(job_id, JobStatus.QUEUED.value, duplicate=False, enqueued=enqueued)
    other = existing.get(new.idempotency_key or "") or held.get(new.unique_key or "")
    if other is None:  # the other job was purged between the two statements
        return BatchItem(None, "purged", duplicate=True)
    unique = new.idempotency_key not in existing  # else a duplicate of its idempotency key
    if unique and other["submitted_by_key_id"] != new.submitted_by_key_id:  # another key's
        return BatchItem(None, UniqueKeyHeldError.code, duplicate=True, unique=True)
    return BatchItem(str(other["id"]), str(other["status"]), duplicate=True, unique=unique)
