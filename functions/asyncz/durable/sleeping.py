"""A durable task's sleep (docs/durable.md, "Sleep"): a recorded step whose stored value is
its wake time. When the wake time has not come, the attempt ends *suspended*: the job waits
in PostgreSQL (status ``suspended``, ``run_at`` its wake time) holding no worker, lease or
concurrency slot, and its wake is a new claim that replays the history (the sleep, due
now, replays as done). A step's retry that would wait longer than the worker waits
(:data:`asyncz.durable.running.WAIT_IN_WORKER_SECONDS`) suspends the job the same way."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from asyncz.errors import AsyncZError, StepUsageError

MIN_SLEEP_SECONDS = 1.0
MAX_SLEEP_SECONDS = 365 * 86_400.0
# A replayed sleep counts as done this close to its wake time by the worker's clock: the
# wake's claim was due by PostgreSQL's clock, and the clocks of two hosts differ a little.
WAKE_EARLY_SECONDS = 1.0


class SuspendedError(AsyncZError):
    """Not a failure: the attempt gives way to a wait (the task ends here for now and is
    replayed at ``wake_at``). Kept as the attempt's verdict: a task that catches it still
    suspends, and asks for no step after it."""

    code = "suspended"

    def __init__(self, reason: str, wake_at: datetime) -> None:
        super().__init__(reason)
        self.reason = reason
        self.wake_at = wake_at


@dataclass(frozen=True, slots=True)
class Suspension:
    """How an attempt ends suspended: what it waits for, and when it wakes."""

    reason: str
    wake_at: datetime
    continuation: bool = False  # before a step the invocation had no time left for

    def delay(self, now: datetime) -> float:
        """Seconds from ``now`` to the wake (the job's run_at is PostgreSQL's now plus
        this, so the two hosts' clocks need not agree)."""
        return max(0.0, (self.wake_at - now).total_seconds())


def wake_time(name: str, now: datetime, seconds: float | None, until: datetime | None) -> str:
    """A new sleep's wake time (ISO 8601), checked: ``seconds`` from ``now``, or ``until``
    (aware), 1 second to 1 year ahead."""
    if (seconds is None) == (until is None):
        raise StepUsageError(f"sleep {name!r}: give seconds= or until=, one of them")
    if until is not None:
        if not isinstance(until, datetime) or until.tzinfo is None:
            raise StepUsageError(f"sleep {name!r}: until= is an aware datetime (UTC)")
        seconds = (until - now).total_seconds()
        if seconds < MIN_SLEEP_SECONDS:
            raise StepUsageError(
                f"sleep {name!r}: until={until.isoformat()} is {-seconds:.1f} s in the past "
                f"(or less than {MIN_SLEEP_SECONDS:g} s ahead): a sleep wakes 1 s to 1 year "
                f"from now"
            )
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not math.isfinite(seconds)
        or not MIN_SLEEP_SECONDS <= seconds <= MAX_SLEEP_SECONDS
    ):
        raise StepUsageError(
            f"sleep {name!r}: {seconds!r} s; a sleep lasts {MIN_SLEEP_SECONDS:g} s to "
            f"{MAX_SLEEP_SECONDS:g} s (1 year)"
        )
    return (until or now + timedelta(seconds=seconds)).isoformat()


def decode_wake(value: str) -> datetime:
    return datetime.fromisoformat(value)


def sleep_reason(name: str, wake_at: datetime) -> str:
    """What a suspended job waits for, in words (its ``waiting_for``)."""
    return f"sleep {name!r} until {wake_at.isoformat()}"


def retry_reason(name: str, wake_at: datetime) -> str:
    return f"retry of step {name!r} at {wake_at.isoformat()}"
