"""Routes of webhooks (scope ``admin``): register, list, read, delete, rotate the secret,
the deliveries and their attempts, redeliver, test. docs/events.md, "Webhooks"."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from asyncz.api.routes.keys import principal_of
from asyncz.service import JobService
from asyncz.webhooks.addresses import MAX_URL_LENGTH

Name = Annotated[str, Field(min_length=1, max_length=200)]
Id = Annotated[int, Field(ge=1, le=2**62)]


class WebhookIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=8, max_length=MAX_URL_LENGTH, description="https (http only "
                     "where the deployment allows it); no private address")  # fmt: skip
    types: list[Name] = Field(default=[], max_length=50, description="event types; [] = all")
    queues: list[Name] = Field(default=[], max_length=50, description="queues; [] = all")
    tasks: list[Name] = Field(default=[], max_length=50, description="tasks; [] = all")


class WebhookOut(BaseModel):
    id: int
    url: str
    types: list[str]
    queues: list[str]
    tasks: list[str]
    created_by: str | None = None
    created_at: datetime
    rotated_at: datetime | None = None
    previous_secret_until: datetime | None = Field(
        default=None, description="the replaced secret signs beside the new one until then"
    )

    @classmethod
    def of(cls, row: dict[str, Any]) -> WebhookOut:
        return cls(previous_secret_until=row["previous_until"], **{
            k: row[k] for k in ("id", "url", "types", "queues", "tasks", "created_by",
                                "created_at", "rotated_at")})  # fmt: skip


class WebhookCreated(WebhookOut):
    secret: str = Field(description="the signing secret: shown this once, stored encrypted")


class WebhookList(BaseModel):
    items: list[WebhookOut]


class RotateIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    overlap_seconds: float | None = Field(
        default=None, ge=0, le=30 * 86400,
        description="how long the old secret still signs (default: the deployment's)",
    )  # fmt: skip


class Attempt(BaseModel):
    attempt: int
    at: datetime
    status_code: int | None = Field(description="the endpoint's answer; none: no answer")
    error: str | None = Field(description="why it was not accepted, if it was not")
    duration_ms: int


class Delivery(BaseModel):
    id: int
    event_id: str = Field(description="the CloudEvents id: the same on every retry")
    event_type: str
    redelivery_of: int | None
    status: str = Field(description="pending, delivered or failed")
    attempts: int
    next_at: datetime | None = Field(description="when it is tried again (pending)")
    last_status_code: int | None
    last_error: str | None
    created_at: datetime
    finished_at: datetime | None
    attempt_log: list[Attempt]

    @classmethod
    def of(cls, row: dict[str, Any]) -> Delivery:
        fields = {k: v for k, v in row.items() if k in cls.model_fields}
        fields["next_at"] = row["next_at"] if row["status"] == "pending" else None
        return cls(**fields)


class DeliveryPage(BaseModel):
    items: list[Delivery]
    next_cursor: str | None


class DeliveryQueued(BaseModel):
    id: int = Field(description="the new delivery")
    webhook_id: int
    event_id: str
    status: str


def mount_webhooks(app: FastAPI, service: Callable[[], Awaitable[JobService]]) -> None:
    router = APIRouter(prefix="/webhooks", tags=["webhooks"])

    @router.post("", response_model=WebhookCreated, status_code=201, summary="Register")
    async def register(body: WebhookIn, request: Request) -> Any:
        secret, row = await (await service()).webhooks.register(
            principal_of(request), url=body.url, types=body.types, queues=body.queues,
            tasks=body.tasks,
        )  # fmt: skip
        return WebhookCreated(secret=secret, **WebhookOut.of(row).model_dump())

    @router.get("", response_model=WebhookList, summary="List webhooks (never a secret)")
    async def list_webhooks() -> Any:
        return WebhookList(
            items=[WebhookOut.of(r) for r in await (await service()).webhooks.live()]
        )

    @router.get("/{webhook_id}", response_model=WebhookOut, summary="One webhook")
    async def get_webhook(webhook_id: int) -> Any:
        return WebhookOut.of(await (await service()).webhooks.get(webhook_id))

    @router.delete("/{webhook_id}", status_code=204, response_class=Response, summary="Delete")
    async def delete_webhook(webhook_id: int, request: Request) -> Response:
        await (await service()).webhooks.delete(principal_of(request), webhook_id)
        return Response(status_code=204)

    @router.post("/{webhook_id}/rotate", response_model=WebhookCreated, summary="New secret")
    async def rotate(webhook_id: int, request: Request, body: RotateIn | None = None) -> Any:
        overlap = body.overlap_seconds if body else None
        secret, row = await (await service()).webhooks.rotate(
            principal_of(request), webhook_id, overlap
        )
        return WebhookCreated(secret=secret, **WebhookOut.of(row).model_dump())

    @router.get("/{webhook_id}/deliveries", response_model=DeliveryPage, summary="Deliveries")
    async def deliveries(
        webhook_id: int,
        limit: Annotated[int, Query(ge=1, le=200)] = 50,
        cursor: Annotated[str | None, Query(max_length=500)] = None,
    ) -> Any:
        page = await (await service()).webhooks.deliveries(webhook_id, limit=limit, cursor=cursor)
        return DeliveryPage(
            items=[Delivery.of(r) for r in page.items], next_cursor=page.next_cursor
        )

    @router.post(
        "/{webhook_id}/deliveries/{delivery_id}/redeliver", response_model=DeliveryQueued,
        status_code=202, summary="Deliver an event again (the same event id)",
    )  # fmt: skip
    async def redeliver(webhook_id: int, delivery_id: int, request: Request) -> Any:
        row = await (await service()).webhooks.redeliver(
            principal_of(request), webhook_id, delivery_id
        )
        return DeliveryQueued(**{k: row[k] for k in DeliveryQueued.model_fields})

    @router.post("/{webhook_id}/test", response_model=DeliveryQueued, status_code=202,
                 summary="Send a test event (asyncz.webhook.test)")  # fmt: skip
    async def test(webhook_id: int, request: Request) -> Any:
        row = await (await service()).webhooks.test(principal_of(request), webhook_id)
        return DeliveryQueued(**{k: row[k] for k in DeliveryQueued.model_fields})

    app.include_router(router)
