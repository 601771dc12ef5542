"""Webhooks from the client (``client.ops.webhooks``, scope ``admin``): register, list,
remove, rotate the secret, read the deliveries, redeliver, test. docs/events.md."""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from asyncz.client._core import Call
from asyncz.client.models import _when


@dataclass(frozen=True, slots=True)
class Webhook:
    """A registered webhook; ``secret`` only in the answer to ``add`` and ``rotate``."""

    id: int
    url: str
    types: list[str] = field(default_factory=list)
    queues: list[str] = field(default_factory=list)
    tasks: list[str] = field(default_factory=list)
    created_by: str | None = None
    created_at: datetime | None = None
    rotated_at: datetime | None = None
    previous_secret_until: datetime | None = None
    secret: str | None = None

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> Webhook:
        return cls(
            id=int(data["id"]), url=str(data["url"]), types=list(data.get("types") or []),
            queues=list(data.get("queues") or []), tasks=list(data.get("tasks") or []),
            created_by=data.get("created_by"), created_at=_when(data.get("created_at")),
            rotated_at=_when(data.get("rotated_at")),
            previous_secret_until=_when(data.get("previous_secret_until")),
            secret=data.get("secret"),
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class WebhookDelivery:
    """One event to one webhook: its status and every attempt (status code or error)."""

    id: int
    event_id: str
    event_type: str
    status: str
    attempts: int
    redelivery_of: int | None = None
    last_status_code: int | None = None
    last_error: str | None = None
    created_at: datetime | None = None
    attempt_log: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> WebhookDelivery:
        return cls(
            id=int(data["id"]), event_id=str(data["event_id"]),
            event_type=str(data["event_type"]), status=str(data["status"]),
            attempts=int(data["attempts"]), redelivery_of=data.get("redelivery_of"),
            last_status_code=data.get("last_status_code"), last_error=data.get("last_error"),
            created_at=_when(data.get("created_at")),
            attempt_log=list(data.get("attempt_log") or []),
        )  # fmt: skip


def _add(url: str, types: Iterable[str], queues: Iterable[str], tasks: Iterable[str]) -> Call:
    body = {"url": url, "types": list(types), "queues": list(queues), "tasks": list(tasks)}
    return Call("POST", "/webhooks", body=body, safe=False)


def _deliveries(webhook_id: int, limit: int, cursor: str | None) -> Call:
    params = {"limit": limit, "cursor": cursor}
    return Call("GET", f"/webhooks/{int(webhook_id)}/deliveries", params=params)


def _redeliver(webhook_id: int, delivery_id: int) -> Call:
    path = f"/webhooks/{int(webhook_id)}/deliveries/{int(delivery_id)}/redeliver"
    return Call("POST", path, safe=False)


def _rotate(webhook_id: int, overlap_seconds: float | None) -> Call:
    body = {"overlap_seconds": overlap_seconds}
    return Call("POST", f"/webhooks/{int(webhook_id)}/rotate", body=body, safe=False)


class WebhooksClient:
    """``client.ops.webhooks`` of :class:`asyncz.client.Client`."""

    def __init__(self, send: Callable[[Call], Any]) -> None:
        self._send = send

    def add(
        self, url: str, *, types: Iterable[str] = (), queues: Iterable[str] = (),
        tasks: Iterable[str] = (),
    ) -> Webhook:  # fmt: skip
        """Register ``url`` (empty filters: every event); its ``secret`` is shown this once."""
        return Webhook.from_api(self._send(_add(url, types, queues, tasks)))

    def list(self) -> list[Webhook]:
        return [Webhook.from_api(w) for w in self._send(Call("GET", "/webhooks"))["items"]]

    def remove(self, webhook_id: int) -> None:
        self._send(Call("DELETE", f"/webhooks/{int(webhook_id)}", safe=False))

    def rotate(self, webhook_id: int, *, overlap_seconds: float | None = None) -> Webhook:
        """A new secret (shown once); the old one signs beside it for the overlap."""
        return Webhook.from_api(self._send(_rotate(webhook_id, overlap_seconds)))

    def deliveries(self, webhook_id: int, *, limit: int = 50) -> builtins.list[WebhookDelivery]:
        """The latest deliveries, newest first, each with its attempts."""
        page = self._send(_deliveries(webhook_id, limit, None))
        return [WebhookDelivery.from_api(d) for d in page["items"]]

    def redeliver(self, webhook_id: int, delivery_id: int) -> dict[str, Any]:
        """The delivery's event again (the same event id): the new delivery's id."""
        return dict(self._send(_redeliver(webhook_id, delivery_id)))

    def test(self, webhook_id: int) -> dict[str, Any]:
        """Send a test event (``asyncz.webhook.test``)."""
        return dict(self._send(Call("POST", f"/webhooks/{int(webhook_id)}/test", safe=False)))


class AsyncWebhooksClient:
    """``client.ops.webhooks`` of :class:`asyncz.client.AsyncClient`."""

    def __init__(self, send: Callable[[Call], Awaitable[Any]]) -> None:
        self._send = send

    async def add(
        self, url: str, *, types: Iterable[str] = (), queues: Iterable[str] = (),
        tasks: Iterable[str] = (),
    ) -> Webhook:  # fmt: skip
        return Webhook.from_api(await self._send(_add(url, types, queues, tasks)))

    async def list(self) -> list[Webhook]:
        page = await self._send(Call("GET", "/webhooks"))
        return [Webhook.from_api(w) for w in page["items"]]

    async def remove(self, webhook_id: int) -> None:
        await self._send(Call("DELETE", f"/webhooks/{int(webhook_id)}", safe=False))

    async def rotate(self, webhook_id: int, *, overlap_seconds: float | None = None) -> Webhook:
        return Webhook.from_api(await self._send(_rotate(webhook_id, overlap_seconds)))

    async def deliveries(
        self, webhook_id: int, *, limit: int = 50
    ) -> builtins.list[WebhookDelivery]:
        page = await self._send(_deliveries(webhook_id, limit, None))
        return [WebhookDelivery.from_api(d) for d in page["items"]]

    async def redeliver(self, webhook_id: int, delivery_id: int) -> dict[str, Any]:
        return dict(await self._send(_redeliver(webhook_id, delivery_id)))

    async def test(self, webhook_id: int) -> dict[str, Any]:
        path = f"/webhooks/{int(webhook_id)}/test"
        return dict(await self._send(Call("POST", path, safe=False)))
