"""The in-memory store's job dependencies: its ``dependencies`` part
(:class:`asyncz.ports.DependencyStore`) on the store's dicts, with the SQL's semantics
(``asyncz/store/sql/dependencies.sql``)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from asyncz.errors import DuplicateKeyError
from asyncz.jobs import PARENT_FAILED, JobStatus
from asyncz.port_types import Plan, Row
from asyncz.testing.maintenance import dispatch_row, now_utc

if TYPE_CHECKING:
    from asyncz.testing.tables import StoreTables

LIVE = ("waiting", "queued", "processing", "suspended")
FINISHED = ("completed", "dead", "cancelled")
FAILED = ("dead", "cancelled")


class MemoryDependencies:
    def __init__(self, store: StoreTables) -> None:
        self.store = store
        # child id -> parent id -> {"rule", "ref", "settled"}
        self.edges: dict[str, dict[str, dict[str, Any]]] = {}

    def _status(self, job_id: str) -> str:
        j = self.store.jobs.get(job_id)
        return str(j["status"]) if j else "dead"  # a parent gone counts as dead

    def needed(self, job_id: str) -> bool:
        """Whether an unfinished job depends on this one (retention and purge keep it)."""
        return any(
            job_id in parents and self._status(child) in LIVE
            for child, parents in self.edges.items()
        )

    def forget(self, job_id: str) -> None:
        self.edges.pop(job_id, None)

    def _changed(self, j: dict[str, Any]) -> Row:
        return {**dispatch_row(j), "due": j["run_at"] <= now_utc()}

    def _end(self, j: dict[str, Any], parent_id: str, parent_status: str) -> None:
        status = JobStatus.CANCELLED if parent_status == "cancelled" else JobStatus.DEAD
        j.update(status=status, last_error=f"{PARENT_FAILED}{parent_id}", finished_at=now_utc(),
                 open_parents=0, updated_at=now_utc())  # fmt: skip

    async def insert_planned(self, parent_ids: Sequence[str], plan: Plan) -> list[Row]:
        found = {
            i: {"id": i, "status": str(j["status"]), "depth": j["depth"]}
            for i in parent_ids
            if (j := self.store.jobs.get(i))
        }
        planned = plan(found)
        keys = [p.new.idempotency_key for p in planned if p.new.idempotency_key]
        taken = {j["idempotency_key"] for j in self.store.jobs.values()}
        if len(set(keys)) < len(keys) or taken.intersection(keys):
            raise DuplicateKeyError("an idempotency key of this submit exists")
        for i in found:
            self.store.jobs[i]["has_dependents"] = True
        rows = []
        for p in planned:
            ended = p.status in (JobStatus.DEAD, JobStatus.CANCELLED)
            row = await self.store.insert_job(
                p.job_id, p.new, status=p.status, open_parents=p.open_parents, depth=p.depth,
                has_dependents=p.has_dependents, last_error=p.last_error,
                finished_at=now_utc() if ended else None,
            )  # fmt: skip
            assert row is not None
            rows.append({"id": p.job_id, "status": p.status.value, **row})
            self.edges[p.job_id] = {
                e.parent_id: {"rule": e.on_parent_failure, "ref": e.parent_ref,
                              "settled": e.settled, "ended": e.parent_ended}
                for e in p.edges
            }  # fmt: skip
        return rows

    def _ended_as(self, parent_id: str, edge: dict[str, Any]) -> str:
        """A parent's status; one that is gone, as its edge kept it (else dead)."""
        j = self.store.jobs.get(parent_id)
        return str(j["status"]) if j else str(edge.get("ended") or "dead")

    async def settle(self, parent_ids: Sequence[str], limit: int) -> tuple[list[Row], bool]:
        ended = {i: self._status(i) for i in parent_ids if self._status(i) in FINISHED}
        page = [
            (child, p) for child, parents in self.edges.items()
            for p, e in parents.items() if p in ended and not e["settled"]
        ][:limit]  # fmt: skip
        flipped_of: dict[str, list[str]] = {}
        for child, p in page:
            self.edges[child][p].update(settled=True, ended=ended[p])
            flipped_of.setdefault(child, []).append(p)
        changed = []
        for child, flipped in flipped_of.items():
            j, parents = self.store.jobs.get(child), self.edges[child]
            if j is None or j["status"] != "waiting":
                continue
            failed = sorted(
                p for p in flipped if parents[p]["rule"] == "fail" and ended[p] != "completed"
            )
            if failed:
                self._end(j, failed[0], ended[failed[0]])
            else:
                j["open_parents"] = max(j["open_parents"] - len(flipped), 0)
                if j["open_parents"] == 0:
                    j["status"] = JobStatus.QUEUED
                j["updated_at"] = now_utc()
            changed.append(self._changed(j))
        return changed, len(page) >= limit

    def _blamed(self, parent_ids: Sequence[str]) -> list[str]:
        """The dead jobs that ended because of one of these (not dead or cancelled again)."""
        blames = {f"{PARENT_FAILED}{p}": p for p in parent_ids if self._status(p) not in FAILED}
        return [
            i for i, j in self.store.jobs.items()
            if j["status"] == "dead" and (p := blames.get(str(j["last_error"]))) is not None
            and p in self.edges.get(i, {})
        ]  # fmt: skip

    async def heal(self, replayed: Sequence[str], limit: int) -> tuple[list[Row], bool]:
        healed = self._blamed(replayed)[:limit]
        now = now_utc()
        for child in healed:
            j = self.store.jobs[child]
            j.update(status=JobStatus.WAITING, attempt_base=j["attempts"], run_at=now,
                     suspensions=0, first_started_at=None,
                     finished_at=None, started_at=None, worker_id=None, last_error=None,
                     cancel_requested=False, cascade_pending=j["has_dependents"],
                     updated_at=now)  # fmt: skip
        return await self.reevaluate(healed), len(healed) >= limit

    async def reevaluate(self, job_ids: Sequence[str]) -> list[Row]:
        for i in job_ids:
            for p, edge in self.edges.get(i, {}).items():
                edge["settled"] = self._status(p) in FINISHED
        changed = []
        for i in sorted(job_ids):
            j = self.store.jobs.get(i)
            parents = self.edges.get(i, {})
            if j is None or not parents or j["status"] not in ("waiting", "queued"):
                continue
            now_of = {p: self._ended_as(p, e) for p, e in parents.items()}
            open_parents = sum(1 for s in now_of.values() if s in LIVE)
            failed = sorted(p for p, s in now_of.items()
                            if parents[p]["rule"] == "fail" and s in FAILED)  # fmt: skip
            j["open_parents"] = open_parents
            if j["status"] == "waiting" and failed:
                self._end(j, failed[0], now_of[failed[0]])
            else:
                j["status"] = JobStatus.WAITING if open_parents else JobStatus.QUEUED
            changed.append(self._changed(j))
        return changed

    async def mark_cascades(self, job_ids: Sequence[str]) -> None:
        for i in job_ids:
            if i in self.store.jobs:
                self.store.jobs[i]["cascade_pending"] = True

    async def finish_cascades(self, job_ids: Sequence[str]) -> list[str]:
        done = []
        for i in job_ids:
            j = self.store.jobs.get(i)
            if not j or not j["cascade_pending"]:
                continue
            unsettled = j["status"] in FINISHED and any(
                i in parents and not parents[i]["settled"] for parents in self.edges.values()
            )
            if not unsettled and not (j["status"] not in FAILED and self._blamed([i])):
                j["cascade_pending"] = False
                done.append(i)
        return done

    async def pending_cascades(self, limit: int) -> list[Row]:
        flagged = sorted(i for i, j in self.store.jobs.items() if j["cascade_pending"])
        return [{"id": i, "status": str(self.store.jobs[i]["status"])} for i in flagged[:limit]]

    async def scan_waiting(self, after: tuple[datetime, str] | None, limit: int) -> list[Row]:
        rows = sorted(
            ((j["created_at"], uuid.UUID(i)) for i, j in self.store.jobs.items()
             if j["status"] == "waiting"),
            reverse=True,
        )  # fmt: skip
        if after is not None:
            mark = (after[0], uuid.UUID(after[1]))
            rows = [r for r in rows if r < mark]
        return [{"id": str(i), "created_at": at} for at, i in rows[:limit]]

    async def stuck_parents(self, child_ids: Sequence[str]) -> list[str]:
        stuck: set[str] = set()
        for child in child_ids:
            j = self.store.jobs.get(child)
            if j and j["status"] == "waiting":
                stuck |= {p for p, e in self.edges.get(child, {}).items()
                          if not e["settled"] and self._status(p) in FINISHED}  # fmt: skip
        return sorted(stuck)

    async def release_orphaned(self, child_ids: Sequence[str]) -> list[Row]:
        changed = []
        for child in child_ids:
            j, parents = self.store.jobs.get(child), self.edges.get(child, {})
            if not j or j["status"] != "waiting":
                continue
            if any(self._status(p) in LIVE for p in parents):
                continue
            ended = {p: self._ended_as(p, e) for p, e in parents.items()}
            failed = sorted(p for p, e in parents.items()
                            if e["rule"] == "fail" and ended[p] in FAILED)  # fmt: skip
            for e in parents.values():
                e["settled"] = True
            if failed:
                self._end(j, failed[0], ended[failed[0]])
            else:
                j.update(status=JobStatus.QUEUED, open_parents=0, updated_at=now_utc())
            changed.append(self._changed(j))
        return changed

    async def parents(self, child_ids: Sequence[str], *, results: bool) -> list[Row]:
        rows = []
        for child in child_ids:
            for p in sorted(self.edges.get(child, {}), key=uuid.UUID):
                edge, j = self.edges[child][p], self.store.jobs.get(p)
                rows.append({
                    "child_id": child, "job_id": p, "ref": edge["ref"],
                    "on_parent_failure": edge["rule"],
                    "status": str(j["status"]) if j else "purged",
                    "result": j["result"] if j and results else None,
                    "last_error": j["last_error"] if j and results else None,
                })  # fmt: skip
        return rows

    async def dependents(self, job_id: str, limit: int) -> tuple[list[Row], int]:
        children = sorted(
            (self.store.jobs[c] for c, parents in self.edges.items()
             if job_id in parents and c in self.store.jobs),
            key=lambda j: (self.edges[j["id"]][job_id]["settled"], uuid.UUID(j["id"])),
        )  # fmt: skip
        rows = [
            {"job_id": j["id"], "status": str(j["status"]),
             "on_parent_failure": self.edges[j["id"]][job_id]["rule"]}
            for j in children[:limit]
        ]  # fmt: skip
        return rows, len(children)

    async def any_waiting(self) -> bool:
        return any(j["status"] == "waiting" for j in self.store.jobs.values())
