"""The unique-job fields of a submit body (``unique_key``, ``unique_scope``, ``unique_for``,
``debounce``) and their rules; :class:`asyncz.api.routes.jobs_models.SubmitJob` has them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator

from asyncz.jobs import MAX_UNIQUE_FOR, MAX_UNIQUE_KEY

ScopeName = Literal["queued", "queued_or_running", "period"]


class UniqueFields(BaseModel):
    unique_key: str | None = Field(  # no NUL: SubmitJob's key check
        default=None,
        min_length=1,
        max_length=MAX_UNIQUE_KEY,
        description="at most one job holds this key within its `unique_scope`: a submit "
        "meanwhile stores nothing and answers 200 with the holder's id and `duplicate: true` "
        "(409 `unique_key_held`, without the holder, when another API key submitted it). "
        "Not the idempotency key (docs/flow-control.md, Unique jobs)",
    )
    unique_scope: ScopeName | None = Field(
        default=None,
        description="how long the job holds its key: `queued` (until its first attempt "
        "starts), `queued_or_running` (the default: until it finishes, retries included), "
        "`period` (for `unique_for` seconds from the submit, whatever its status)",
    )
    unique_for: int | None = Field(
        default=None, ge=1, le=MAX_UNIQUE_FOR, description="seconds, for the `period` scope"
    )
    debounce: bool = Field(
        default=False,
        description="POST /jobs only: when the key's holder has not started yet and is of "
        "the same task and API key, it takes "
        "this submit's payload and start (`delay_seconds`/`run_at`) instead; one job remains",
    )

    @model_validator(mode="after")
    def _one_unique_scope(self) -> UniqueFields:
        if self.unique_key is None:
            if self.unique_scope is not None or self.unique_for is not None or self.debounce:
                raise ValueError("unique_scope, unique_for and debounce need a unique_key")
        elif self.unique_for is not None and self.unique_scope in (None, "period"):
            self.unique_scope = "period"
        elif self.unique_for is not None:
            raise ValueError("unique_for is for the `period` scope")
        elif self.unique_scope == "period":
            raise ValueError("the `period` scope needs unique_for (seconds)")
        return self
