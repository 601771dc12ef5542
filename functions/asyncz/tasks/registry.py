"""The task registry: plain Python callables registered by name with per-task defaults."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from asyncz.errors import InvalidPayloadError, UnknownTaskError
from asyncz.jobs import MAX_RETRIES
from asyncz.tasks.context import PROGRESS_MESSAGE_MAX as PROGRESS_MESSAGE_MAX
from asyncz.tasks.context import ParentResult as ParentResult
from asyncz.tasks.context import TaskContext as TaskContext
from asyncz.tasks.limits import TaskLimits
from asyncz.tasks.schedule import Schedule
from asyncz.tasks.signatures import Signature

TaskFn = Callable[..., Any]
# set on each function @task registers, so a client can be handed the function itself
# (asyncz.client.typed reads it by the same name: the client imports nothing of the server)
TASK_NAME_ATTRIBUTE = "__asyncz_task__"


@dataclass(frozen=True, slots=True)
class TaskSpec:
    name: str
    fn: TaskFn
    timeout_seconds: int | None
    max_retries: int | None
    is_async: bool
    wants_context: bool
    schedule: Schedule | None = None
    signature: Signature | None = None
    limits: TaskLimits = field(default_factory=TaskLimits)
    durable: bool = False  # its steps are stored and replayed (docs/durable.md)

    def call(self, payload: dict[str, Any], ctx: TaskContext) -> Any:
        """Run the task on its payload parsed into its declared type and give its result's
        JSON form (an async task: a coroutine that does). A payload or result that does not
        fit its type raises ``InvalidPayloadError`` / ``InvalidResultError``."""
        arg = self.check_payload(payload)
        if self.is_async:
            return self._result_of(self.fn(arg, ctx) if self.wants_context else self.fn(arg))
        return self.result_json(self.fn(arg, ctx) if self.wants_context else self.fn(arg))

    async def _result_of(self, running: Awaitable[Any]) -> Any:
        return self.result_json(await running)

    def check_payload(self, payload: dict[str, Any]) -> Any:
        """The payload parsed into the task's declared type (as it is when untyped)."""
        return (
            payload if self.signature is None else self.signature.parse_payload(self.name, payload)
        )

    def result_json(self, value: Any) -> Any:
        """A typed task's result, checked against its declared type, in its JSON form."""
        return value if self.signature is None else self.signature.result_json(self.name, value)


class TaskRegistry:
    def __init__(self) -> None:
        self._tasks: dict[str, TaskSpec] = {}

    def register(
        self,
        name: str,
        fn: TaskFn,
        *,
        timeout_seconds: int | None = None,
        max_retries: int | None = None,
        schedule: Schedule | None = None,
        limits: TaskLimits | None = None,
        durable: bool = False,
    ) -> TaskSpec:
        if not name or len(name) > 200:
            raise ValueError("a task name is 1 to 200 characters")
        if max_retries is not None and not 0 <= max_retries <= MAX_RETRIES:
            raise ValueError(f"task {name!r}: max_retries is from 0 to {MAX_RETRIES}")
        if timeout_seconds is not None and timeout_seconds < 1:
            raise ValueError(f"task {name!r}: timeout_seconds is at least 1")
        existing = self._tasks.get(name)
        if existing is not None and existing.fn is not fn:
            raise ValueError(f"task {name!r} is registered twice")
        params = list(inspect.signature(fn).parameters.values())
        signature = existing.signature if existing is not None else _signature(name, fn, schedule)
        spec = TaskSpec(
            name=name,
            fn=fn,
            timeout_seconds=timeout_seconds,
            max_retries=max_retries,
            is_async=inspect.iscoroutinefunction(fn),
            wants_context=len(params) >= 2,
            schedule=schedule,
            signature=signature,
            limits=limits or TaskLimits(),
            durable=durable,
        )
        if durable and not spec.wants_context:
            raise ValueError(f"durable task {name!r} takes (payload, ctx): its steps are ctx.step")
        self._tasks[name] = spec
        return spec

    def limited(self) -> dict[str, TaskLimits]:
        """The tasks that have any limit, with their limits."""
        return {n: s.limits for n, s in self._tasks.items() if s.limits.any}

    def get(self, name: str) -> TaskSpec:
        try:
            return self._tasks[name]
        except KeyError:
            raise UnknownTaskError(f"unknown task {name!r}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._tasks

    def names(self) -> list[str]:
        return sorted(self._tasks)

    def specs(self) -> list[TaskSpec]:
        """Every registered task, by name."""
        return [self._tasks[n] for n in sorted(self._tasks)]

    def scheduled(self) -> list[TaskSpec]:
        """The tasks with a schedule, by name."""
        return [self._tasks[n] for n in sorted(self._tasks) if self._tasks[n].schedule]

    def longest_timeout(self, default: int) -> int:
        """The longest timeout any registered task runs with by default."""
        return max([default, *(s.timeout_seconds or default for s in self._tasks.values())])

    def shortest_timeout(self, default: int) -> int:
        """The shortest timeout any registered task runs with by default (``default`` when
        none is registered)."""
        return min([s.timeout_seconds or default for s in self._tasks.values()] or [default])


def _signature(name: str, fn: TaskFn, schedule: Schedule | None) -> Signature | None:
    """``fn``'s typed signature (``None``: untyped); a scheduled task's payload type must
    take what each slot's job carries, or no slot could ever be enqueued."""
    signature = Signature.of(name, fn)
    if schedule is not None:
        try:
            signature.parse_payload(name, {"scheduled_for": "2026-01-01T00:00:00+00:00"})
        except InvalidPayloadError as exc:
            raise ValueError(
                f"task {name!r} has a schedule: its payload type must accept "
                f'{{"scheduled_for": <ISO 8601 time>}} ({exc})'
            ) from None
    return signature if signature.typed else None


REGISTRY = TaskRegistry()


def task(
    name: str,
    *,
    timeout_seconds: int | None = None,
    max_retries: int | None = None,
    schedule: str | int | timedelta | None = None,
    timezone: str = "UTC",
    catch_up: int = 1,
    concurrency: int | None = None,
    key_concurrency: int | None = None,
    rate: str | None = None,
    key_rate: str | None = None,
    durable: bool = False,
    registry: TaskRegistry = REGISTRY,
) -> Callable[[TaskFn], TaskFn]:
    """Register ``fn(payload)`` or ``fn(payload, ctx)`` (sync or ``async``) as task ``name``.

    Annotate the payload and the return value (a pydantic model, dataclass, TypedDict…) and
    a payload is checked at submit (``422 invalid_payload``), handed to the task parsed, and
    the result is checked and stored in its JSON form; ``dict`` or no annotation: untyped.

    ``schedule`` makes it periodic: a five-field cron expression evaluated in ``timezone``
    (``"0 * * * *"``), or an interval (seconds or a timedelta, at least 60). Each slot is
    enqueued once, with payload ``{"scheduled_for": <slot, ISO 8601>}``; at most
    ``catch_up`` slots missed while no scheduler ran are enqueued afterwards (the newest).

    Limits hold across the whole fleet (docs/flow-control.md): ``concurrency`` jobs of the
    task running at once, ``key_concurrency`` per ``concurrency_key`` given at submit,
    ``rate`` starts per period (``"60/m"``), ``key_rate`` per key.

    ``durable``: its ``ctx.step(name, fn, ...)`` calls run once per job, their results
    stored and replayed on later attempts (docs/durable.md).
    """
    plan = Schedule.parse(schedule, timezone=timezone, catch_up=catch_up) if schedule else None
    limits = TaskLimits.build(concurrency, key_concurrency, rate, key_rate)

    def decorate(fn: TaskFn) -> TaskFn:
        registry.register(
            name,
            fn,
            timeout_seconds=timeout_seconds,
            max_retries=max_retries,
            schedule=plan,
            limits=limits,
            durable=durable,
        )
        with contextlib.suppress(AttributeError, TypeError):  # how the client finds its name
            setattr(fn, TASK_NAME_ATTRIBUTE, name)
        return fn

    return decorate
