"""Routes of access: who am I (``GET /whoami``) and named keys (``/keys``, scope ``admin``);
the audit trail is :mod:`asyncz.api.routes.audit`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from asyncz.access import (
    CONFIGURED_KEY_NAME,
    KEY_RELOAD_SECONDS,
    Principal,
    Scope,
    format_rate,
    parse_rate,
)
from asyncz.errors import InvalidInputError
from asyncz.service import JobService

ScopeName = Annotated[str, Field(pattern=f"^({'|'.join(s.value for s in Scope)})$")]


class WhoAmI(BaseModel):
    name: str
    key_id: str = Field(description="what this key's jobs, audit entries and rate belong to")
    scopes: list[str]
    rate: str | None = Field(default=None, description="requests per period, e.g. 5/s")


class KeyIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
    scopes: list[ScopeName] = Field(min_length=1, max_length=len(Scope))
    rate: str | None = Field(
        default=None, max_length=20, description="requests per period across every sandbox, "
        "e.g. 5/s or 600/m; none: no limit"
    )  # fmt: skip
    expires_at: datetime | None = None


class KeyOut(BaseModel):
    key_id: str = Field(description="this key's own id: a later key of its name has another")
    name: str
    scopes: list[str]
    rate: str | None = None
    created_at: datetime
    expires_at: datetime | None = None
    last_used_at: datetime | None = Field(
        default=None, description=f"written at most every {KEY_RELOAD_SECONDS:g} s per sandbox"
    )
    revoked_at: datetime | None = None

    @classmethod
    def of(cls, row: dict[str, Any]) -> KeyOut:
        rate = (row["rate_limit"], row["rate_period_seconds"]) if row["rate_limit"] else None
        return cls(
            key_id=row["key_id"], name=row["name"], scopes=list(row["scopes"]),
            rate=format_rate(rate),
            created_at=row["created_at"], expires_at=row["expires_at"],
            last_used_at=row["last_used_at"], revoked_at=row["revoked_at"],
        )  # fmt: skip


class KeyCreated(KeyOut):
    key: str = Field(description="the key itself: shown this once, never stored")


class KeyList(BaseModel):
    items: list[KeyOut]


def principal_of(request: Request) -> Principal:
    """The principal the gate admitted (every route here needs a key)."""
    principal: Principal = request.scope["state"]["principal"]
    return principal


def mount_access(app: FastAPI, service: Callable[[], Awaitable[JobService]]) -> None:
    router = APIRouter()

    @router.get("/whoami", response_model=WhoAmI, summary="This key's name and scopes")
    async def whoami(request: Request) -> Any:
        me = principal_of(request)
        scopes = sorted(s.value for s in me.scopes)
        return WhoAmI(name=me.name, key_id=me.key_id, scopes=scopes, rate=format_rate(me.rate))

    @router.get("/keys", response_model=KeyList, summary="List API keys (never the keys)")
    async def list_keys(revoked: bool = False) -> Any:
        rows = await (await service()).access.list_keys(revoked=revoked)
        return KeyList(items=[KeyOut.of(r) for r in rows])

    @router.post("/keys", response_model=KeyCreated, status_code=201, summary="Create a key")
    async def create_key(body: KeyIn, request: Request) -> Any:
        if body.name == CONFIGURED_KEY_NAME:
            raise InvalidInputError(f"{CONFIGURED_KEY_NAME!r} names the configured keys")
        try:
            rate = parse_rate(body.rate) if body.rate else None
        except ValueError as exc:
            raise InvalidInputError(str(exc)) from None
        key, row = await (await service()).access.create_key(
            principal_of(request), name=body.name, scopes=body.scopes, rate=rate,
            expires_at=body.expires_at,
        )  # fmt: skip
        request.app.state.gate.ring.invalidate()
        return KeyCreated(key=key, **KeyOut.of(row).model_dump())

    @router.delete("/keys/{name}", status_code=204, response_class=Response, summary="Revoke")
    async def revoke_key(name: str, request: Request) -> Response:
        await (await service()).access.revoke_key(principal_of(request), name)
        request.app.state.gate.ring.invalidate()
        return Response(status_code=204)

    app.include_router(router)


__all__ = ["Scope", "mount_access", "principal_of"]
