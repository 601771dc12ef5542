"""The worker's side of a durable task's attempt: open its journal (the stored steps, read
in pages) before the task runs, say how the attempt ended when a step decided it, and close
the journal when the attempt is over. A plain task's attempt never comes here."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from asyncz.durable.bounds import StepBound, StepTimeoutError
from asyncz.durable.clock import Clock
from asyncz.durable.journal import Journal, StepLimits
from asyncz.durable.sleeping import Suspension
from asyncz.durable.spawning import Spawner
from asyncz.errors import FinalTaskError, StepLeaseLostError, UnknownTaskError, describe
from asyncz.jobs import Lease
from asyncz.settings import Settings
from asyncz.store_ports import StepStore
from asyncz.tasks.registry import TaskContext, TaskSpec


def attempt_seconds(spec: TaskSpec, lease: Lease, budget: Callable[[], float]) -> float:
    """How long the attempt may run: a plain task, its timeout; a durable one, what the
    invocation has left (its timeout bounds each step: durable.bounds)."""
    return max(budget(), 0.0) if spec.durable else lease.timeout_seconds


async def open_steps(
    store: StepStore, spec: TaskSpec, lease: Lease, ctx: TaskContext, settings: Settings,
    clock: Clock, timer: asyncio.Timeout, budget: Callable[[], float],
    spawner: Spawner | None = None,
) -> None:  # fmt: skip
    """Give a durable task's context its journal (a plain task's: nothing to do), its steps
    bounded by the task's timeout within the invocation's ``budget()`` (``timer``: the
    attempt's timeout, which a sync task's step moves to its own end while it runs)."""
    if not spec.durable:
        return
    limits = StepLimits(
        settings.max_steps_per_job, settings.max_step_bytes_per_job, settings.max_result_bytes
    )
    journal = await Journal.open(store, lease, limits, clock, ctx.cancelled, spec.is_async)
    idle = lease.attempt - max(journal.history.last_attempt, lease.attempt_base) - 1
    journal.bound = StepBound(lease.timeout_seconds, budget,
                              None if spec.is_async else timer, timer.when(), None,
                              max(idle, 0))  # fmt: skip
    ctx.journal, ctx.spawner = journal, spawner


def timeout_error(ctx: TaskContext, lease: Lease) -> str:
    """Why an attempt timed out: its task overran its timeout, a durable task's step its
    bound, or a durable task's code between steps the invocation's time."""
    journal = ctx.journal
    if journal is None:
        return f"TimeoutError: task exceeded its {lease.timeout_seconds} s timeout"
    if journal.bound is not None and journal.bound.step is not None:
        return str(journal.bound.overran(journal.bound.step))
    return "TimeoutError: the invocation's time ran out while the task ran between its steps"


def overrun_of(ctx: TaskContext) -> str | None:
    """An async task's step that ran past its bound ended the attempt (timed out)."""
    verdict = ctx.journal.verdict if ctx.journal is not None else None
    return str(verdict) if isinstance(verdict, StepTimeoutError) else None


def verdict(ctx: TaskContext) -> BaseException | None:
    """Why an attempt whose task returned fails all the same: what a step decided for the
    whole attempt (nondeterminism, a lost lease) though the task caught it, or a step an
    async task never awaited."""
    journal = ctx.journal
    return None if journal is None else journal.verdict or journal.unawaited()


def failure_of(ctx: TaskContext, exc: BaseException, *, woken: bool = False
               ) -> tuple[str, bool] | None:  # fmt: skip
    """How a failed attempt ends: its error and whether it is final (dead at once, no
    retry); ``None`` when a step found the lease lost (the attempt writes nothing). A woken
    job whose task is no longer registered is dead at once (``unknown_task``)."""
    exc = (ctx.journal.verdict if ctx.journal is not None else None) or exc
    if isinstance(exc, StepLeaseLostError):
        return None
    if woken and isinstance(exc, UnknownTaskError):
        return f"{exc.code}: {exc}", True
    return describe(exc), isinstance(exc, FinalTaskError)


def suspension_of(ctx: TaskContext) -> Suspension | None:
    """How the attempt ends suspended (a sleep not due, a step's retry far off), if it does:
    that decides over whatever the task did after (raised, caught, returned)."""
    return None if ctx.journal is None else ctx.journal.suspension


def step_summary(ctx: TaskContext) -> dict[str, Any] | None:
    """For the attempt's outcome line: how many steps it ran (the rest replayed) and the
    last step it asked for (where a failed attempt stopped)."""
    journal = ctx.journal
    if journal is None or journal.last_asked is None:
        return None
    return {"steps": len(journal.ran), "step": journal.last_asked[:200]}


def close_steps(ctx: TaskContext) -> None:
    """The attempt is over: a thread it left behind can neither run nor store a step."""
    if ctx.journal is not None:
        ctx.journal.close()
