"""The client's exceptions: one class per API error code (``{"error": <code>, ...}``), plus
the ones the client raises itself (a job that failed, a wait that timed out)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from asyncz.client.models import Job


class AsyncZClientError(Exception):
    """Base of everything :mod:`asyncz.client` raises. When ``submit_many`` stops on it,
    ``submitted`` holds the jobs accepted before (the first ``len(submitted)`` items, in
    order) and ``call_key`` the key to call it again with, so nothing is stored twice."""

    submitted: list[Job] | None = None
    call_key: str | None = None


class ApiError(AsyncZClientError):
    """The API answered with an error: ``status`` (HTTP), ``code`` and ``message``."""

    def __init__(self, status: int, code: str, message: str, body: dict[str, Any]) -> None:
        super().__init__(f"HTTP {status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.body = body
        # an earlier try of this request may have been carried out (a lost answer): a
        # conflict may be with our own change
        self.after_uncertain_try = False


class Unauthorized(ApiError):
    """401: no API key, or not an accepted one."""


class Forbidden(ApiError):
    """403: the key is known but lacks the scope this needs (``scope`` names it)."""

    @property
    def scope(self) -> str | None:
        value = self.body.get("scope")
        return str(value) if value is not None else None


class NotFound(ApiError):
    """404: no such job (or route)."""


class InvalidState(ApiError):
    """409: the job's state does not allow this (``job_status`` says which it is)."""

    @property
    def job_status(self) -> str | None:
        return self.body.get("status")


class DuplicateJob(ApiError):
    """409: a job with this idempotency key exists; ``job_id`` is that job."""

    @property
    def job_id(self) -> str | None:
        return self.body.get("job_id")


class UniqueKeyHeld(ApiError):
    """409: a job another API key submitted holds this ``unique_key``; nothing was stored
    (the holder is not named: it is not this key's job)."""


class PayloadTooLarge(ApiError):
    """413: the request body is over the API's limit."""


class InvalidInput(ApiError):
    """422: the request is not valid; ``index`` names the item of a batch at fault."""

    @property
    def index(self) -> int | None:
        return self.body.get("index")

    @property
    def details(self) -> list[dict[str, Any]]:
        return list(self.body.get("details") or [])


class RateLimited(ApiError):
    """429: too many requests; ``retry_after`` is the server's advice in seconds, if any."""

    def __init__(
        self, status: int, code: str, message: str, body: dict[str, Any], retry_after: float | None
    ) -> None:
        super().__init__(status, code, message, body)
        self.retry_after = retry_after


class Unavailable(ApiError):
    """502/503/504: the API or one of its dependencies is down; try again shortly."""


class ServerError(ApiError):
    """500 (or any other 5xx): an unexpected error, logged by the server."""


class ConnectionFailed(AsyncZClientError):
    """The API could not be reached (after the retries)."""


class WaitTimeout(AsyncZClientError, TimeoutError):
    """``wait``/``result`` gave up: the job was not finished in time (``job`` is the last
    state seen)."""

    def __init__(self, job: Job, timeout: float) -> None:
        super().__init__(f"job {job.id} still {job.status} after {timeout:g} s")
        self.job = job


class JobFailed(AsyncZClientError):
    """The job ended ``dead`` or ``cancelled``: ``job.last_error`` says why."""

    def __init__(self, job: Job) -> None:
        super().__init__(f"job {job.id} ended {job.status}: {job.last_error or 'no error text'}")
        self.job = job
        self.error = job.last_error


_BY_CODE: dict[str, type[ApiError]] = {
    "unauthorized": Unauthorized,
    "forbidden": Forbidden,
    "job_not_found": NotFound,
    "not_found": NotFound,
    "invalid_state": InvalidState,
    "duplicate_idempotency_key": DuplicateJob,
    "unique_key_held": UniqueKeyHeld,
    "query_timeout": Unavailable,
    "payload_too_large": PayloadTooLarge,
}
_BY_STATUS: dict[int, type[ApiError]] = {
    401: Unauthorized,
    403: Unauthorized,
    404: NotFound,
    409: InvalidState,
    413: PayloadTooLarge,
    422: InvalidInput,
    502: Unavailable,
    503: Unavailable,
    504: Unavailable,
}


def error_for(status: int, body: Any, retry_after: float | None = None) -> ApiError:
    """The exception for an error response (any body shape, API Gateway's included)."""
    if not isinstance(body, dict):
        body = {}
    code = str(body.get("error") or _default_code(status))
    message = body.get("message")
    text = message if isinstance(message, str) else str(message or "")
    if status == 429:
        return RateLimited(status, code, text, body, retry_after)
    cls = _BY_CODE.get(code) or _BY_STATUS.get(status)
    if cls is None:
        cls = ServerError if status >= 500 else ApiError
    return cls(status, code, text, body)


def _default_code(status: int) -> str:
    return {429: "rate_limited", 502: "bad_gateway", 503: "unavailable", 504: "timeout"}.get(
        status, f"http_{status}"
    )
