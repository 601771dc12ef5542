"""The PostgreSQL adapter's queries for named API keys and the audit trail
(``sql/access.sql``): the store's ``access`` part (:class:`asyncz.ports.AccessStore`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from asyncz.errors import KeyNameTakenError
from asyncz.port_types import Row
from asyncz.store.runner import QueryRunner


class AccessQueries:
    def __init__(self, run: QueryRunner) -> None:
        self._run = run

    async def live_keys(self) -> list[Row]:
        return await self._run.rows("live_api_keys")

    async def find_key(self, key_hash: str) -> Row | None:
        return await self._run.one("find_api_key", {"key_hash": key_hash})

    async def list_keys(self, *, revoked: bool) -> list[Row]:
        return await self._run.rows("list_api_keys", {"revoked": revoked})

    async def create_key(
        self,
        *,
        name: str,
        key_hash: str,
        scopes: Sequence[str],
        rate: tuple[int, int] | None,
        expires_at: datetime | None,
    ) -> Row:
        try:
            row = await self._run.one(
                "create_api_key",
                {
                    "name": name,
                    "key_hash": key_hash,
                    "scopes": list(scopes),
                    "rate_limit": rate[0] if rate else None,
                    "rate_period_seconds": rate[1] if rate else None,
                    "expires_at": expires_at,
                },
            )
        except psycopg.errors.UniqueViolation as exc:
            raise KeyNameTakenError(f"a live key is named {name!r}: revoke it first") from exc
        assert row is not None
        return row

    async def revoke_key(self, name: str) -> Row | None:
        return await self._run.one("revoke_api_key", {"name": name})

    async def touch_keys(self, hashes: Sequence[str]) -> None:
        await self._run.rows("touch_api_keys", {"hashes": list(hashes)})

    async def insert_audit(
        self, *, key_id: str, key_name: str, action: str, target: str | None,
        detail: Mapping[str, Any], outcome: str,
    ) -> Row:  # fmt: skip
        row = await self._run.one(
            "insert_audit",
            {"key_id": key_id, "key_name": key_name, "action": action, "target": target,
             "detail": Jsonb(dict(detail)), "outcome": outcome},
        )  # fmt: skip
        assert row is not None
        return row

    async def finish_audit(self, audit_id: int, outcome: str, detail: Mapping[str, Any]) -> None:
        await self._run.rows(
            "finish_audit", {"id": audit_id, "outcome": outcome, "detail": Jsonb(dict(detail))}
        )

    async def list_audit(
        self, *, key_name: str | None, action: str | None, limit: int,
        after: tuple[datetime, int] | None, key_id: str | None = None,
    ) -> list[Row]:  # fmt: skip
        return await self._run.rows(
            "list_audit",
            {"key_name": key_name, "key_id": key_id, "action": action, "limit": limit,
             "after_at": after[0] if after else None, "after_id": after[1] if after else None},
        )  # fmt: skip

    async def prune_audit(self, older_than: float, limit: int) -> int:
        row = await self._run.one("prune_audit", {"older_than": float(older_than), "limit": limit})
        return int(row["pruned"]) if row else 0
