"""Named API keys and the audit trail from the client: the models and the requests, shared
by :class:`asyncz.client.Client` and :class:`asyncz.client.AsyncClient`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

from asyncz.client._core import Call
from asyncz.client.models import _when


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
