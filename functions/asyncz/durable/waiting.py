"""A durable task's waits on the world (docs/durable.md, "Waits"): an event, a callback, the
jobs it spawned. A wait is a recorded step of its own kind, stored with status ``waiting``,
its deadline (its timeout: every wait has one) and, when its resolvers find it by a key, a
routing key, through the lease fence; then the attempt suspends until the deadline, holding
nothing. A resolve (:mod:`asyncz.service.waits`) completes the step with a value and wakes
the job; the wake replays the history and the wait returns its value. A replay that finds the
wait still waiting past its deadline resolves it by its timeout, through the lease fence and
on the same condition as a resolve, so exactly one of them wins; not yet due, it suspends
again until the deadline.

How a new kind plugs in:

1. a ``TaskContext`` method builds a :class:`WaitCall` (its kind, the step's name, timeout,
   routing key, terms, the value a timeout gives, how the stored value becomes what the task
   gets, and what it waits for in words) and hands it to ``Journal.wait``;
2. its resolver calls ``JobService.waits.resolve`` (one wait, by job and position) or
   ``.resolve_keyed`` (by routing key, in pages), or runs those statements in a transaction
   of its own;
3. should what it waits for already be there when the wait begins (an event sent before),
   its store names ``open_<kind>_wait`` (and ``lock_<kind>_wait``) in SQL, and registers an
   opener in the in-memory store's ``steps.openers``: the new wait is completed at once.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NoReturn, Protocol

from asyncz.durable.clock import Clock
from asyncz.durable.history import COMPLETED, StoredStep
from asyncz.durable.running import StepCall
from asyncz.durable.sleeping import MAX_SLEEP_SECONDS, MIN_SLEEP_SECONDS, WAKE_EARLY_SECONDS
from asyncz.errors import StepUsageError
from asyncz.jobs import Lease
from asyncz.store_ports import StepStore

MIN_WAIT_SECONDS = MIN_SLEEP_SECONDS
MAX_WAIT_SECONDS = MAX_SLEEP_SECONDS


def _same(value: Any) -> Any:
    return value


def _never() -> None:  # a wait's step runs no function: its value comes from a resolve
    raise AssertionError("a wait runs no function")


@dataclass(frozen=True, slots=True)
class WaitCall:
    """One wait asked for. ``about``: what it waits for, in words (``event 'approval' key
    'order:1'``): the job's ``waiting_for`` adds the deadline. ``key``: the routing key its
    resolvers find it by. ``terms``: JSON its resolvers check while it waits (``{"from":
    [names]}``: the only resolvers it accepts). ``on_timeout``: the value stored when the
    timeout wins. ``decode``: the stored value into what the task gets."""

    name: str
    kind: str
    timeout: float
    about: str
    key: str | None = None
    terms: Any = None
    on_timeout: Any = None
    decode: Callable[[Any], Any] = _same

    def __post_init__(self) -> None:
        t = self.timeout
        if (isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t)
                or not MIN_WAIT_SECONDS <= t <= MAX_WAIT_SECONDS):  # fmt: skip
            raise StepUsageError(
                f"{self.about}: timeout={t!r}; every wait has a timeout of "
                f"{MIN_WAIT_SECONDS:g} s to {MAX_WAIT_SECONDS:g} s (1 year)"
            )

    @property
    def step(self) -> StepCall:
        """The step the wait is matched as against the history (by name and kind)."""
        return StepCall(self.name, self.kind, _never, inline=True)

    def reason(self, deadline: datetime) -> str:
        return f"{self.about} until {deadline.isoformat()}"


class Journal(Protocol):
    """What a wait needs of the attempt's journal (:mod:`asyncz.durable.journal`)."""

    clock: Clock
    lease: Lease
    store: StepStore

    def check_open(self) -> None: ...
    def reserve(self, call: StepCall, stored: StoredStep | None) -> int: ...
    def stored(self, name: str) -> None: ...
    def suspend(self, reason: str, wake_at: datetime) -> NoReturn: ...
    def lost(self, name: str) -> NoReturn: ...


async def settle(journal: Journal, call: WaitCall, after: str | None,
                 stored: StoredStep | None) -> Any:  # fmt: skip
    """The wait's value (decoded), once it has one; else the attempt suspends until its
    deadline (a new wait is stored first, through the lease fence)."""
    if stored is not None and stored.status == COMPLETED:
        return call.decode(stored.result)
    now = journal.clock.now()
    if stored is None:
        deadline = now + timedelta(seconds=call.timeout)
        row = {"seq": journal.reserve(call.step, None), "name": call.name, "kind": call.kind,
               "after_name": after, "job_attempt": journal.lease.attempt,
               "result": None if call.terms is None else json.dumps(call.terms),
               "wait_until": deadline, "wait_key": call.key}  # fmt: skip
        journal.check_open()
        lease = journal.lease
        found = await journal.store.open_wait(lease.job_id, lease.token, row)
        if found is None:
            journal.lost(call.name)
        journal.stored(call.name)
        if found["status"] == COMPLETED:  # what it waits for was there already
            return call.decode(found["result"])
        journal.suspend(call.reason(deadline), deadline)
    deadline = stored.wait_until or now
    if deadline > now + timedelta(seconds=WAKE_EARLY_SECONDS):
        journal.suspend(call.reason(deadline), deadline)  # woken early: it waits on
    journal.check_open()  # past its deadline: the timeout resolves it, unless a value won
    ended = await journal.store.time_out(journal.lease, stored.seq, json.dumps(call.on_timeout))
    if ended is None:
        journal.lost(call.name)
    return call.decode(ended["result"])
