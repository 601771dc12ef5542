"""The task registry: plain Python callables registered by name with per-task defaults."""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from asyncz.errors import UnknownTaskError

TaskFn = Callable[..., Any]


@dataclass(slots=True)
class TaskContext:
    """What a running task may know about its attempt; ``cancelled`` is set when the job is
    cancelled, its lease is lost or its timeout passes, so cooperative tasks can stop early."""

    job_id: str
    attempt: int
    queue: str
    worker_id: str
    artifact_dir: str
    cancelled: threading.Event = field(default_factory=threading.Event)


@dataclass(frozen=True, slots=True)
class TaskSpec:
    name: str
    fn: TaskFn
    timeout_seconds: int | None
    max_retries: int | None
    is_async: bool
    wants_context: bool

    def call(self, payload: dict[str, Any], ctx: TaskContext) -> Any:
        return self.fn(payload, ctx) if self.wants_context else self.fn(payload)


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
    ) -> TaskSpec:
        if not name or len(name) > 200:
            raise ValueError("a task name is 1 to 200 characters")
        existing = self._tasks.get(name)
        if existing is not None and existing.fn is not fn:
            raise ValueError(f"task {name!r} is registered twice")
        params = list(inspect.signature(fn).parameters.values())
        spec = TaskSpec(
            name=name,
            fn=fn,
            timeout_seconds=timeout_seconds,
            max_retries=max_retries,
            is_async=inspect.iscoroutinefunction(fn),
            wants_context=len(params) >= 2,
        )
        self._tasks[name] = spec
        return spec

    def get(self, name: str) -> TaskSpec:
        try:
            return self._tasks[name]
        except KeyError:
            raise UnknownTaskError(f"unknown task {name!r}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._tasks

    def names(self) -> list[str]:
        return sorted(self._tasks)

    def longest_timeout(self, default: int) -> int:
        """The longest timeout any registered task runs with by default."""
        return max([default, *(s.timeout_seconds or default for s in self._tasks.values())])


REGISTRY = TaskRegistry()


def task(
    name: str,
    *,
    timeout_seconds: int | None = None,
    max_retries: int | None = None,
    registry: TaskRegistry = REGISTRY,
) -> Callable[[TaskFn], TaskFn]:
    """Register ``fn(payload)`` or ``fn(payload, ctx)`` (sync or ``async``) as task ``name``."""

    def decorate(fn: TaskFn) -> TaskFn:
        registry.register(name, fn, timeout_seconds=timeout_seconds, max_retries=max_retries)
        return fn

    return decorate
