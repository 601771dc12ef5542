"""Routes of jobs: submit one or a batch (``POST /jobs``, ``/jobs/batch``), list them, read
one and its attempts, cancel one."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any
from uuid import UUID

from fastapi import FastAPI, Query, Request, Response
from fastapi.responses import JSONResponse
from starlette.routing import Route

from asyncz.access import Principal, Scope
from asyncz.api.access import forbidden
from asyncz.api.replies import error_reply, json_response
from asyncz.api.routes.jobs_models import (
    AttemptList,
    AttemptOut,
    JobOut,
    JobPage,
    JobState,
    StatusName,
)
from asyncz.api.routes.jobs_submit import submit_reply
from asyncz.api.routes.keys import principal_of
from asyncz.fleet.scale_out import ScaleOut
from asyncz.observability import logger
from asyncz.service import JobService


def mount_jobs(
    app: FastAPI, service: Callable[[], Awaitable[JobService]], scale_out: ScaleOut
) -> None:
    # The submit routes are the hot path: plain Starlette routes (FastAPI's per-request
    # dependency and response-model machinery is work the INSERT does not need) around the
    # one submit function; the InputGuard has checked the key and the body; their OpenAPI
    # operations are generated from the same models (asyncz.api.openapi).
    def submit_route(path: str, name: str, *, batch: bool) -> Route:
        async def submit(request: Request) -> Response:
            reply = await submit_reply(
                await request.body(),
                request.headers,
                batch=batch,
                service=service,
                scale_out=scale_out,
                submitter=principal_of(request),
            )
            return json_response(reply)

        return Route(path, submit, methods=["POST"], name=name)

    app.router.routes.append(submit_route("/jobs", "submit_job", batch=False))
    app.router.routes.append(submit_route("/jobs/batch", "submit_batch", batch=True))

    @app.get("/jobs", response_model=JobPage, summary="List jobs")
    async def list_jobs(
        request: Request,
        status: StatusName | None = None,
        queue: Annotated[str | None, Query(max_length=100)] = None,
        task: Annotated[str | None, Query(max_length=200)] = None,
        submitted_by: Annotated[str | None, Query(max_length=64)] = None,
        submitted_by_key_id: Annotated[str | None, Query(max_length=80)] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
        cursor: Annotated[str | None, Query(max_length=500)] = None,
        spawned_by: UUID | None = None,
    ) -> Any:
        me = principal_of(request)
        if not me.may(Scope.READ):  # a submit-only key lists the jobs it submitted
            if submitted_by not in (None, me.name) or submitted_by_key_id not in (None, me.key_id):
                return json_response(forbidden(me, Scope.READ))
            submitted_by, submitted_by_key_id = None, me.key_id
        if spawned_by is not None:  # a spawner's jobs: a filter of its own
            if status or queue or task or submitted_by:
                return json_response(error_reply(
                    422, "invalid_filter", "spawned_by lists a spawner's jobs, with no other "
                    "filter"))  # fmt: skip
            page = await (await service()).spawns.page(str(spawned_by), limit, cursor,
                                                       submitted_by_key_id)  # fmt: skip
            return JobPage(items=[JobOut.of(j) for j in page.items], next_cursor=page.next_cursor)
        page = await (await service()).list_jobs(
            status=status, queue=queue, task=task, limit=limit, cursor=cursor,
            submitted_by=submitted_by, submitted_by_key_id=submitted_by_key_id,
        )  # fmt: skip
        return JobPage(items=[JobOut.of(j) for j in page.items], next_cursor=page.next_cursor)

    @app.get("/jobs/{job_id}", response_model=JobOut, summary="Job status")
    async def get_job(job_id: UUID, request: Request) -> Any:
        svc = await service()
        job = await svc.get(about(job_id))
        if not may_read(principal_of(request), job.submitted_by_key_id):
            return json_response(forbidden(principal_of(request), Scope.READ))
        return JobOut.of(job, {**await svc.graph(job), "waiting_for": await svc.held_reason(job)})

    @app.get("/jobs/{job_id}/attempts", response_model=AttemptList, summary="Attempt log")
    async def get_attempts(job_id: UUID, request: Request) -> Any:
        svc = await service()
        me = principal_of(request)
        if not me.may(Scope.READ) and not may_read(
            me, (await svc.get(str(job_id))).submitted_by_key_id
        ):
            return json_response(forbidden(me, Scope.READ))
        attempts = await svc.attempts(about(job_id))
        return AttemptList(job_id=str(job_id), items=[AttemptOut.of(a) for a in attempts])

    @app.post(
        "/jobs/{job_id}/cancel",
        response_model=JobState,
        summary="Cancel a job",
        responses=CASCADE_RESPONSES,
    )
    async def cancel_job(job_id: UUID, request: Request) -> Any:
        svc = await service()
        async with svc.access.audited(principal_of(request), "cancel", str(job_id), {}):
            status = await svc.cancel(about(job_id))
        pending = (await svc.get(str(job_id))).cascade_pending
        state_ = JobState(
            job_id=str(job_id), status=status.value, cancel_requested=True, cascade_pending=pending
        )
        return cascading(state_)


def may_read(me: Principal, submitter_key_id: str | None) -> bool:
    """Any job with ``read``; with ``submit`` alone, the jobs this key (by its id, not its
    name: a revoked key's name may be another key's now) submitted."""
    return me.may(Scope.READ) or (submitter_key_id is not None and submitter_key_id == me.key_id)


def about(job_id: UUID) -> str:
    """The job id as text, also put on every log line of this invocation."""
    text = str(job_id)
    logger.append_keys(job_id=text)
    return text


CASCADING = "done; the cascade to its children goes on (cascade_pending, see GET /jobs/{id})"
# cancel's and replay's answer while a cascade goes on, for the OpenAPI document
CASCADE_RESPONSES: dict[int | str, dict[str, Any]] = {
    202: {"model": JobState, "description": CASCADING}
}


def cascading(state: JobState) -> Any:
    """``200`` when the action and its cascade are done; ``202`` while the cascade goes on
    (the recovery sweep finishes it; ``GET /jobs/{id}`` shows ``cascade_pending``)."""
    if not state.cascade_pending:
        return state
    return JSONResponse(state.model_dump(mode="json"), status_code=202)
