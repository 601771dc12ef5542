"""Typed task signatures: the payload and result types a task declares in its annotations
(pydantic models, dataclasses, TypedDicts, any type pydantic knows), checked with a pydantic
``TypeAdapter`` at submit and on the worker. A task annotated ``dict`` (or not at all) is
untyped: its payload is handed over as sent and its result stored as returned."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import PydanticSchemaGenerationError, TypeAdapter, ValidationError

from asyncz.errors import InvalidPayloadError, InvalidResultError

# annotations that mean "any JSON object": no adapter, no check, no cost
_UNTYPED: tuple[Any, ...] = (
    inspect.Parameter.empty,
    Any,
    object,
    dict,
    dict[str, Any],
    Mapping,
    Mapping[str, Any],
    typing.Dict,  # noqa: UP006 - a user's older spelling means the same
    typing.Dict[str, Any],  # noqa: UP006
)
UNTYPED_PAYLOAD_SCHEMA: dict[str, Any] = {"type": "object"}
UNTYPED_RESULT_SCHEMA: dict[str, Any] = {}


def _typed(annotation: Any) -> bool:
    return not any(annotation is u or annotation == u for u in _UNTYPED)


def field_problems(exc: ValidationError, root: str) -> list[dict[str, str]]:
    """Each error of ``exc`` as ``{"field": "payload.a.0", "problem": …, "type": …}``."""
    return [
        {
            "field": ".".join((root, *(str(p) for p in e["loc"]))),
            "problem": e["msg"],
            "type": e["type"],
        }
        for e in exc.errors(include_url=False)
    ]


def _summary(details: Sequence[Mapping[str, str]], limit: int = 5) -> str:
    shown = "; ".join(f"{d['field']}: {d['problem']}" for d in details[:limit])
    more = len(details) - limit
    return shown + (f"; and {more} more" if more > 0 else "")


@dataclass(frozen=True, slots=True)
class Signature:
    """What a task takes and returns. ``payload``/``result``: the adapters of typed ones."""

    payload_type: Any
    result_type: Any
    payload: TypeAdapter[Any] | None
    result: TypeAdapter[Any] | None

    @classmethod
    def of(cls, name: str, fn: Callable[..., Any]) -> Signature:
        """Read ``fn``'s annotations; an annotation that cannot be resolved is an error now,
        not a check that silently does nothing later."""
        try:
            hints = typing.get_type_hints(fn, include_extras=True)
        except Exception as exc:  # NameError, TypeError: whatever the annotation raised
            raise TypeError(f"task {name!r}: cannot resolve its type annotations: {exc}") from exc
        params = list(inspect.signature(fn).parameters.values())
        payload_type = hints.get(params[0].name, inspect.Parameter.empty) if params else Any
        result_type = hints.get("return", inspect.Parameter.empty)
        return cls(
            payload_type=payload_type,
            result_type=result_type,
            payload=_adapter(name, "payload", payload_type),
            result=_adapter(name, "result", result_type),
        )

    @property
    def typed(self) -> bool:
        return self.payload is not None or self.result is not None

    def parse_payload(self, task: str, payload: Mapping[str, Any]) -> Any:
        """The value the task is called with: ``payload`` parsed into its declared type, or
        as it is for an untyped task; :class:`InvalidPayloadError` names each bad field."""
        if self.payload is None:
            return payload
        try:
            return self.payload.validate_python(payload)
        except ValidationError as exc:
            details = field_problems(exc, "payload")
            raise InvalidPayloadError(
                f"payload does not fit task {task!r}: {_summary(details)}", details=details
            ) from None

    def result_json(self, task: str, value: Any) -> Any:
        """The JSON form of a typed task's result, checked against its declared type first;
        :class:`InvalidResultError` when it does not fit."""
        if self.result is None:
            return value
        try:
            checked = self.result.validate_python(value)
        except ValidationError as exc:
            problems = _summary(field_problems(exc, "result"))
            raise InvalidResultError(
                f"task {task!r} returned a value that is not its declared "
                f"{_type_name(self.result_type)}: {problems}"
            ) from None
        return self.result.dump_python(checked, mode="json")

    def payload_schema(self) -> dict[str, Any]:
        """The payload's JSON Schema (``$defs`` inside it)."""
        return self.payload.json_schema() if self.payload else dict(UNTYPED_PAYLOAD_SCHEMA)

    def result_schema(self) -> dict[str, Any]:
        """The result's JSON Schema (``{}``: any JSON value)."""
        return self.result.json_schema() if self.result else dict(UNTYPED_RESULT_SCHEMA)


def _adapter(task: str, what: str, annotation: Any) -> TypeAdapter[Any] | None:
    """The adapter of a typed annotation (``None``: untyped); one pydantic cannot check
    (a plain class) is refused now, saying how to leave it unchecked."""
    if not _typed(annotation):
        return None
    try:
        return TypeAdapter(annotation)
    except PydanticSchemaGenerationError as exc:
        raise TypeError(
            f"task {task!r}: its {what} type {_type_name(annotation)} is not one pydantic can "
            "check (use a pydantic model, a dataclass or a TypedDict, or annotate it `Any` to "
            f"leave it unchecked): {str(exc).splitlines()[0]}"
        ) from None


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp)
