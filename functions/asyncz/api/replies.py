"""Replies: status, JSON body, headers, made where the answer is decided and rendered in one
place (:func:`json_response`). One error shape everywhere:
``{"error": <code>, "message": <text>, ...}``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from starlette.responses import JSONResponse

from asyncz.errors import (
    AsyncZError,
    BatchSizeError,
    BrokerUnavailableError,
    CallbackNotFoundError,
    CallbackUsedError,
    DependencyLimitError,
    DuplicateJobError,
    InvalidCursorError,
    InvalidInputError,
    InvalidPayloadError,
    InvalidTransitionError,
    JobNotFoundError,
    KeyNameTakenError,
    KeyNotFoundError,
    OutcomeUnknownError,
    QueryTimeoutError,
    StoreOutcomeUnknownError,
    StoreUnavailableError,
    UniqueKeyHeldError,
    UnknownDependencyError,
    UnknownQueueError,
    UnknownTaskError,
    WebhookDeliveryNotFoundError,
    WebhookLimitError,
    WebhookNotFoundError,
    WebhookUrlRefusedError,
    error_body,
)

log = logging.getLogger("asyncz.api")

STATUS_OF: dict[type[AsyncZError], int] = {
    JobNotFoundError: 404,
    CallbackNotFoundError: 404,
    CallbackUsedError: 409,
    UnknownTaskError: 422,
    UnknownQueueError: 422,
    UnknownDependencyError: 422,
    DependencyLimitError: 422,
    InvalidCursorError: 422,
    KeyNameTakenError: 409,
    KeyNotFoundError: 404,
    BatchSizeError: 422,
    InvalidInputError: 422,
    InvalidPayloadError: 422,
    InvalidTransitionError: 409,
    DuplicateJobError: 409,
    UniqueKeyHeldError: 409,
    StoreUnavailableError: 503,
    StoreOutcomeUnknownError: 503,
    OutcomeUnknownError: 503,
    QueryTimeoutError: 504,
    BrokerUnavailableError: 503,
    WebhookUrlRefusedError: 422,
    WebhookNotFoundError: 404,
    WebhookDeliveryNotFoundError: 404,
    WebhookLimitError: 409,
}


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


def json_response(reply: Reply) -> JSONResponse:
    """The response that carries ``reply``, from a route, an error handler or a guard."""
    return JSONResponse(reply.body, status_code=reply.status, headers=reply.headers or None)


def error_reply(http_status: int, code: str, message: str, /, **extra: Any) -> Reply:
    """The one error shape; extras that are ``None`` are left out."""
    kept = {k: v for k, v in extra.items() if v is not None}
    return Reply(http_status, error_body(code, message, **kept))


def domain_error_reply(exc: AsyncZError) -> Reply:
    status = STATUS_OF.get(type(exc), 500)
    if status >= 500 and status not in (503, 504):
        log.exception("unexpected domain error")
    job_status = getattr(exc, "status", None)
    return error_reply(
        status,
        exc.code,
        str(exc),
        job_id=getattr(exc, "job_id", None),
        index=exc.index,
        status=str(job_status) if job_status is not None else None,
        details=getattr(exc, "details", None),
    )


def unexpected_reply() -> Reply:
    log.exception("unhandled error")
    return error_reply(500, "internal_error", "unexpected error; it has been logged")


# detail types that name the problem better than "validation_error", most specific first
_SPECIFIC_CODES = (("json_invalid", "invalid_json"), ("invalid_payload", "invalid_payload"))


def validation_reply(errors: Sequence[Any], prefix: tuple[str, ...] = ()) -> Reply:
    details = [
        {
            "field": ".".join(str(p) for p in (*prefix, *e.get("loc", ()))),
            "problem": e.get("msg", ""),
            "type": e.get("type", ""),
        }
        for e in errors
    ]
    types = {d["type"] for d in details}
    code = next(
        (c for t, c in _SPECIFIC_CODES if t in types),
        "validation_error",
    )
    fields = ", ".join(d["field"] for d in details) or "body"
    return error_reply(422, code, f"invalid input: {fields}", details=details)
