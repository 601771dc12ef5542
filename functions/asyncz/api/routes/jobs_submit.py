"""``POST /jobs`` and ``POST /jobs/batch``: from the request's body and headers to the reply,
in one function the app's two submit routes call (:func:`submit_reply`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any

from pydantic import ValidationError

from asyncz.access import Principal
from asyncz.api.replies import Reply, error_reply, validation_reply
from asyncz.api.routes.jobs_models import DependencyIn, SubmitBatch, SubmitJob
from asyncz.fleet.scale_out import ScaleOut
from asyncz.jobs import Dependency, NewJob, ParentRule, UniqueScope
from asyncz.observability import logger
from asyncz.port_types import BatchItem, SubmitOutcome
from asyncz.service import JobService
from asyncz.tracing import SubmitTrace, submit_span, valid_traceparent

Submitter = tuple[str, str]  # the submitting key's (name, id)


async def submit_reply(
    body: bytes,
    headers: Mapping[str, str],
    *,
    batch: bool,
    service: Callable[[], Awaitable[JobService]],
    scale_out: ScaleOut,
    submitter: Principal | None = None,
) -> Reply:
    """Submit the job (``batch``: the jobs) a body the guards let through asks for, then look
    at the backlog for scale-out; the ``202`` or the ``422`` that says what is wrong. A domain
    error (a duplicate key, an outage) is raised for the app's one error handler.
    ``headers`` are looked up by lower-case name; ``submitter``: the request's key."""
    submitted_by = (submitter.name, submitter.key_id) if submitter else None
    with submit_span("asyncz submit", headers) as trace:
        if batch:
            news = parse_batch(body, submitted_by)
            if isinstance(news, Reply):
                return news
            news = [_traced(n, trace) for n in news]
            svc = await service()
            reply = accepted_batch(await svc.submit_many(news))
            trace.annotate(jobs=len(news))
        else:
            new = parse_submit(body, header_text(headers.get("idempotency-key")), submitted_by)
            if isinstance(new, Reply):
                return new
            svc = await service()
            sub = await svc.submit(_traced(new, trace))
            logger.append_keys(job_id=sub.job_id)
            trace.annotate(job_id=sub.job_id, task=new.task, queue=new.queue)
            reply = accepted(sub)
    await scale_out(svc.broker)
    return reply


def _traced(new: NewJob, trace: SubmitTrace) -> NewJob:
    """The job with the context it continues: its own (a body field), else the submit's."""
    if new.traceparent is not None or trace.traceparent is None:
        return new
    return replace(new, traceparent=trace.traceparent, tracestate=trace.tracestate)


def header_text(value: str | None) -> str | None:
    """A header value as the text the client sent in UTF-8 (ASGI decodes header bytes as
    ISO-8859-1; Mangum encodes the event's header text as UTF-8)."""
    if value is None or value.isascii():
        return value
    try:
        return value.encode("latin-1").decode("utf-8")
    except UnicodeError:
        return value


def parse_submit(
    body: bytes, idempotency_header: str | None, submitted_by: Submitter | None = None
) -> NewJob | Reply:
    """The job a request body asks for, or the ``422`` reply that says what is wrong."""
    try:
        req = SubmitJob.model_validate_json(body)
    except ValidationError as exc:
        return validation_reply(exc.errors(include_url=False), prefix=("body",))
    if req.ref is not None:
        return error_reply(
            422, "validation_error", "`ref` names an item of POST /jobs/batch; a single job is "
            "named by its id"
        )  # fmt: skip
    return _new_job(req, idempotency_header, submitted_by)


def parse_batch(body: bytes, submitted_by: Submitter | None = None) -> list[NewJob] | Reply:
    """The jobs of a ``POST /jobs/batch`` body, or the ``422`` that names the first bad item
    (``index``): one bad item refuses the whole batch."""
    try:
        req = SubmitBatch.model_validate_json(body)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        reply = validation_reply(errors, prefix=("body",))
        index = next((e["loc"][1] for e in errors if _item_loc(e["loc"])), None)
        return _about_item(reply, index) if isinstance(index, int) else reply
    news: list[NewJob] = []
    for index, item in enumerate(req.jobs):
        new = _new_job(item, None, submitted_by)
        if not isinstance(new, Reply) and new.debounce:
            new = error_reply(422, "validation_error", "debounce is for POST /jobs only")
        if isinstance(new, Reply):
            return _about_item(new, index)
        news.append(new)
    unique = next((i for i, n in enumerate(news) if n.unique_key is not None), None)
    if unique is not None and any(n.depends_on or n.ref is not None for n in news):
        return _about_item(error_reply(
            422, "validation_error", "unique_key items cannot be in a batch with refs or "
            "depends_on"), unique)  # fmt: skip
    return news


def _item_loc(loc: tuple[int | str, ...]) -> bool:
    return len(loc) >= 2 and loc[0] == "jobs" and isinstance(loc[1], int)


def _about_item(reply: Reply, index: int) -> Reply:
    body = {**reply.body, "message": f"jobs[{index}]: {reply.body['message']}", "index": index}
    return Reply(reply.status, body, reply.headers)


def _new_job(
    req: SubmitJob, idempotency_header: str | None, submitted_by: Submitter | None
) -> NewJob | Reply:
    task = req.task or req.payload.get("task")
    if not isinstance(task, str) or not task:
        return error_reply(422, "missing_task", "give `task` (or `payload.task`)")
    idempotency_key = req.idempotency_key or idempotency_header
    if idempotency_key is not None and (
        not 1 <= len(idempotency_key) <= 200 or "\x00" in idempotency_key
    ):
        return error_reply(
            422, "validation_error", "Idempotency-Key is 1 to 200 characters, no NUL"
        )
    if req.unique_key is not None and (req.depends_on or req.ref is not None):
        return error_reply(
            422, "validation_error", "a job with a unique_key cannot have depends_on or a ref"
        )
    return NewJob(
        task=task,
        payload=req.payload,
        queue=req.queue,
        priority=req.priority,
        max_retries=req.max_retries,
        timeout_seconds=req.timeout_seconds,
        delay_seconds=req.delay_seconds or 0.0,
        run_at=req.run_at,
        idempotency_key=idempotency_key,
        depends_on=tuple(_dependency(d, req.on_parent_failure) for d in req.depends_on),
        ref=req.ref,
        concurrency_key=req.concurrency_key,
        submitted_by=submitted_by[0] if submitted_by else None,
        submitted_by_key_id=submitted_by[1] if submitted_by else None,
        unique_key=req.unique_key,
        unique_scope=UniqueScope(req.unique_scope) if req.unique_scope else None,
        unique_for=req.unique_for,
        debounce=req.debounce,
        traceparent=valid_traceparent(req.traceparent),
        tracestate=req.tracestate if req.traceparent else None,
    )


def _dependency(item: str | DependencyIn, default: str) -> Dependency:
    if isinstance(item, str):
        return Dependency(item, ParentRule(default))
    return Dependency(item.job_id, ParentRule(item.on_parent_failure or default))


def accepted(sub: SubmitOutcome) -> Reply:
    """``202`` and the new job; ``200`` and the job holding the unique key (nothing new)."""
    if sub.duplicate:
        body = {"job_id": sub.job_id, "status": sub.status.value, "duplicate": True,
                "debounced": sub.debounced}  # fmt: skip
        return Reply(200, body, {"Location": f"/jobs/{sub.job_id}"})
    return Reply(
        202,
        {"job_id": sub.job_id, "status": sub.status.value},
        {"Location": f"/jobs/{sub.job_id}"},
    )


def accepted_batch(items: list[BatchItem]) -> Reply:
    duplicates = sum(1 for it in items if it.duplicate)
    results = [
        {"job_id": it.job_id, "status": it.status, "duplicate": it.duplicate}
        | ({"ref": it.ref} if it.ref is not None else {})
        | ({"unique": True} if it.unique else {})
        for it in items
    ]
    body: dict[str, Any] = {
        "jobs": results, "accepted": len(items) - duplicates, "duplicates": duplicates}  # fmt: skip
    refs = {it.ref: it.job_id for it in items if it.ref is not None and it.job_id}
    if refs:
        body["refs"] = refs
    return Reply(202, body)
