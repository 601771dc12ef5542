"""``POST /callbacks/{token}`` and ``POST /callbacks/{token}/heartbeat``: how the world
answers a durable task's ``ctx.callback`` (docs/durable.md, "Callbacks"). The token is the
credential, so the routes need no API key; a rate for the whole deployment bounds them
(``ASYNCZ_CALLBACK_RATE``, asyncz.api.access). A used token answers ``409 callback_used``
(a sender's retry learns it was taken), an unknown one ``404 callback_not_found``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated, Any

from fastapi import FastAPI, Path
from pydantic import BaseModel, ConfigDict, Field, model_validator

from asyncz.service import JobService

TOKEN = Annotated[str, Path(min_length=10, max_length=100, pattern=r"^[A-Za-z0-9_\-]+$")]
MAX_ERROR = 2000


class CallbackPost(BaseModel):
    """Exactly one of ``result`` (what ``cb.wait()`` returns; any JSON, ``null`` too) and
    ``error`` (``cb.wait()`` raises ``CallbackFailedError`` with it)."""

    model_config = ConfigDict(extra="forbid")
    result: Any = None
    error: str | None = Field(default=None, min_length=1, max_length=MAX_ERROR)

    @model_validator(mode="after")
    def _one(self) -> CallbackPost:
        if len(self.model_fields_set & {"result", "error"}) != 1:
            raise ValueError('give exactly one of "result" and "error"')
        return self

    def outcome(self) -> dict[str, Any]:
        if "error" in self.model_fields_set:
            return {"error": self.error}
        return {"result": self.result}


class CallbackAccepted(BaseModel):
    job_id: str  # the job it resumed


class CallbackExtended(BaseModel):
    timeout_at: datetime  # the callback's deadline now


def mount_callbacks(app: FastAPI, service: Callable[[], Awaitable[JobService]]) -> None:
    @app.post("/callbacks/{token}", response_model=CallbackAccepted, summary="Answer a callback",
              responses={404: {"description": "callback_not_found"},
                         409: {"description": "callback_used"}})  # fmt: skip
    async def post_callback(token: TOKEN, body: CallbackPost) -> Any:
        job_id = await (await service()).callbacks.post(token, body.outcome())
        return CallbackAccepted(job_id=job_id)

    @app.post("/callbacks/{token}/heartbeat", response_model=CallbackExtended,
              summary="Extend a callback's timeout",
              responses={404: {"description": "callback_not_found"},
                         409: {"description": "callback_used"}})  # fmt: skip
    async def heartbeat_callback(token: TOKEN) -> Any:
        return CallbackExtended(timeout_at=await (await service()).callbacks.heartbeat(token))
