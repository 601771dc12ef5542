"""Running one step that the history does not answer: call its function (with its own
retries, waiting in the worker up to a small bound), check its result can be stored, and
store the outcome through the journal's lease fence before the task goes on."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, NoReturn, Protocol

from asyncz.durable.bounds import StepTimeoutError
from asyncz.durable.clock import Clock
from asyncz.durable.history import COMPLETED, FAILED
from asyncz.durable.sleeping import retry_reason
from asyncz.errors import (
    FinalTaskError,
    StepLeaseLostError,
    StepLimitError,
    StepUsageError,
    describe,
)
from asyncz.jobs import unstorable
from asyncz.retry import backoff_delay

# A step's retry waits in the worker up to this long (full jitter, doubling from
# ``backoff``); a longer wait suspends the job until the retry is due (durable.sleeping).
WAIT_IN_WORKER_SECONDS = 10.0
STEP_BACKOFF_MAX_SECONDS = 86_400.0  # the longest wait before a step's retry, and backoff
STEP_RETRIES_MAX = 20

IN_STEP: contextvars.ContextVar[bool] = contextvars.ContextVar("asyncz_in_step", default=False)


class Journal(Protocol):
    """What running a step needs of the attempt's journal (:mod:`asyncz.durable.journal`)."""

    clock: Clock
    running: int

    @property
    def max_result_bytes(self) -> int: ...
    def check_open(self) -> None: ...
    async def save(self, row: dict[str, Any], size: int) -> None: ...
    def save_from_thread(self, row: dict[str, Any], size: int) -> None: ...
    def suspend(self, reason: str, wake_at: datetime) -> NoReturn: ...
    def stored(self, name: str) -> None: ...
    def changed(self) -> None: ...
    def arm(self, call: StepCall) -> None: ...
    def step_seconds(self, call: StepCall) -> float | None: ...
    def overran(self, name: str) -> StepTimeoutError: ...


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True, slots=True)
class StepCall:
    """One step asked for: its name and kind, what to run, its retry policy, and how its
    stored JSON becomes the value the task gets (the same on its first run as on replay)."""

    name: str
    kind: str
    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    retries: int = 0
    backoff: float = 1.0
    decode: Callable[[Any], Any] = _same
    inline: bool = False  # a recorded value (now, uuid): computed on the loop, no thread
    rand: Callable[[], float] = lambda: random.random()  # looked up at each call (tests patch it)

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise StepUsageError(f"step {self.name!r}: its function is not callable")
        if (
            isinstance(self.retries, bool)
            or not isinstance(self.retries, int)
            or not (0 <= self.retries <= STEP_RETRIES_MAX)
        ):
            raise StepUsageError(
                f"step {self.name!r}: retries is a whole number from 0 to {STEP_RETRIES_MAX}"
            )
        if not 0 < self.backoff <= STEP_BACKOFF_MAX_SECONDS:
            raise StepUsageError(
                f"step {self.name!r}: backoff={self.backoff} s; a step's backoff is more than "
                f"0 and at most {STEP_BACKOFF_MAX_SECONDS:g} s (a day)"
            )

    def delay(self, runs: int) -> float:
        return backoff_delay(runs, self.backoff, STEP_BACKOFF_MAX_SECONDS, self.rand)


def retry_marker(runs: int, wake_at: datetime) -> str:
    """What a failed step whose retry suspended the job stores as its result: when it
    retries, and how many runs it had (its next run goes on counting from there)."""
    return json.dumps({"retry_at": wake_at.isoformat(), "runs": runs})


def encode(name: str, value: Any, max_bytes: int) -> tuple[str, int]:
    """A step result's JSON text and size; one that cannot be stored ends the job."""
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise StepUsageError(f"step {name!r} returned a value JSON cannot hold: {exc}") from None
    if "\\u0000" in text and (problem := unstorable(value)):
        raise StepUsageError(f"step {name!r} returned a value that {problem}")
    size = len(text)  # ASCII: dumps escapes every other character
    if size > max_bytes:
        raise StepLimitError(
            f"step {name!r} returned {size} bytes of JSON; the limit is {max_bytes} "
            f"(ASYNCZ_MAX_RESULT_BYTES): the step's result was not stored"
        )
    return text, size


def _row(
    call: StepCall, seq: int, after: str | None, runs: int, started: float,
    text: str | None = None, size: int = 0, error: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    return {
        "seq": seq, "name": call.name, "kind": call.kind, "after_name": after,
        "status": COMPLETED if error is None else FAILED, "result": text,
        "result_bytes": size, "error": error, "attempts": runs,
        "seconds": max(0.0, time.monotonic() - started),
    }  # fmt: skip


def _gives_up(exc: BaseException, call: StepCall, runs: int) -> bool:
    return isinstance(exc, FinalTaskError | StepLeaseLostError | StepTimeoutError) or (
        runs > call.retries
    )


def _retry_row(call: StepCall, seq: int, after: str | None, runs: int, done_before: int,
               started: float, exc: Exception, wake_at: datetime) -> dict[str, Any]:  # fmt: skip
    """A failed run whose retry suspends the job: stored with its retry time."""
    marker = retry_marker(runs, wake_at)
    return _row(call, seq, after, runs - done_before, started, marker, 0, describe(exc))


def _far_retry(journal: Journal, wait: float) -> datetime | None:
    """When a retry too far off to wait for in the worker is due (``None``: wait here)."""
    if wait <= WAIT_IN_WORKER_SECONDS:
        return None
    return journal.clock.now() + timedelta(seconds=wait)


def run_sync(journal: Journal, call: StepCall, seq: int, after: str | None,
             done_before: int = 0) -> Any:  # fmt: skip
    """Run a step on a sync task's thread; its outcome is stored before this returns.
    ``done_before``: the runs it had before its retry suspended the job."""
    started, runs = time.monotonic(), done_before
    journal.arm(call)  # its runs (and their retries' waits here) are bounded from now
    while True:
        runs += 1
        token = IN_STEP.set(True)
        try:
            value = call.fn(*call.args, **call.kwargs)
        except Exception as exc:
            if _gives_up(exc, call, runs):
                if not isinstance(exc, StepLeaseLostError):
                    journal.save_from_thread(_row(call, seq, after, runs - done_before, started,
                                                  error=describe(exc)), 0)  # fmt: skip
                raise
            journal.check_open()
            wait = call.delay(runs)
            if (wake_at := _far_retry(journal, wait)) is not None:
                row = _retry_row(call, seq, after, runs, done_before, started, exc, wake_at)
                journal.save_from_thread(row, 0)
                journal.suspend(retry_reason(call.name, wake_at), wake_at)
            journal.clock.sleep(wait)
            continue
        finally:
            IN_STEP.reset(token)
        if inspect.isawaitable(value):
            if inspect.iscoroutine(value):
                value.close()
            raise StepUsageError(
                f"step {call.name!r} returned an awaitable: a sync task's steps are plain "
                f"functions (make the task async to await them)"
            )
        text, size = encode(call.name, value, journal.max_result_bytes)
        journal.save_from_thread(_row(call, seq, after, runs - done_before, started, text, size),
                                 size)  # fmt: skip
        journal.stored(call.name)
        return call.decode(json.loads(text))


async def _bounded(journal: Journal, call: StepCall) -> Any:
    """An async task's step run, bounded by the task's ``timeout_seconds``."""
    seconds = journal.step_seconds(call)
    if seconds is None:
        return await _invoke(call)
    timer = asyncio.timeout(seconds)
    try:
        async with timer:
            return await _invoke(call)
    except TimeoutError:
        if timer.expired():
            raise journal.overran(call.name) from None
        raise


async def _invoke(call: StepCall) -> Any:
    if inspect.iscoroutinefunction(call.fn):
        return await call.fn(*call.args, **call.kwargs)
    if call.inline:
        value = call.fn(*call.args, **call.kwargs)
    else:  # a blocking function must not hold the worker's event loop
        value = await asyncio.to_thread(call.fn, *call.args, **call.kwargs)
    return await value if inspect.isawaitable(value) else value


async def run_async(journal: Journal, call: StepCall, seq: int, after: str | None,
                    done_before: int = 0) -> Any:  # fmt: skip
    """Run a step of an async task on the event loop (a sync function on a thread)."""
    started, runs = time.monotonic(), done_before
    journal.running += 1
    try:
        while True:
            runs += 1
            token = IN_STEP.set(True)
            try:
                value = await _bounded(journal, call)
            except Exception as exc:
                if _gives_up(exc, call, runs):
                    if not isinstance(exc, StepLeaseLostError | StepTimeoutError):
                        await journal.save(_row(call, seq, after, runs - done_before, started,
                                                error=describe(exc)), 0)  # fmt: skip
                    raise
                journal.check_open()
                wait = call.delay(runs)
                if (wake_at := _far_retry(journal, wait)) is not None:
                    row = _retry_row(call, seq, after, runs, done_before, started, exc, wake_at)
                    await journal.save(row, 0)
                    journal.suspend(retry_reason(call.name, wake_at), wake_at)
                await journal.clock.asleep(wait)
                continue
            finally:
                IN_STEP.reset(token)
            text, size = encode(call.name, value, journal.max_result_bytes)
            await journal.save(_row(call, seq, after, runs - done_before, started, text, size),
                               size)  # fmt: skip
            journal.stored(call.name)
            return call.decode(json.loads(text))
    finally:
        journal.running -= 1
        journal.changed()
