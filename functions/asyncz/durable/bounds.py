"""A durable task's time (docs/durable.md, "Long jobs"): its ``timeout_seconds`` bounds each
step it runs, and the job as a whole runs across as many invocations as it needs.

The attempt runs until the invocation's budget; each step it runs (not a replay) is given
its bound. Before a new step that cannot fit in what is left of the invocation, the attempt
ends suspended with a wake of now (a *continuation*): the id goes straight to the ready list,
a worker is asked for at once, and the next attempt replays the stored steps in a fresh
invocation. A step longer than its bound is a timed-out attempt (a try); attempts that end
at a continuation with no new step stored, ``MAX_IDLE_CONTINUATIONS`` in a row, end the job
dead: the step cannot start in any invocation, and is never retried forever."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from asyncz.errors import AsyncZError, FinalTaskError

# Attempts in a row that stored no new step, the last ending at a continuation, after which
# the job is dead (``no_progress``) rather than continued again.
MAX_IDLE_CONTINUATIONS = 3


class StepTimeoutError(AsyncZError):
    """A step ran longer than its bound (the task's ``timeout_seconds``): the attempt is
    timed out and counts as a try."""

    code = "timed_out"


class NoProgressError(FinalTaskError):
    """Continuations in a row stored no new step: the next step cannot start in any
    invocation."""

    code = "no_progress"


def continuation_reason(name: str) -> str:
    """What a continued job waits for (its ``waiting_for``)."""
    return f"continuation before step {name!r}"


@dataclass(slots=True)
class StepBound:
    """One attempt's clock for its steps: ``seconds``, the bound of one step; ``budget()``,
    the seconds the invocation has left. A sync task's step is bounded by moving the
    attempt's own timeout (``timer``, whose end is the invocation's, ``deadline``) to the
    step's end while it runs, and back once it is stored: a step overrunning it ends the
    attempt as a hung plain task's timeout does."""

    seconds: float
    budget: Callable[[], float]
    timer: asyncio.Timeout | None = None
    deadline: float | None = None  # the loop time the attempt's timeout ends (its budget)
    step: str | None = None  # the sync step running now under its bound
    idle_before: int = 0  # attempts before this one, since the last that stored a step

    def fits(self) -> bool:
        return self.budget() >= self.seconds

    def arm(self, name: str) -> None:
        """On the loop: from now, the attempt's timeout ends at this step's bound."""
        self.step = name
        if self.timer is not None:
            end = asyncio.get_running_loop().time() + self.seconds
            self.timer.reschedule(end if self.deadline is None else min(end, self.deadline))

    def disarm(self) -> None:
        self.step = None
        if self.timer is not None:
            self.timer.reschedule(self.deadline)

    def overran(self, name: str) -> StepTimeoutError:
        return StepTimeoutError(
            f"TimeoutError: step {name!r} exceeded its {self.seconds:g} s timeout "
            f"(a durable task's timeout_seconds bounds each step)"
        )

    def no_progress(self, name: str) -> NoProgressError:
        return NoProgressError(
            f"step {name!r} could not start: {MAX_IDLE_CONTINUATIONS} attempts in a row stored "
            f"no new step and the invocation had less than the step's {self.seconds:g} s "
            f'timeout left (MAX_IDLE_CONTINUATIONS, docs/durable.md "Long jobs")'
        )
