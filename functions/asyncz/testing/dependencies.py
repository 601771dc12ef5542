"""The in-memory store's job dependencies: its ``dependencies`` part
(:class:`asyncz.ports.DependencyStore`) on the store's dicts, with the SQL's semantics
(``asyncz/store/sql/dependencies.sql``)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from asyncz.errors import DuplicateKeyError
from asyncz.jobs import PARENT_FAILED, JobStatus
from asyncz.ports import Plan, Row
from asyncz.testing.maintenance import dispatch_row, now_utc

if TYPE_CHECKING:
    from asyncz.testing.store import MemoryStore

LIVE = ("waiting", "queued", "processing")
FINISHED = ("completed", "dead", "cancelled")
FAILED = ("dead", "cancelled")


class MemoryDependencies:
    def __init__(self, store: MemoryStore) -> None:
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
                              "settled": e.settled}
                for e in p.edges
            }  # fmt: skip
        return rows

    async def settle(self, parent_ids: Sequence[str]) -> list[Row]:
        ended = {i: self._status(i) for i in parent_ids if self._status(i) in FINISHED}
        changed = []
        for child, parents in self.edges.items():
            flipped = sorted(p for p in parents if p in ended and not parents[p]["settled"])
            if not flipped:
                continue
            for p in flipped:
                parents[p]["settled"] = True
            j = self.store.jobs.get(child)
            if j is None or j["status"] != "waiting":
                continue
            failed = [
                p for p in flipped if parents[p]["rule"] == "fail" and ended[p] != "completed"
            ]
            if failed:
                self._end(j, failed[0], ended[failed[0]])
            else:
                j["open_parents"] = max(j["open_parents"] - len(flipped), 0)
                if j["open_parents"] == 0:
                    j["status"] = JobStatus.QUEUED
                j["updated_at"] = now_utc()
            changed.append(self._changed(j))
        return changed

    async def heal(self, replayed: Sequence[str]) -> list[Row]:
        healed: list[str] = []
        frontier = list(replayed)
        while frontier:
            parent = frontier.pop()
            for child, parents in self.edges.items():
                j = self.store.jobs.get(child)
                if (parent in parents and j and j["status"] == "dead" and child not in healed
                        and j["last_error"] == f"{PARENT_FAILED}{parent}"):  # fmt: skip
                    healed.append(child)
                    frontier.append(child)
        now = now_utc()
        for child in healed:
            j = self.store.jobs[child]
            j.update(status=JobStatus.WAITING, attempt_base=j["attempts"], run_at=now,
                     finished_at=None, started_at=None, worker_id=None, last_error=None,
                     cancel_requested=False, updated_at=now)  # fmt: skip
        everyone = [*replayed, *healed]
        for i in everyone:
            for p, edge in self.edges.get(i, {}).items():
                edge["settled"] = self._status(p) in FINISHED
        statuses = {i: str(self.store.jobs[i]["status"]) for i in everyone if i in self.store.jobs}
        changed = []
        for i in sorted(everyone):
            j = self.store.jobs.get(i)
            parents = self.edges.get(i, {})
            if j is None or not parents or statuses[i] not in ("waiting", "queued"):
                continue
            now_of = {p: statuses.get(p, self._status(p)) for p in parents}
            open_parents = sum(1 for s in now_of.values() if s in LIVE)
            failed = sorted(p for p, s in now_of.items()
                            if parents[p]["rule"] == "fail" and s in FAILED)  # fmt: skip
            j["open_parents"] = open_parents
            if statuses[i] == "waiting" and failed:
                self._end(j, failed[0], now_of[failed[0]])
            else:
                j["status"] = JobStatus.WAITING if open_parents else JobStatus.QUEUED
            changed.append(self._changed(j))
        return changed

    async def stuck_parents(self, limit: int) -> list[str]:
        stuck: set[str] = set()
        for child, parents in self.edges.items():
            j = self.store.jobs.get(child)
            if j and j["status"] == "waiting":
                stuck |= {p for p, e in parents.items()
                          if not e["settled"] and self._status(p) in FINISHED}  # fmt: skip
        return sorted(stuck)[:limit]

    async def release_orphaned(self, limit: int) -> list[Row]:
        changed = []
        for child, parents in self.edges.items():
            j = self.store.jobs.get(child)
            if not j or j["status"] != "waiting":
                continue
            if any(self._status(p) in LIVE for p in parents):
                continue
            failed = sorted(p for p, e in parents.items()
                            if e["rule"] == "fail" and self._status(p) in FAILED)  # fmt: skip
            for e in parents.values():
                e["settled"] = True
            if failed:
                self._end(j, failed[0], self._status(failed[0]))
            else:
                j.update(status=JobStatus.QUEUED, open_parents=0, updated_at=now_utc())
            changed.append(self._changed(j))
            if len(changed) >= limit:
                break
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
            key=lambda j: (j["created_at"], uuid.UUID(j["id"])),
        )  # fmt: skip
        rows = [
            {"job_id": j["id"], "status": str(j["status"]),
             "on_parent_failure": self.edges[j["id"]][job_id]["rule"]}
            for j in children[:limit]
        ]  # fmt: skip
        return rows, len(children)

    async def any_waiting(self) -> bool:
        return any(j["status"] == "waiting" for j in self.store.jobs.values())
