"""The OpenAPI schema: FastAPI's generated one, plus the two submit routes (plain Starlette
routes, so FastAPI does not see them) and the API key scheme on every operation."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel

from asyncz.api.access import CALLBACKS
from asyncz.api.guards import PUBLIC_PATHS
from asyncz.api.routes.jobs_models import (
    BatchSubmitted,
    ErrorOut,
    SubmitBatch,
    SubmitJob,
    Submitted,
)
from asyncz.api.routes.tasks_models import submit_union
from asyncz.outbox.envelopes import EVENT_SCHEMA
from asyncz.tasks.registry import TaskRegistry

ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorOut, "description": text}
    for code, text in [
        (401, "missing or wrong API key"),
        (404, "no such job"),
        (409, "the job's state does not allow this"),
        (413, "body too large"),
        (415, "body is not JSON"),
        (422, "invalid input"),
        (503, "a dependency is unavailable, or a change's outcome is unknown (`outcome_unknown`)"),
        (504, "the database gave up on a query at its statement timeout (`query_timeout`)"),
    ]
}

_REF = "#/components/schemas/{model}"


def _json(model: type[BaseModel]) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": _REF.format(model=model.__name__)}}}


def _operation(
    summary: str, operation_id: str, body: type[BaseModel], reply: type[BaseModel]
) -> dict[str, Any]:
    errors = {str(code): {"description": spec["description"], "content": _json(ErrorOut)}
              for code, spec in ERRORS.items()}  # fmt: skip
    return {
        "summary": summary,
        "operationId": operation_id,
        "requestBody": {"required": True, "content": _json(body)},
        "responses": {"202": {"description": "accepted", "content": _json(reply)}, **errors},
    }


def submit_operations(
    components: dict[str, Any], registry: TaskRegistry
) -> dict[str, dict[str, Any]]:
    """``{path: operation}`` of POST /jobs and POST /jobs/batch; their models go into
    ``components``, a job's body as one schema per registered task."""
    for model in (SubmitJob, Submitted, SubmitBatch, BatchSubmitted, ErrorOut):
        schema = model.model_json_schema(ref_template=_REF)
        components.update(schema.pop("$defs", {}))
        components[model.__name__] = schema
    union = submit_union(registry, components)
    components["SubmitBatch"]["properties"]["jobs"]["items"] = {"$ref": _REF.format(model=union)}
    one = _operation("Submit a job", "submit_job_jobs_post", SubmitJob, Submitted)
    one["requestBody"]["content"]["application/json"]["schema"]["$ref"] = _REF.format(model=union)
    one["description"] = (
        "`payload` is checked against the task's payload type (see `GET /tasks`): a payload "
        "that does not fit is `422 invalid_payload`, its `details` naming each field path."
    )
    one["parameters"] = [
        {
            "name": "Idempotency-Key",
            "in": "header",
            "required": False,
            "schema": {"type": "string", "minLength": 1, "maxLength": 200},
            "description": "same as the body's idempotency_key",
        }
    ]
    one["responses"]["202"]["headers"] = {
        "Location": {"schema": {"type": "string"}, "description": "the job's URL"}
    }
    one["responses"]["200"] = {
        "description": "the `unique_key` is held by a job of this API key: nothing stored; "
        "`job_id` is the holder (`duplicate: true`, and `debounced: true` when it took this "
        "payload and start). Held by another key's job: 409 `unique_key_held`",
        "content": _json(Submitted),
    }
    batch = _operation(
        "Submit up to 500 jobs (or a graph)", "submit_batch_jobs_batch_post", SubmitBatch,
        BatchSubmitted,
    )  # fmt: skip
    batch["description"] = (
        "All or nothing at validation: one invalid item is a 422 naming its `index`, and "
        "nothing is stored. An item whose idempotency key exists is reported as a duplicate "
        "with the existing job's id; the others are accepted. Items may carry a `ref` that "
        "later items name in `depends_on`: such a graph (up to 1,002 items) is stored whole "
        "or not at all, and `refs` maps each ref to its job id."
    )
    return {"/jobs": one, "/jobs/batch": batch}


def openapi_with_key(app: FastAPI, registry: TaskRegistry) -> dict[str, Any]:
    """The generated schema, plus the submit routes (a body per task of ``registry``) and the
    API key scheme on every operation but /health."""
    if app.openapi_schema is None:
        schema = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        components = schema.setdefault("components", {})
        components["securitySchemes"] = {
            "ApiKey": {"type": "apiKey", "in": "header", "name": "x-api-key"}
        }
        for path, op in submit_operations(components.setdefault("schemas", {}), registry).items():
            schema["paths"].setdefault(path, {})["post"] = op
        # what a sink receives for each end of a job (docs/events.md): no route returns it
        event = {k: v for k, v in EVENT_SCHEMA.items() if k != "$schema"}
        components["schemas"]["JobEvent"] = event
        for path, ops in schema["paths"].items():
            for op in ops.values():
                keyless = path in PUBLIC_PATHS or path.startswith(CALLBACKS)  # a token instead
                op["security"] = [] if keyless else [{"ApiKey": []}]
        app.openapi_schema = schema
    return app.openapi_schema
