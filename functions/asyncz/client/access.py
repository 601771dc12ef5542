"""Named API keys and the audit trail from the client: the models and the requests, shared
by :class:`asyncz.client.Client` and :class:`asyncz.client.AsyncClient`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

from asyncz.client._core import Call
from asyncz.client.limits import queue_path
from asyncz.client.models import _when
from asyncz.client.webhooks import AsyncWebhooksClient, WebhooksClient


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A named key as ``GET /keys`` shows it (never the key itself)."""

    name: str
    scopes: list[str]
    rate: str | None = None
    created_at: datetime | None = None
    expires_at: datetime | None = None
    last_used_at: datetime | None = None
    revoked_at: datetime | None = None
    key: str | None = None  # only in the answer to create_key: shown once

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> ApiKey:
        return cls(
            name=str(data["name"]), scopes=list(data.get("scopes") or []), rate=data.get("rate"),
            created_at=_when(data.get("created_at")), expires_at=_when(data.get("expires_at")),
            last_used_at=_when(data.get("last_used_at")),
            revoked_at=_when(data.get("revoked_at")), key=data.get("key"),
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One operator action: who (the key's name), what, on what, when, and how it ended."""

    at: datetime | None
    key_name: str
    action: str
    target: str | None
    detail: dict[str, Any]
    outcome: str

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> AuditEntry:
        return cls(
            at=_when(data.get("at")), key_name=str(data["key_name"]), action=str(data["action"]),
            target=data.get("target"), detail=dict(data.get("detail") or {}),
            outcome=str(data["outcome"]),
        )  # fmt: skip


def create_key(
    name: str, scopes: Iterable[str], rate: str | None, expires_at: datetime | None
) -> Call:
    body = {"name": name, "scopes": list(scopes), "rate": rate,
            "expires_at": expires_at.isoformat() if expires_at else None}  # fmt: skip
    return Call("POST", "/keys", body=body, safe=False)


def list_keys(revoked: bool) -> Call:
    return Call("GET", "/keys", params={"revoked": "true" if revoked else None})


def revoke_key(name: str) -> Call:
    return Call("DELETE", f"/keys/{quote(name, safe='')}", safe=False)


def audit_page(key_name: str | None, action: str | None, limit: int, cursor: str | None) -> Call:
    params = {"key_name": key_name, "action": action, "limit": limit, "cursor": cursor}
    return Call("GET", "/audit", params=params)


class OpsClient:
    """``client.ops``: named keys (scope ``admin``), the audit trail, the workers and the
    tasks' figures (``read``), pausing queues (``operate``), ``whoami`` (any key); webhooks
    (``client.ops.webhooks``, ``admin``)."""

    def __init__(self, send: Callable[[Call], Any]) -> None:
        self._send = send
        self.webhooks = WebhooksClient(send)

    def whoami(self) -> ApiKey:
        """This client's key: its name, scopes and rate."""
        return ApiKey.from_api(self._send(Call("GET", "/whoami")))

    def create_key(
        self, name: str, scopes: Iterable[str], *, rate: str | None = None,
        expires_at: datetime | None = None,
    ) -> ApiKey:  # fmt: skip
        """A new named key; its ``key`` is shown this once (only its hash is stored)."""
        return ApiKey.from_api(self._send(create_key(name, scopes, rate, expires_at)))

    def keys(self, *, revoked: bool = False) -> list[ApiKey]:
        return [ApiKey.from_api(k) for k in self._send(list_keys(revoked))["items"]]

    def revoke_key(self, name: str) -> None:
        self._send(revoke_key(name))

    def audit(
        self, *, key_name: str | None = None, action: str | None = None, limit: int = 50
    ) -> list[AuditEntry]:
        """The latest operator actions, newest first."""
        page = self._send(audit_page(key_name, action, limit, None))
        return [AuditEntry.from_api(e) for e in page["items"]]

    def workers(self) -> dict[str, Any]:
        """``GET /workers``: the live workers and the attempts each runs now."""
        return dict(self._send(Call("GET", "/workers")))

    def task_figures(self) -> list[dict[str, Any]]:
        """``GET /stats/tasks``: each task's runs, failures, retries and percentiles."""
        return list(self._send(Call("GET", "/stats/tasks"))["items"])

    def pause_queue(self, queue: str) -> dict[str, Any]:
        """Pause a queue: jobs are still accepted, none starts until it is resumed."""
        return dict(self._send(Call("POST", queue_path(queue, "pause"), safe=True)))

    def resume_queue(self, queue: str) -> dict[str, Any]:
        return dict(self._send(Call("POST", queue_path(queue, "resume"), safe=True)))


class AsyncOpsClient:
    """``client.ops`` of :class:`asyncz.client.AsyncClient` (see :class:`OpsClient`)."""

    def __init__(self, send: Callable[[Call], Awaitable[Any]]) -> None:
        self._send = send
        self.webhooks = AsyncWebhooksClient(send)

    async def whoami(self) -> ApiKey:
        return ApiKey.from_api(await self._send(Call("GET", "/whoami")))

    async def create_key(
        self, name: str, scopes: Iterable[str], *, rate: str | None = None,
        expires_at: datetime | None = None,
    ) -> ApiKey:  # fmt: skip
        return ApiKey.from_api(await self._send(create_key(name, scopes, rate, expires_at)))

    async def keys(self, *, revoked: bool = False) -> list[ApiKey]:
        return [ApiKey.from_api(k) for k in (await self._send(list_keys(revoked)))["items"]]

    async def revoke_key(self, name: str) -> None:
        await self._send(revoke_key(name))

    async def audit(
        self, *, key_name: str | None = None, action: str | None = None, limit: int = 50
    ) -> list[AuditEntry]:
        page = await self._send(audit_page(key_name, action, limit, None))
        return [AuditEntry.from_api(e) for e in page["items"]]

    async def workers(self) -> dict[str, Any]:
        return dict(await self._send(Call("GET", "/workers")))

    async def task_figures(self) -> list[dict[str, Any]]:
        return list((await self._send(Call("GET", "/stats/tasks")))["items"])

    async def pause_queue(self, queue: str) -> dict[str, Any]:
        return dict(await self._send(Call("POST", queue_path(queue, "pause"), safe=True)))

    async def resume_queue(self, queue: str) -> dict[str, Any]:
        return dict(await self._send(Call("POST", queue_path(queue, "resume"), safe=True)))
