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
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from asyncz.errors import DB_TRANSIENT
from asyncz.jobs import (
    LIVE,
    TERMINAL,
    JobStatus,
)
from asyncz.port_types import Row
from asyncz.ports import JobStore, MetricsSink
from asyncz.service.enqueue import Enqueuer
from asyncz.settings import Settings

log = logging.getLogger("asyncz.service")

MAX_DEPENDENTS_SHOWN = 1000  # GET /jobs/{id} lists this many children (and says how many)
_ENDED = (JobStatus.DEAD.value, JobStatus.CANCELLED.value)


class Dependencies:
    def __init__(
        self, store: JobStore, enqueuer: Enqueuer, settings: Settings, metrics: MetricsSink
    ) -> None:
        self.store = store
        self.enqueuer = enqueuer
        self.settings = settings
        self.metrics = metrics

    async def settle(self, ended: Sequence[Row]) -> bool:
        """Apply these ended jobs (rows with ``id``, ``has_dependents``) to their children,
        level by level down the graph, page by page; released children are enqueued. True
        when done; False when :attr:`Settings.cascade_seconds` ran out first or the database
        failed midway: the recovery sweep finishes the work."""
        return await self.settle_ids([str(r["id"]) for r in ended if r.get("has_dependents")])

    async def settle_ids(self, parent_ids: Sequence[str], *, flagged: bool = False) -> bool:
        return await self.cascade(settle=parent_ids, flagged=flagged)

    async def cascade(
        self,
        *,
        settle: Sequence[str] = (),
        heal: Sequence[str] = (),
        flagged: bool = False,
        seconds: float | None = None,
    ) -> bool:
        """Settle the children of the ``settle`` jobs (finished) and heal those of the
        ``heal`` jobs (replayed), one page of :attr:`Settings.cascade_page_size` at a time,
        until done or ``seconds`` (default :attr:`Settings.cascade_seconds`) have passed.
        A cascade that outlives its first page is flagged ``cascade_pending`` so the sweep
        resumes it after a crash; ``flagged``: these jobs may be flagged already (the flag
        is cleared when nothing is left). True when done."""
        page = self.settings.cascade_page_size
        budget = self.settings.cascade_seconds if seconds is None else seconds
        deadline = time.monotonic() + budget
        todo_settle, todo_heal = _unique(settle), _unique(heal)
        marked: set[str] = set(todo_settle + todo_heal) if flagged else set()
        try:
            while todo_settle or todo_heal:
                if time.monotonic() >= deadline:
                    await self._mark([*todo_settle, *todo_heal], marked)
                    return False
                if todo_heal:
                    rows, more = await self.store.dependencies.heal(todo_heal, page)
                    ended, live = await self._changed(rows)
                    marked.update(live)  # revived with children: flagged by the statement
                    if more:
                        await self._mark(todo_heal, marked)
                    else:
                        todo_heal = []
                    todo_heal = _unique([*todo_heal, *live])
                    todo_settle = _unique([*todo_settle, *ended])
                    continue
                rows, more = await self.store.dependencies.settle(todo_settle, page)
                # the live jobs a cancelled one spawned end with it; a gather counts the ends
                # of its jobs (migration 0021), and the one completed wakes its gatherer
                spawned = await self.store.spawns.cascade(todo_settle, page)
                cancelled = [r for r in spawned if r["kind"] == "cancelled"]
                for gatherer in (r["id"] for r in spawned if r["kind"] == "gatherer"):
                    woken = await self.store.spawns.settle(gatherer, todo_settle)
                    await self.enqueuer.enqueue_quietly(woken)
                more = more or len(cancelled) >= page
                ended, _ = await self._changed([*rows, *cancelled])
                if more:
                    await self._mark(todo_settle, marked)
                    todo_settle = _unique([*todo_settle, *ended])
                else:
                    todo_settle = ended
            if marked:
                await self.store.dependencies.finish_cascades(sorted(marked))
        except DB_TRANSIENT as exc:
            log.warning("cascade not done yet (the recovery sweep will finish it): %s", exc)
            return False
        return True

    async def _mark(self, job_ids: Sequence[str], marked: set[str]) -> None:
        new = [i for i in job_ids if i not in marked]
        if new:
            await self.store.dependencies.mark_cascades(new)
            marked.update(new)

    async def _changed(self, rows: Sequence[Row]) -> tuple[list[str], list[str]]:
        """Enqueue the released jobs; the ended ones with dependents (their children settle
        next) and the live ones with dependents (healed: their children heal next)."""
        await self.enqueuer.enqueue_quietly([r for r in rows if r["status"] == "queued"])
        dead = sum(1 for r in rows if r["status"] == JobStatus.DEAD.value)
        if dead:
            self.metrics.add_metric("JobsDeadLettered", "Count", dead)
        with_children = [r for r in rows if r["has_dependents"]]
        ended = [str(r["id"]) for r in with_children if r["status"] in _ENDED]
        live = [str(r["id"]) for r in with_children if r["status"] in LIVE]
        return ended, live

    async def after_replay(self, replayed: Sequence[Row], *, seconds: float | None = None) -> bool:
        """Enqueue replayed jobs; first, for those in a graph, let a replayed child wait for
        its live parents, then bring back (page by page) the descendants that ended because
        of them. True when the heal is done, False when it is left to the sweep."""
        with_parents = [str(r["id"]) for r in replayed if r.get("depth")]
        try:
            changed = await self.store.dependencies.reevaluate(with_parents) if with_parents else []
        except DB_TRANSIENT as exc:
            log.warning("replayed jobs not re-evaluated yet (the sweep will): %s", exc)
            changed = []
        ended, _ = await self._changed(changed)
        parents = [str(r["id"]) for r in replayed if r.get("has_dependents")]
        done = await self.cascade(settle=ended, heal=parents, flagged=True, seconds=seconds)
        # enqueued once healed (or out of time): a parent that ran first would end unseen by
        # the children still to heal, which then wait on it until the sweep
        seen = {str(r["id"]) for r in changed}
        await self.enqueuer.enqueue_quietly([r for r in replayed if str(r["id"]) not in seen])
        return done

    async def resume(self, limit: int, seconds: float) -> int:
        """Recovery: go on with flagged cascades (a crash between pages, or a cascade that
        outlived its call) for at most ``seconds``; returns how many were looked at."""
        pending = await self.store.dependencies.pending_cascades(limit)
        if pending:
            await self.cascade(
                settle=[r["id"] for r in pending if r["status"] in TERMINAL],
                heal=[r["id"] for r in pending if r["status"] not in _ENDED],
                flagged=True,
                seconds=seconds,
            )
        return len(pending)

    async def sweep(self, after: tuple[datetime, str] | None, limit: int) -> SweepPage:
        """Recovery, over one page of waiting jobs after ``after``: settle the parents whose
        end one of them has not seen (a worker died in between), then release those none of
        whose parents is live. The page's last position (``None``: the walk reached the
        end) and how many waiting jobs changed."""
        waiting = await self.store.dependencies.scan_waiting(after, limit)
        ids = [r["id"] for r in waiting]
        stuck = await self.store.dependencies.stuck_parents(ids) if ids else []
        if stuck:
            await self.settle_ids(stuck)
        orphaned = await self.store.dependencies.release_orphaned(ids) if ids else []
        if orphaned:
            log.warning("released %d waiting jobs whose parents had all ended", len(orphaned))
            ended, _ = await self._changed(orphaned)
            await self.settle_ids(ended)
        last = (waiting[-1]["created_at"], waiting[-1]["id"]) if len(waiting) == limit else None
        return SweepPage(last, len(stuck) + len(orphaned))

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


@dataclass(frozen=True, slots=True)
class SweepPage:
    after: tuple[datetime, str] | None
    changed: int


def _unique(ids: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(ids))
