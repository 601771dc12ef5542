"""The registered tasks as clients see them: ``GET /tasks`` (each task's JSON Schemas and
defaults) and the per-task request schemas of ``POST /jobs`` in the OpenAPI document (a
union discriminated by ``task``)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field, TypeAdapter
from pydantic.json_schema import JsonSchemaMode

from asyncz.api.routes.jobs_models import SubmitJob
from asyncz.settings import Settings
from asyncz.tasks.registry import TaskRegistry, TaskSpec
from asyncz.tasks.signatures import UNTYPED_PAYLOAD_SCHEMA

REF = "#/components/schemas/{model}"
# the tasks' own models are components under this prefix: a user's model may share a name
# with one of the API's (Stats, Health…) and must not replace it
MODEL = "Task.{model}"
UNION = "TypedSubmitJob"  # the component POST /jobs (and each batch item) is described by


class TaskSchedule(BaseModel):
    schedule: str = Field(description="a cron expression, or 'every N s'")
    timezone: str
    catch_up: int


class TaskOut(BaseModel):
    name: str
    description: str | None = Field(description="the first line of the task's docstring")
    typed: bool = Field(description="its payload (or result) has a declared type, checked")
    is_async: bool
    takes_context: bool
    queue: str = Field(description="the queue a job goes to when its submit names none")
    max_retries: int = Field(description="unless the submit gives `max_retries`")
    timeout_seconds: int = Field(description="unless the submit gives `timeout_seconds`")
    schedule: TaskSchedule | None
    payload_schema: dict[str, Any] = Field(description="JSON Schema of `payload`")
    result_schema: dict[str, Any] = Field(description="JSON Schema of `result` ({}: any)")
    limits: dict[str, Any] = Field(
        default_factory=dict,
        description="the flow-control limits in force here, overrides included ({}: none)",
    )


class TaskList(BaseModel):
    items: list[TaskOut]


def _description(spec: TaskSpec) -> str | None:
    doc = (spec.fn.__doc__ or "").strip()
    return doc.splitlines()[0] if doc else None


def task_list(registry: TaskRegistry, settings: Settings) -> TaskList:
    """Every registered task, by name, with the defaults a submit gets."""
    queue = SubmitJob.model_fields["queue"].default
    items = []
    for spec in registry.specs():
        sig = spec.signature
        timeout = spec.timeout_seconds or settings.default_timeout_seconds
        plan = spec.schedule
        items.append(
            TaskOut(
                name=spec.name,
                description=_description(spec),
                typed=sig is not None,
                is_async=spec.is_async,
                takes_context=spec.wants_context,
                queue=queue,
                max_retries=spec.max_retries
                if spec.max_retries is not None
                else settings.default_max_retries,
                timeout_seconds=min(timeout, settings.max_timeout_seconds),
                schedule=TaskSchedule(
                    schedule=plan.describe(), timezone=plan.timezone, catch_up=plan.catch_up
                )
                if plan
                else None,
                payload_schema=sig.payload_schema() if sig else dict(UNTYPED_PAYLOAD_SCHEMA),
                result_schema=sig.result_schema() if sig else {},
            )
        )
    return TaskList(items=items)


def _component_name(task: str) -> str:
    """``SubmitJob.<task>``, in the characters a component name may hold."""
    return "SubmitJob." + re.sub(r"[^A-Za-z0-9._-]", "_", task)


def submit_union(registry: TaskRegistry, components: dict[str, Any]) -> str:
    """Put one ``SubmitJob.<task>`` schema per task (its ``task`` fixed, its ``payload`` the
    task's schema) and their union :data:`UNION`, discriminated by ``task``, into
    ``components``; returns the union's name. The payload models' definitions are
    components named ``Task.<model>`` (pydantic gives two models of one name distinct
    names)."""
    specs = registry.specs()
    typed = [
        (spec.name, "validation", spec.signature.payload)
        for spec in specs
        if spec.signature is not None and spec.signature.payload is not None
    ]
    inputs: list[tuple[str, JsonSchemaMode, TypeAdapter[Any]]] = typed  # type: ignore[assignment]
    template = REF.format(model=MODEL)
    by_task, defs = TypeAdapter.json_schemas(inputs, ref_template=template) if inputs else ({}, {})
    components.update({MODEL.format(model=k): v for k, v in defs.get("$defs", {}).items()})
    mapping: dict[str, str] = {}
    for spec in specs:
        payload = by_task.get((spec.name, "validation"), dict(UNTYPED_PAYLOAD_SCHEMA))
        name = _component_name(spec.name)
        components[name] = {
            "title": f"Submit {spec.name}",
            "description": _description(spec) or f"a `{spec.name}` job",
            "allOf": [{"$ref": REF.format(model="SubmitJob")}],
            "type": "object",
            "properties": {"task": {"const": spec.name}, "payload": payload},
            "required": ["task"],
        }
        mapping[spec.name] = REF.format(model=name)
    components[UNION] = {
        "title": "A job of one of the registered tasks",
        "oneOf": [{"$ref": ref} for ref in mapping.values()],
        "discriminator": {"propertyName": "task", "mapping": mapping},
    }
    return UNION
