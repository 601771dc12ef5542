"""Routes of the audit trail: ``GET /audit`` (scope ``read``), operator actions newest first."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Query
from pydantic import BaseModel, Field

from asyncz.service import JobService


class AuditEntry(BaseModel):
    at: datetime
    key_id: str | None = Field(description="the acting key (none: before key ids were kept)")
    key_name: str
    action: str = Field(
        description="cancel, replay, bulk_replay, purge, pause, resume, key.create, key.revoke, "
        "event.send, webhook.create, webhook.delete, webhook.rotate, webhook.redeliver, "
        "webhook.test"
    )
    target: str | None = Field(
        description="the job id, the key's name, or the webhook's url, id or id/delivery"
    )
    detail: dict[str, Any]
    outcome: str = Field(description="ok, an error code, or pending (its answer was lost)")


class AuditPage(BaseModel):
    items: list[AuditEntry]
    next_cursor: str | None


def mount_audit(app: FastAPI, service: Callable[[], Awaitable[JobService]]) -> None:
    router = APIRouter()

    @router.get("/audit", response_model=AuditPage, summary="Operator actions, newest first")
    async def audit(
        key_name: Annotated[str | None, Query(max_length=64)] = None,
        key_id: Annotated[str | None, Query(max_length=80)] = None,
        action: Annotated[str | None, Query(max_length=40)] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
        cursor: Annotated[str | None, Query(max_length=500)] = None,
    ) -> Any:
        page = await (await service()).access.audit_page(
            key_name=key_name, action=action, limit=limit, cursor=cursor, key_id=key_id
        )
        return AuditPage(items=[AuditEntry(**r) for r in page.items], next_cursor=page.next_cursor)

    app.include_router(router)
