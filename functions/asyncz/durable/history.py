"""A durable job's stored steps and the rule that matches a replay against them (pure).

Each stored step keeps the name of the step asked for just before it in the same flow of
control (``after``: the previous step of its asyncio task, or of the sync task's thread;
``None`` for the first). Code between steps is deterministic, so along one flow the names
come in the same order on every replay, whatever order concurrent flows (the branches of an
``asyncio.gather``) finish in. A replay's step call is matched by name: a stored step must
have the same kind and come after the same step; a name the history does not have is new,
and may run only once every step the history stored after that same predecessor has been
asked for again (else the task changed: it asks for a step where another one ran)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from asyncz.errors import NondeterministicError

COMPLETED = "completed"
FAILED = "failed"


@dataclass(frozen=True, slots=True)
class StoredStep:
    seq: int
    name: str
    kind: str
    after: str | None
    status: str  # completed (its result replays) or failed (it runs again)
    result: Any
    result_bytes: int
    attempts: int
    wait_until: datetime | None = None  # a wait's deadline (durable.waiting)


def _where(after: str | None) -> str:
    return f"after step {after!r}" if after is not None else "as its first step"


class History:
    """The stored steps of one job, as an attempt found them when it started."""

    def __init__(self, rows: Iterable[Mapping[str, Any]] = ()) -> None:
        self.steps: dict[str, StoredStep] = {}
        self.followers: dict[str | None, list[str]] = {}
        self.next_seq = 1
        self.result_bytes = 0
        self.last_attempt = 0  # the latest attempt that stored a step (0: none)
        for r in rows:
            self.load(r)

    @classmethod
    async def read(cls, load: Callable[[str, int, int], Awaitable[Sequence[Mapping[str, Any]]]],
                   job_id: str, page: int) -> History:  # fmt: skip
        """A job's stored steps, read ``page`` rows a statement (``load``: the store's)."""
        history, after = cls(), 0
        while True:
            rows = await load(job_id, after, page)
            for r in rows:
                history.load(r)
            if len(rows) < page:
                return history
            after = rows[-1]["seq"]

    def load(self, r: Mapping[str, Any]) -> None:
        """Add one stored row (as the store's ``load`` gives it)."""
        self.last_attempt = max(self.last_attempt, r.get("job_attempt") or 0)
        self.add(StoredStep(r["seq"], r["name"], r["kind"], r["after_name"], r["status"],
                            r["result"], r["result_bytes"], r["attempts"],
                            r.get("wait_until")))  # fmt: skip

    def add(self, step: StoredStep) -> None:
        self.steps[step.name] = step
        self.followers.setdefault(step.after, []).append(step.name)
        self.next_seq = max(self.next_seq, step.seq + 1)
        self.result_bytes += step.result_bytes

    def __len__(self) -> int:
        return len(self.steps)

    def match(self, name: str, kind: str, after: str | None) -> StoredStep | None:
        """The stored step of this name (``None``: a new one); a stored step of another
        kind, or stored after another step, is a changed task."""
        stored = self.steps.get(name)
        if stored is None:
            return None
        if stored.kind != kind:
            raise NondeterministicError(
                f"step {name!r} ran as a {stored.kind} step; the task now asks for a {kind} "
                f"step of that name"
            )
        if stored.after != after:
            raise NondeterministicError(
                f"step {name!r} ran {_where(stored.after)}; the task now asks for it "
                f"{_where(after)}"
            )
        return stored

    def unasked(self, after: str | None, asked: set[str]) -> list[str]:
        """The steps stored after ``after`` that this replay has not asked for yet."""
        return [n for n in self.followers.get(after, ()) if n not in asked]

    @staticmethod
    def changed(name: str, after: str | None, stored: str) -> NondeterministicError:
        """The verdict on a new step asked where the history has another one."""
        return NondeterministicError(
            f"the task asks for step {name!r} {_where(after)}, where its history has step "
            f"{stored!r}: the task changed while this job was in flight (version the step "
            f"names of a changed task, or replay the job with its steps reset)"
        )
