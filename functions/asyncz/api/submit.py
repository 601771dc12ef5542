"""``POST /jobs`` without a web framework: parse and answer, shared by the FastAPI route
(any ASGI server) and the api Lambda's submit lane (:mod:`asyncz.api.lane`)."""

from __future__ import annotations

import logging

from pydantic import ValidationError

from asyncz.api.replies import Reply, error_reply, validation_reply
from asyncz.api.schemas import SubmitJob
from asyncz.jobs import NewJob
from asyncz.ports import Submitted

log = logging.getLogger("asyncz.api")


def parse_submit(body: bytes, idempotency_header: str | None) -> NewJob | Reply:
    """The job a request body asks for, or the ``422`` reply that says what is wrong."""
    try:
        req = SubmitJob.model_validate_json(body)
    except ValidationError as exc:
        return validation_reply(exc.errors(include_url=False), prefix=("body",))
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
    )


def accepted(sub: Submitted) -> Reply:
    return Reply(
        202,
        {"job_id": sub.job_id, "status": sub.status.value},
        {"Location": f"/jobs/{sub.job_id}"},
    )
