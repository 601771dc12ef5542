"""The task registry: plain Python callables registered by name with per-task defaults."""

from __future__ import annotations

import contextlib
import inspect
import math
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from asyncz.durable.journal import Journal
from asyncz.durable.running import StepCall
from asyncz.durable.sleeping import decode_wake, wake_time
from asyncz.durable.spawning import Spawner, gather_call, spawn_call
from asyncz.errors import InvalidPayloadError, StepUsageError, UnknownTaskError
from asyncz.tasks.limits import TaskLimits
from asyncz.tasks.schedule import Schedule
from asyncz.tasks.signatures import Signature

PROGRESS_MESSAGE_MAX = 1000

TaskFn = Callable[..., Any]
# set on each function @task registers, so a client can be handed the function itself
# (asyncz.client.typed reads it by the same name: the client imports nothing of the server)
TASK_NAME_ATTRIBUTE = "__asyncz_task__"


@dataclass(frozen=True, slots=True)
class ParentResult:
    """One parent of the running job, as it ended: ``completed`` with its ``result``, or
    (under ``on_parent_failure="run"``) ``dead``/``cancelled`` with its ``error``."""

    job_id: str
    status: str
    result: Any
    error: str | None
    ref: str | None  # its ref, when both were submitted in one batch

    @staticmethod
    def by_key(rows: Iterable[Mapping[str, Any]]) -> dict[str, ParentResult]:
        """Each parent keyed by its job id, and by its ref too when it has one."""
        out: dict[str, ParentResult] = {}
        for r in rows:
            parent = ParentResult(r["job_id"], r["status"], r["result"], r["last_error"], r["ref"])
            out[parent.job_id] = parent
            if parent.ref is not None:
                out[parent.ref] = parent
        return out


@dataclass(slots=True)
class TaskContext:
    """What a running task may know about its attempt; ``cancelled`` is set when the job is
    cancelled, its lease is lost or its timeout passes, so cooperative tasks can stop early.
    ``parents``: the jobs it depended on, by job id (and by ref), each with its status and
    result."""

    job_id: str
    attempt: int
    queue: str
    worker_id: str
    artifact_dir: str
    cancelled: threading.Event = field(default_factory=threading.Event)
    parents: dict[str, ParentResult] = field(default_factory=dict)
    journal: Journal | None = None  # a durable task's steps (docs/durable.md)
    spawner: Spawner | None = None  # what submits the jobs a durable task spawns
    _progress: tuple[float, str | None] | None = None
    _progress_lock: threading.Lock = field(default_factory=threading.Lock)

    def progress(self, fraction: float, message: str | None = None) -> None:
        """Report how far the task has come (0 to 1) and what it is doing. Cheap to call
        often: the worker writes the latest report at most about once a second, and it is
        shown in ``GET /jobs/{id}`` while the job runs and after."""
        value = float(fraction)
        if not math.isfinite(value) or not 0.0 <= value <= 1.0:
            raise ValueError(f"progress is a fraction from 0 to 1, not {fraction!r}")
        text = None if message is None else str(message).replace("\x00", "")
        with self._progress_lock:
            self._progress = (value, text[:PROGRESS_MESSAGE_MAX] if text is not None else None)

    def step(self, name: str, fn: Callable[..., Any], /, *args: Any, retries: int = 0,
             backoff: float = 1.0, **kwargs: Any) -> Any:  # fmt: skip
        """Run ``fn(*args, **kwargs)`` once per job as step ``name`` (a durable task's): its
        result is stored before the task goes on, and a later attempt gets it back without
        calling ``fn``. ``retries``: more runs when it raises, ``backoff`` seconds apart
        (doubling, jittered, each wait at most 10 s) before the attempt fails. In an
        ``async`` task, ``await`` it. docs/durable.md."""
        call = StepCall(name, "step", fn, args, kwargs, retries, backoff)
        return self._steps().call(call)

    def now(self, name: str | None = None) -> Any:
        """The time (UTC) as a recorded step: a replay gets the same value (``await`` it in
        an async task). Unnamed: ``now:1``, ``now:2``… in the order asked."""
        journal = self._steps()
        name = name or journal.auto_name("now")
        now = journal.clock.now
        return journal.call(StepCall(name, "now", lambda: now().isoformat(),
                                     decode=datetime.fromisoformat, inline=True))  # fmt: skip

    def sleep(self, name: str, *, seconds: float | None = None,
              until: datetime | None = None) -> Any:  # fmt: skip
        """Sleep without holding anything (``await`` it in an async task): the job is
        suspended until ``seconds`` from now or ``until`` (1 s to 1 year), then replayed;
        the sleep, recorded as step ``name``, returns once its time has come."""
        journal = self._steps()
        now = journal.clock.now()
        return journal.sleep(StepCall(name, "sleep", lambda: wake_time(name, now, seconds, until),
                                      decode=decode_wake, inline=True))  # fmt: skip

    def uuid(self, name: str | None = None) -> Any:
        """A random UUID as a recorded step (``await`` it in an async task); unnamed:
        ``uuid:1``, ``uuid:2``…"""
        journal = self._steps()
        name = name or journal.auto_name("uuid")
        return journal.call(
            StepCall(name, "uuid", lambda: str(uuid.uuid4()), decode=uuid.UUID, inline=True)
        )

    def spawn(self, task: str, payload: dict[str, Any], /, *, name: str | None = None,
              **options: Any) -> Any:  # fmt: skip
        """Submit a job of ``task`` once per job (a durable task's step of kind ``spawn``):
        a :class:`~asyncz.durable.spawning.Spawned` naming it (``await`` it in an async
        task). ``options``: as a submit's (queue, priority, unique_key, ...); unnamed, the
        step is ``spawn:1``, ``spawn:2``... docs/durable.md, "Spawned jobs"."""
        journal = self._steps()
        return journal.call(spawn_call(journal, self.spawner, task, payload, name, options))

    def gather(self, spawned: Iterable[Any], /, *, timeout: float,
               return_exceptions: bool = False, name: str | None = None) -> Any:  # fmt: skip
        """Wait, holding nothing, until every one of these spawned jobs has ended (at most
        ``timeout`` seconds: then ``GatherTimeoutError``), and return their results in order
        (``await`` it in an async task). One that ended dead or cancelled raises
        ``SpawnedJobFailedError``, or stands in its place with ``return_exceptions``."""
        journal = self._steps()
        limit = self.spawner.max_gather_bytes if self.spawner is not None else 1 << 22
        return journal.wait(gather_call(spawned, timeout=timeout, max_bytes=limit,
                                        return_exceptions=return_exceptions,
                                        name=name or journal.auto_name("gather")))  # fmt: skip

    def _steps(self) -> Journal:
        if self.journal is None:
            raise StepUsageError("steps are for durable tasks: @task(name, durable=True)")
        return self.journal

    def each_parent(self) -> list[ParentResult]:
        """The parents, each once (``parents`` holds each under its job id and its ref)."""
        return list({p.job_id: p for p in self.parents.values()}.values())

    def take_progress(self) -> tuple[float, str | None] | None:
        """The report not written yet (and forget it), or ``None``."""
        with self._progress_lock:
            report, self._progress = self._progress, None
        return report


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
