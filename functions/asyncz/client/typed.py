"""Typed tasks from the client's side: a task given as its function or its name, a payload
given as a pydantic model, a dataclass or a dict, a result parsed into its model, and the
API's task catalogue (``GET /tasks``). pydantic is imported only when a value needs it, so
the client still needs httpx alone for untyped use."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable

T = TypeVar("T")

TASK_NAME_ATTRIBUTE = "__asyncz_task__"  # set by @task (asyncz.tasks.registry)


@runtime_checkable
class ModelLike(Protocol):
    """A pydantic model instance (anything with ``model_dump``)."""

    def model_dump(self, *, mode: str = ...) -> dict[str, Any]: ...


class DataclassLike(Protocol):
    __dataclass_fields__: ClassVar[dict[str, Any]]


TaskRef = str | Callable[..., Any]
Payload = Mapping[str, Any] | ModelLike | DataclassLike | None


def task_name(task: TaskRef) -> str:
    """The name a task is registered under: ``task`` itself, or its ``@task`` name."""
    if isinstance(task, str):
        return task
    name = getattr(task, TASK_NAME_ATTRIBUTE, None)
    if not isinstance(name, str):
        raise TypeError(
            f"{getattr(task, '__qualname__', task)!r} is not registered with @task: pass the "
            "task's name instead"
        )
    return name


def payload_json(payload: Payload) -> dict[str, Any]:
    """The JSON object of a payload given as a dict, a pydantic model or a dataclass."""
    if payload is None:
        return {}
    if isinstance(payload, Mapping):
        return dict(payload)
    if isinstance(payload, ModelLike):
        return payload.model_dump(mode="json")
    if dataclasses.is_dataclass(payload) and not isinstance(payload, type):
        from pydantic import TypeAdapter

        dumped: dict[str, Any] = TypeAdapter(type(payload)).dump_python(payload, mode="json")
        return dumped
    raise TypeError(
        f"a payload is a dict, a pydantic model or a dataclass, not {type(payload).__name__}"
    )


def parse_as(as_type: type[T], value: Any) -> T:
    """``value`` (a job's JSON result) parsed into ``as_type`` (a model, dataclass, …)."""
    from pydantic import TypeAdapter

    return TypeAdapter(as_type).validate_python(value)


@dataclasses.dataclass(frozen=True, slots=True)
class TaskInfo:
    """A registered task, as ``GET /tasks`` describes it."""

    name: str
    description: str | None
    typed: bool
    is_async: bool
    takes_context: bool
    queue: str
    max_retries: int
    timeout_seconds: int
    schedule: dict[str, Any] | None
    payload_schema: dict[str, Any]
    result_schema: dict[str, Any]

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> TaskInfo:
        values: dict[str, Any] = {f.name: data.get(f.name) for f in dataclasses.fields(cls)}
        return cls(**values)


def task_infos(reply: Mapping[str, Any]) -> list[TaskInfo]:
    return [TaskInfo.from_api(item) for item in reply["items"]]
