"""The steps of one attempt of a durable task (docs/durable.md): each step call is matched
against the job's stored history (:mod:`asyncz.durable.history`), replayed from it, or run
(with its own retries) and stored through the lease fence before the task goes on.

A sync task calls steps on its own thread (the write goes to the worker's event loop and
the thread waits for it); an async task awaits them on the loop. Once the attempt has ended
(timeout, cancel, lost lease) the journal refuses every step, so a thread left behind can
neither run one nor store one. A verdict (nondeterminism, a lost lease) is kept: the attempt
ends with it even if the task catches the exception.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Coroutine
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NoReturn

from asyncz.durable.bounds import (
    MAX_IDLE_CONTINUATIONS,
    StepBound,
    StepTimeoutError,
    continuation_reason,
)
from asyncz.durable.clock import Clock
from asyncz.durable.history import COMPLETED, History, StoredStep
from asyncz.durable.running import IN_STEP, StepCall, run_async, run_sync
from asyncz.durable.sleeping import (
    WAKE_EARLY_SECONDS,
    SuspendedError,
    Suspension,
    retry_reason,
    sleep_reason,
)
from asyncz.durable.waiting import WaitCall, settle
from asyncz.errors import NondeterministicError, StepLeaseLostError, StepLimitError, StepUsageError
from asyncz.jobs import Lease
from asyncz.store_ports import StepStore
from asyncz.tracing import step_event

HISTORY_PAGE = 500  # stored steps read per statement at an attempt's start
SETTLE_SECONDS = 0.2  # async: how long a new step waits, with nothing else happening, for
# the steps the history holds before it to be asked for (gather's other branches)
MAX_NAME = 200

# (journal, the last step asked for in this flow of control): each asyncio task and each
# sync task's thread has its own copy, so concurrent branches keep their own order
_LAST: contextvars.ContextVar[tuple[int, str] | None] = contextvars.ContextVar(
    "asyncz_last_step", default=None
)


@dataclass(frozen=True, slots=True)
class StepLimits:
    max_steps: int  # ASYNCZ_MAX_STEPS_PER_JOB
    max_bytes: int  # ASYNCZ_MAX_STEP_BYTES_PER_JOB (stored results, all steps of a job)
    max_result_bytes: int  # ASYNCZ_MAX_RESULT_BYTES (one step's result)


class Journal:
    def __init__(self, store: StepStore, lease: Lease, history: History, limits: StepLimits,
                 clock: Clock, loop: asyncio.AbstractEventLoop, ended: threading.Event,
                 is_async: bool) -> None:  # fmt: skip
        self.store, self.lease, self.history, self.limits = store, lease, history, limits
        self.clock, self.loop, self.ended, self.is_async = clock, loop, ended, is_async
        self.asked: set[str] = set()
        self.new_steps = 0  # steps stored for the first time by this attempt (or reserved)
        self.ran: list[str] = []  # steps this attempt ran (the rest it asked for replayed)
        self.last_asked: str | None = None  # the step the attempt asked for last
        self.verdict: BaseException | None = None
        self.suspension: Suspension | None = None  # the attempt ends suspended
        self.running = 0  # steps executing now (async): they may still ask for more
        self.bound: StepBound | None = None  # each step's time, and the invocation's
        self._changed = asyncio.Event()
        self._thread: int | None = None
        self._counters: dict[str, int] = {}
        self._unawaited: dict[str, None] = {}  # async steps asked for, never awaited yet

    @classmethod
    async def open(cls, store: StepStore, lease: Lease, limits: StepLimits, clock: Clock,
                   ended: threading.Event, is_async: bool) -> Journal:  # fmt: skip
        """Read the job's stored steps, a page at a time, and start the attempt's journal."""
        history = await History.read(store.load, lease.job_id, HISTORY_PAGE)
        loop = asyncio.get_running_loop()
        return cls(store, lease, history, limits, clock, loop, ended, is_async)

    @property
    def max_result_bytes(self) -> int:
        return self.limits.max_result_bytes

    def close(self) -> None:
        """The attempt is over: refuse every step from now on."""
        self.ended.set()

    # --- the calls TaskContext makes ---------------------------------------------------

    def call(self, call: StepCall) -> Any:
        """Replay or run one step: its value (a sync task) or a coroutine of it (async)."""
        if self.is_async:
            self._unawaited[call.name] = None
            return self._acall(call)
        after, stored = self._ask(call)
        if stored is not None and stored.status == COMPLETED:
            return call.decode(stored.result)
        done = self._resume(call, stored)
        self._fit(call)
        return run_sync(self, call, self.reserve(call, stored), after, done)

    def sleep(self, call: StepCall) -> Any:
        """A sleep (its step's value is its wake time): ``None`` once due, else the attempt
        ends suspended (:mod:`asyncz.durable.sleeping`). A coroutine in an async task."""
        if self.is_async:
            self._unawaited[call.name] = None
            return self._asleep(call)
        return self._woken(call.name, self.call(call))

    def wait(self, call: WaitCall) -> Any:
        """A wait (:mod:`asyncz.durable.waiting`): its value once resolved (or timed out),
        else the attempt ends suspended until its deadline. A coroutine in an async task."""
        if self.is_async:
            self._unawaited[call.name] = None
            return self._await(call)
        after, stored = self._ask(call.step)
        return self._from_thread(settle(self, call, after, stored))

    async def _await(self, call: WaitCall) -> Any:
        self._unawaited.pop(call.name, None)
        after, stored = await self._aask(call.step)
        return await settle(self, call, after, stored)

    def lost(self, name: str) -> NoReturn:
        """A fenced write found the lease gone: the verdict (the attempt stops)."""
        self.verdict = StepLeaseLostError(f"step {name!r} was not stored: the attempt's "
                                          f"lease is lost")  # fmt: skip
        raise self.verdict

    async def _asleep(self, call: StepCall) -> None:
        self._woken(call.name, await self._acall(call))

    def _woken(self, name: str, wake_at: datetime) -> None:
        early = timedelta(seconds=WAKE_EARLY_SECONDS)
        if name not in self.ran and wake_at <= self.clock.now() + early:
            return None  # replayed and due: the sleep is over
        self.suspend(sleep_reason(name, wake_at), wake_at)

    def _resume(self, call: StepCall, stored: StoredStep | None) -> int:
        """The runs a failed step had before its retry suspended the job (0: none, or it
        gave up: a new series of retries); not due yet: the job sleeps on."""
        marker = stored.result if stored is not None else None
        if not isinstance(marker, dict) or "retry_at" not in marker:
            return 0
        wake_at = datetime.fromisoformat(marker["retry_at"])
        if wake_at > self.clock.now() + timedelta(seconds=WAKE_EARLY_SECONDS):
            self.suspend(retry_reason(call.name, wake_at), wake_at)
        return int(marker["runs"])

    def suspend(self, reason: str, wake_at: datetime, continuation: bool = False) -> NoReturn:
        """End the attempt suspended until ``wake_at`` (the verdict: no step runs after)."""
        self.suspension = Suspension(reason, wake_at, continuation)
        self.verdict = SuspendedError(reason, wake_at)
        raise self.verdict

    def _fit(self, call: StepCall) -> None:
        """Before a step runs (not a replay): one the invocation has no time left for ends
        the attempt in a continuation (durable.bounds), or, after attempts in a row that
        stored no step, ends the job (it cannot start in any invocation)."""
        bound = self.bound
        if bound is None or call.inline or bound.fits():
            return
        if not self.ran and bound.idle_before + 1 >= MAX_IDLE_CONTINUATIONS:
            self.verdict = bound.no_progress(call.name)
            raise self.verdict
        self.suspend(continuation_reason(call.name), self.clock.now(), continuation=True)

    def step_seconds(self, call: StepCall) -> float | None:
        """An async step's bound (``None``: unbounded: a recorded value, or no bound)."""
        return None if self.bound is None or call.inline else self.bound.seconds

    def overran(self, name: str) -> StepTimeoutError:
        """A step ran past its bound: the attempt's verdict (timed out)."""
        assert self.bound is not None
        self.verdict = self.bound.overran(name)
        return self.verdict  # type: ignore[return-value]

    def arm(self, call: StepCall) -> None:
        """From a sync task's thread, before its step runs: bound the attempt by the step."""
        if self.bound is not None and self.bound.timer is not None and not call.inline:
            asyncio.run_coroutine_threadsafe(self._arm(call.name), self.loop).result()

    async def _arm(self, name: str) -> None:
        self.check_open()
        assert self.bound is not None
        self.bound.arm(name)

    def auto_name(self, kind: str) -> str:
        """``now:1``, ``now:2``… in the order the attempt asks (name them in concurrent code)."""
        self._counters[kind] = n = self._counters.get(kind, 0) + 1
        return f"{kind}:{n}"

    def unawaited(self) -> StepUsageError | None:
        """An async task that returned with a step it never awaited (the step never ran)."""
        if not self._unawaited:
            return None
        name = next(iter(self._unawaited))
        return StepUsageError(f"step {name!r} was never awaited, so it never ran: in an async "
                              f"task, await ctx.step(...)")  # fmt: skip

    async def _acall(self, call: StepCall) -> Any:
        self._unawaited.pop(call.name, None)
        after, stored = await self._aask(call)
        if stored is not None and stored.status == COMPLETED:
            return call.decode(stored.result)
        done = self._resume(call, stored)
        self._fit(call)
        return await run_async(self, call, self.reserve(call, stored), after, done)

    # --- matching against the history --------------------------------------------------

    def _ask(self, call: StepCall) -> tuple[str | None, StoredStep | None]:
        """Check the call; the step before it in its flow, and its stored step (replayed
        when completed, run again when failed; ``None``: new). A new step in a sync task
        must come where the history has nothing else left after that same step."""
        after, stored = self._match(call)
        if stored is None:
            self._check_new(call, after)
        return after, stored

    async def _aask(self, call: StepCall) -> tuple[str | None, StoredStep | None]:
        after, stored = self._match(call)
        if stored is None:
            # gather's other branches may still ask for what the history stored here
            while self.history.unasked(after, self.asked):
                self._changed.clear()
                try:
                    async with asyncio.timeout(SETTLE_SECONDS):
                        await self._changed.wait()
                except TimeoutError:
                    if not self.running:
                        break
            self._check_new(call, after)
        return after, stored

    def _match(self, call: StepCall) -> tuple[str | None, StoredStep | None]:
        self.check_open()
        name = call.name
        if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME:
            raise StepUsageError(f"a step name is a string of 1 to {MAX_NAME} characters")
        if IN_STEP.get():
            raise StepUsageError(f"step {name!r} asked for inside another step: steps do not nest")
        if not self.is_async:
            me = threading.get_ident()
            if self._thread not in (None, me):
                raise StepUsageError(
                    f"step {name!r} asked for from another thread: a sync task asks for its "
                    f"steps on its own thread (an async task can run steps concurrently)"
                )
            self._thread = me
        if name in self.asked:
            raise StepUsageError(
                f"step name {name!r} is used twice in this job: each step has a name of its "
                f'own (a loop names its steps f"chapter:{{i}}")'
            )
        last = _LAST.get()
        after = last[1] if last is not None and last[0] == id(self) else None
        _LAST.set((id(self), name))
        self.asked.add(name)
        self.last_asked = name
        if self.is_async:
            self._changed.set()
        try:
            return after, self.history.match(name, call.kind, after)
        except NondeterministicError as exc:
            self.verdict = exc
            raise

    def _check_new(self, call: StepCall, after: str | None) -> None:
        unasked = self.history.unasked(after, self.asked)
        if unasked:
            self.verdict = self.history.changed(call.name, after, unasked[0])
            raise self.verdict

    def reserve(self, call: StepCall, stored: StoredStep | None) -> int:
        """The stored position of a step to run: a failed one keeps its own; a new one takes
        the next, within the job's cap."""
        if stored is not None:
            return stored.seq
        if len(self.history) + self.new_steps >= self.limits.max_steps:
            raise StepLimitError(
                f"step {call.name!r} was not run: the job has {self.limits.max_steps} steps, "
                f"the most one job may store (ASYNCZ_MAX_STEPS_PER_JOB)"
            )
        self.new_steps += 1
        seq = self.history.next_seq
        self.history.next_seq += 1
        return seq

    # --- storing (on the event loop) ---------------------------------------------------

    def check_open(self) -> None:
        if self.verdict is not None:
            raise self.verdict
        if self.ended.is_set():
            raise StepLeaseLostError("the attempt has ended: no step runs or is stored now")

    async def save(self, row: dict[str, Any], size: int) -> None:
        """Store a step's outcome through the lease fence; a lost lease is the verdict."""
        self.check_open()  # on the loop: an attempt that ended before this stores nothing
        if row["status"] == COMPLETED:
            if self.history.result_bytes + size > self.limits.max_bytes:
                raise StepLimitError(
                    f"step {row['name']!r} returned {size} bytes of JSON: the job's steps would "
                    f"hold more than {self.limits.max_bytes} bytes "
                    f"(ASYNCZ_MAX_STEP_BYTES_PER_JOB); the step's result was not stored"
                )
            self.history.result_bytes += size
        row = {**row, "job_attempt": self.lease.attempt}
        if self.bound is not None and self.bound.step is not None:
            self.bound.disarm()  # the step's run is over: the attempt's own time again
        if not await self.store.save(self.lease.job_id, self.lease.token, row):
            self.lost(row["name"])

    def save_from_thread(self, row: dict[str, Any], size: int) -> None:
        """Store from a sync task's thread."""
        self._from_thread(self.save(row, size))

    def _from_thread(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run a store call on the worker's loop from a sync task's thread. A thread left
        behind after its worker's loop closed stores nothing and leaves no coroutine
        unawaited."""
        try:
            self.check_open()
            future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        except BaseException as exc:
            coro.close()
            if isinstance(exc, RuntimeError):  # the loop is closed: the attempt is long over
                raise StepLeaseLostError("the attempt has ended: no step is stored now") from None
            raise
        return future.result()

    def stored(self, name: str) -> None:
        """A step ran and its result is stored (an event of the attempt's span)."""
        self.ran.append(name)
        step_event(name)

    def changed(self) -> None:
        """A step finished (async): a new step waiting on the history may decide now."""
        self._changed.set()
