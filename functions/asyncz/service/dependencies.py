"""Job dependencies: a job waits (``waiting``, not in Redis) until its parents finish, then
runs, or ends at once by the rule each parent was given. A part of
:class:`asyncz.service.JobService`.

- **Submit.** Refs of a batch are resolved to ids, then the parents are locked and each job
  is planned from their statuses in the same transaction (:func:`plan_jobs`): nothing is
  stored for a refused request, and a parent cannot end unseen in between.
- **Settle.** Every statement that ends a job says whether it has dependents; if so, its
  children are settled (:meth:`Dependencies.settle`): a count down per child under its row
  lock (released once, by the last parent), or an end at once under ``fail``, and so on
  down the graph. A crash before that leaves work that the recovery sweep finishes
  (:meth:`Dependencies.sweep`).
- **Heal.** A replayed job brings back the descendants that ended because of it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from asyncz.errors import (
    DependencyLimitError,
    InvalidInputError,
    StoreUnavailableError,
    UnknownDependencyError,
)
from asyncz.jobs import (
    LIVE,
    MAX_DEPTH,
    MAX_PARENTS,
    PARENT_FAILED,
    Dependency,
    JobStatus,
    NewJob,
    ParentRule,
)
from asyncz.ports import Edge, JobStore, MetricsSink, PlannedJob, Row
from asyncz.service.enqueue import Enqueuer
from asyncz.settings import Settings

log = logging.getLogger("asyncz.service")

MAX_DEPENDENTS_SHOWN = 1000  # GET /jobs/{id} lists this many children (and says how many)
_ENDED = (JobStatus.DEAD.value, JobStatus.CANCELLED.value)


def resolve_refs(items: Sequence[tuple[str, NewJob]]) -> list[tuple[str, NewJob]]:
    """Each item's ``depends_on`` as job ids: a ref names an earlier item of the batch (its
    new id), anything else must be a job id. Duplicates of one parent are merged; more
    parents than :data:`MAX_PARENTS` are refused."""
    earlier: dict[str, str] = {}
    later = {new.ref for _, new in items if new.ref is not None}
    out = []
    for index, (job_id, new) in enumerate(items):
        deps: dict[str, Dependency] = {}
        for dep in new.depends_on:
            ref = dep.job_id if dep.job_id in earlier else None
            if ref is not None:
                parent = earlier[ref]
            elif dep.job_id in later:
                raise _about(
                    UnknownDependencyError(
                        f"depends_on names ref {dep.job_id!r} of this or a later item: a ref "
                        "names an earlier item of the batch"
                    ),
                    index, len(items),
                )  # fmt: skip
            elif _is_uuid(dep.job_id):
                parent = str(uuid.UUID(dep.job_id))
            else:
                raise _about(
                    UnknownDependencyError(
                        f"unknown dependency {dep.job_id!r}: not a job id, nor the ref of an "
                        "earlier item of the batch",
                        job_id=dep.job_id,
                    ),
                    index, len(items),
                )  # fmt: skip
            deps.setdefault(parent, Dependency(parent, dep.on_parent_failure, ref))
        if len(deps) > MAX_PARENTS:
            raise _about(
                DependencyLimitError(
                    f"a job depends on at most {MAX_PARENTS} jobs, not {len(deps)}"
                ),
                index, len(items),
            )  # fmt: skip
        if new.ref is not None:
            if new.ref in earlier:
                raise _about(
                    InvalidInputError(f"ref {new.ref!r} is given twice in the batch"),
                    index, len(items),
                )  # fmt: skip
            earlier[new.ref] = job_id
        out.append((job_id, replace(new, depends_on=tuple(deps.values()))))
    return out


def plan_jobs(items: Sequence[tuple[str, NewJob]], found: dict[str, Row]) -> list[PlannedJob]:
    """Each job's status from its parents (``found``: the existing ones, as locked; the
    others are earlier items): waiting on the live ones, queued when none is, or ended at
    once (dead, or cancelled) by the first parent that failed under ``fail``. Pure."""
    inside = {job_id for job_id, _ in items}
    named = {dep.job_id for _, new in items for dep in new.depends_on}
    for index, (_, new) in enumerate(items):
        for dep in new.depends_on:
            if dep.job_id not in inside and dep.job_id not in found:
                raise _about(
                    UnknownDependencyError(
                        f"unknown dependency {dep.job_id}: no such job (or it was purged)",
                        job_id=dep.job_id,
                    ),
                    index, len(items),
                )  # fmt: skip
    known: dict[str, tuple[str, int]] = {i: (r["status"], r["depth"]) for i, r in found.items()}
    planned = []
    for index, (job_id, new) in enumerate(items):
        parents = [(dep, *known[dep.job_id]) for dep in new.depends_on]
        depth = 1 + max((d for _, _, d in parents), default=-1)
        if depth > MAX_DEPTH:
            raise _about(
                DependencyLimitError(f"the graph is deeper than {MAX_DEPTH} levels here"),
                index, len(items),
            )  # fmt: skip
        failed = next(
            ((dep, s) for dep, s, _ in parents
             if dep.on_parent_failure is ParentRule.FAIL and s in _ENDED),
            None,
        )  # fmt: skip
        open_parents = sum(1 for _, s, _ in parents if s in LIVE)
        if failed is not None:
            status = JobStatus(failed[1])
        else:
            status = JobStatus.WAITING if open_parents else JobStatus.QUEUED
        edges = tuple(
            Edge(dep.job_id, dep.on_parent_failure.value, dep.ref, settled=s not in LIVE)
            for dep, s, _ in parents
        )
        planned.append(
            PlannedJob(
                job_id=job_id,
                new=new,
                status=status,
                open_parents=open_parents if status is JobStatus.WAITING else 0,
                depth=depth,
                has_dependents=job_id in named,
                last_error=f"{PARENT_FAILED}{failed[0].job_id}" if failed else None,
                edges=edges,
            )
        )
        known[job_id] = (status.value, depth)
    return planned


class Dependencies:
    def __init__(
        self, store: JobStore, enqueuer: Enqueuer, settings: Settings, metrics: MetricsSink
    ) -> None:
        self.store = store
        self.enqueuer = enqueuer
        self.settings = settings
        self.metrics = metrics

    async def settle(self, ended: Sequence[Row]) -> None:
        """Apply these ended jobs (rows with ``id``, ``has_dependents``) to their children,
        level by level down the graph; released children are enqueued. Quietly: when the
        database fails midway, the recovery sweep finishes the work."""
        await self.settle_ids([str(r["id"]) for r in ended if r.get("has_dependents")])

    async def settle_ids(self, parent_ids: Sequence[str]) -> None:
        todo = list(parent_ids)
        try:
            for _ in range(MAX_DEPTH + 1):
                if not todo:
                    return
                todo = await self._changed(await self.store.dependencies.settle(todo))
        except StoreUnavailableError as exc:
            log.warning("children not settled yet (the recovery sweep will): %s", exc)

    async def _changed(self, rows: Sequence[Row]) -> list[str]:
        """Enqueue the released jobs; the ended ones with dependents (the next level)."""
        await self.enqueuer.enqueue_quietly([r for r in rows if r["status"] == "queued"])
        dead = sum(1 for r in rows if r["status"] == JobStatus.DEAD.value)
        if dead:
            self.metrics.add_metric("JobsDeadLettered", "Count", dead)
        return [str(r["id"]) for r in rows if r["status"] in _ENDED and r["has_dependents"]]

    async def after_replay(self, replayed: Sequence[Row]) -> None:
        """Enqueue replayed jobs; first, for those in a graph, bring back the descendants
        that ended because of them, and let a replayed child wait for its live parents."""
        in_graph = [str(r["id"]) for r in replayed if r.get("has_dependents") or r.get("depth")]
        changed = await self.store.dependencies.heal(in_graph) if in_graph else []
        seen = {r["id"] for r in changed}
        await self.enqueuer.enqueue_quietly([r for r in replayed if str(r["id"]) not in seen])
        await self.settle_ids(await self._changed(changed))

    async def sweep(self, batch: int) -> int:
        """Recovery: settle the parents whose end a waiting child has not seen (a worker
        died in between), then release waiting jobs none of whose parents is live; returns
        how many waiting jobs changed."""
        stuck = await self.store.dependencies.stuck_parents(batch)
        await self.settle_ids(stuck)
        orphaned = await self.store.dependencies.release_orphaned(batch)
        if orphaned:
            log.warning("released %d waiting jobs whose parents had all ended", len(orphaned))
            await self.settle_ids(await self._changed(orphaned))
        return len(stuck) + len(orphaned)

    async def describe(self, job_id: str, *, depth: int, has_dependents: bool) -> dict[str, Any]:
        """``depends_on`` (each parent with its status and rule) and ``dependents`` (the
        first :data:`MAX_DEPENDENTS_SHOWN`, and ``dependents_total``)."""
        parents = await self.store.dependencies.parents([job_id], results=False) if depth else []
        children, total = (
            await self.store.dependencies.dependents(job_id, MAX_DEPENDENTS_SHOWN)
            if has_dependents
            else ([], 0)
        )
        return {
            "depends_on": [
                {k: p[k] for k in ("job_id", "status", "on_parent_failure", "ref")} for p in parents
            ],
            "dependents": children,
            "dependents_total": total,
        }

    async def parents_of(self, job_id: str) -> list[Row]:
        """A running job's parents with their statuses, results and errors."""
        return await self.store.dependencies.parents([job_id], results=True)


def _about(exc: Exception, index: int, size: int) -> Exception:
    """In a batch, the error names the item (``index``) it is about."""
    if size > 1 and hasattr(exc, "index"):
        exc.args = (f"jobs[{index}]: {exc}",)
        exc.index = index
    return exc


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True
