"""Domain exceptions. Adapters turn driver errors into these at their boundary."""

from __future__ import annotations

from typing import Any


class AsyncZError(Exception):
    """Base of every error AsyncZ raises on purpose."""

    code = "internal_error"
    index: int | None = None  # the item of a batch the error is about


class JobNotFoundError(AsyncZError):
    code = "job_not_found"


class UnknownTaskError(AsyncZError):
    code = "unknown_task"


class UnknownQueueError(AsyncZError):
    """The queue is not one this deployment declares (ASYNCZ_QUEUES): no worker polls it."""

    code = "unknown_queue"


class InvalidTransitionError(AsyncZError):
    """The job is not in a state that allows the requested change."""

    code = "invalid_state"

    def __init__(self, message: str, *, status: str | None = None) -> None:
        super().__init__(message)
        self.status = status


class DuplicateJobError(AsyncZError):
    """A job with this idempotency key exists already; carries its id and status."""

    code = "duplicate_idempotency_key"

    def __init__(self, job_id: str, status: str) -> None:
        super().__init__(f"a job with this idempotency key exists: {job_id} ({status})")
        self.job_id = job_id
        self.status = status


class UniqueKeyHeldError(AsyncZError):
    """A job another API key submitted holds this unique key: nothing was stored, and the
    holder is not named (its id and status are that key's business)."""

    code = "unique_key_held"


class UnknownDependencyError(AsyncZError):
    """``depends_on`` names a job that does not exist (never did, or was purged) or a ref no
    earlier item of the batch has."""

    code = "unknown_dependency"

    def __init__(self, message: str, *, job_id: str | None = None) -> None:
        super().__init__(message)
        self.job_id = job_id


class DependencyLimitError(AsyncZError):
    """Too many parents for one job, or a graph deeper than the limit."""

    code = "dependency_limit"


class DuplicateKeyError(AsyncZError):
    """Raised by the store: an idempotency key of a graph submit exists (nothing stored)."""

    code = "duplicate_idempotency_key"


class StoreUnavailableError(AsyncZError):
    """PostgreSQL cannot be reached or timed out."""

    code = "database_unavailable"


class StoreOutcomeUnknownError(StoreUnavailableError):
    """A statement was sent but no answer came (timeout, connection lost): it may have
    committed. Raised by the store; the service resolves it or says so. ``answering``:
    False when the server did not even answer the cancel (frozen, unreachable), so a
    look for the row would only wait too."""

    def __init__(self, message: str, *, answering: bool = True) -> None:
        super().__init__(message)
        self.answering = answering


class QueryTimeoutError(AsyncZError):
    """PostgreSQL cancelled a statement at its ``statement_timeout``: nothing was changed."""

    code = "query_timeout"


# What passes, for a caller that can try again later: the database out of reach for a
# moment, or a statement it cancelled at its timeout (slow, or just thawed from a freeze).
DB_TRANSIENT = (StoreUnavailableError, QueryTimeoutError)


class RecoveryStepError(AsyncZError):
    """Some steps of a recovery run failed (each logged with its cause); the others ran."""


class OutcomeUnknownError(AsyncZError):
    """A change was sent to the database and no answer came back: it may have been made.
    ``job_id`` names the job it concerns (for a submit: the id it would have)."""

    code = "outcome_unknown"

    def __init__(self, message: str, *, job_id: str | None = None) -> None:
        super().__init__(message)
        self.job_id = job_id


class BrokerUnavailableError(AsyncZError):
    """Redis cannot be reached or timed out."""

    code = "queue_unavailable"


class InvalidInputError(AsyncZError):
    """A value the database cannot store (e.g. a NUL character in text or JSON)."""

    code = "invalid_input"


class BatchSizeError(AsyncZError):
    """A batch submit holds no job, or more than the limit."""

    code = "batch_size"


class InvalidCursorError(AsyncZError):
    code = "invalid_cursor"


class KeyNameTakenError(AsyncZError):
    """A live API key has this name already (revoke it first to reuse the name)."""

    code = "key_name_taken"


class KeyNotFoundError(AsyncZError):
    """No live API key has this name."""

    code = "key_not_found"


class InvalidPayloadError(AsyncZError):
    """A payload that does not fit its task's declared type; ``details`` name each field
    path (``payload.text``) and its problem."""

    code = "invalid_payload"

    def __init__(self, message: str, *, details: list[dict[str, str]] | None = None) -> None:
        super().__init__(message)
        self.details = details or []


class InvalidResultError(AsyncZError):
    """A task returned a value that does not fit its declared result type."""

    code = "invalid_result"


class FinalTaskError(AsyncZError):
    """A failure the job's retries cannot mend: the attempt ends the job ``dead`` at once,
    its ``last_error`` starting with the code (durable tasks' steps, docs/durable.md)."""

    code = "final"


class NondeterministicError(FinalTaskError):
    """A durable task asked for steps its stored history does not match (a changed task)."""

    code = "nondeterministic"


class StepLimitError(FinalTaskError):
    """A step result over ``ASYNCZ_MAX_RESULT_BYTES``, or a job over its steps' caps."""

    code = "step_limit"


class StepUsageError(FinalTaskError):
    """A step asked for wrongly: a name used twice, nested steps, a bad retry policy."""

    code = "step_usage"


class SpawnRefusedError(FinalTaskError):
    """A durable task's ``ctx.spawn`` that cannot be stored as asked: an unknown task or
    queue, a payload that does not fit, options a spawn does not take, or a spawner nested
    as deep as ``ASYNCZ_MAX_SPAWN_DEPTH`` allows."""

    code = "spawn_refused"


class SpawnedJobFailedError(FinalTaskError):
    """A job ``ctx.gather`` waited on ended dead or cancelled (its id, status and error are
    attributes and in the message)."""

    code = "spawned_job_failed"

    def __init__(self, job_id: str, status: str, error: str | None) -> None:
        super().__init__(f"spawned job {job_id} ended {status}: {error or 'no error recorded'}")
        self.job_id, self.status, self.error = job_id, status, error


class GatherTimeoutError(FinalTaskError):
    """``ctx.gather``'s timeout passed before every one of its jobs had ended."""

    code = "gather_timeout"


class StepLeaseLostError(AsyncZError):
    """A step's write found the attempt's lease gone (or the attempt ended): nothing was
    stored, and the attempt stops without writing anything more."""

    code = "lease_lost"


# a failed attempt's `last_error` starts with the code of these, not the class name
_CODED = (InvalidPayloadError, InvalidResultError, FinalTaskError)


def describe(exc: BaseException, limit: int = 4000) -> str:
    """A one-line, bounded description of an exception for `last_error`."""
    name = exc.code if isinstance(exc, _CODED) else type(exc).__name__
    text = f"{name}: {exc}".strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def error_body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    """The one error shape every API response uses."""
    return {"error": code, "message": message, **extra}


class CallbackNotFoundError(AsyncZError):
    """No callback has this token (a wrong or forged token, or its job was deleted)."""

    code = "callback_not_found"


class CallbackUsedError(AsyncZError):
    """The callback's token was used already (or its wait timed out, or its job ended):
    a token resumes a job once."""

    code = "callback_used"


class WebhookUrlRefusedError(AsyncZError):
    """A webhook URL this deployment will not call: not https (where http is not allowed),
    or a host that resolves to a private, loopback, link-local, multicast or reserved
    address (SSRF)."""

    code = "webhook_url_refused"


class WebhookNotFoundError(AsyncZError):
    code = "webhook_not_found"


class WebhookDeliveryNotFoundError(AsyncZError):
    code = "webhook_delivery_not_found"


class WebhookLimitError(AsyncZError):
    """The deployment has as many live webhooks as it allows (ASYNCZ_WEBHOOK_MAX_COUNT)."""

    code = "webhook_limit"
