"""The in-memory store's named API keys and audit trail: its ``access`` part
(:class:`asyncz.ports.AccessStore`) on lists."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from asyncz.errors import KeyNameTakenError
from asyncz.port_types import Row

_PUBLIC = ("key_id", "name", "scopes", "rate_limit", "rate_period_seconds", "created_at",
           "expires_at", "last_used_at", "revoked_at")  # fmt: skip


class MemoryAccess:
    def __init__(self) -> None:
        self.keys: list[dict[str, Any]] = []
        self.audit: list[dict[str, Any]] = []

    async def live_keys(self) -> list[Row]:
        now = datetime.now(UTC)
        return [
            {**k} for k in self.keys
            if k["revoked_at"] is None and (k["expires_at"] is None or k["expires_at"] > now)
        ]  # fmt: skip

    async def find_key(self, key_hash: str) -> Row | None:
        return next((k for k in await self.live_keys() if k["key_hash"] == key_hash), None)

    async def list_keys(self, *, revoked: bool) -> list[Row]:
        keys = [k for k in self.keys if revoked or k["revoked_at"] is None]
        keys.sort(key=lambda k: (k["name"], -k["created_at"].timestamp()))
        return [{f: k[f] for f in _PUBLIC} for k in keys]

    async def create_key(
        self,
        *,
        name: str,
        key_hash: str,
        scopes: Sequence[str],
        rate: tuple[int, int] | None,
        expires_at: datetime | None,
    ) -> Row:
        if any(k["name"] == name and k["revoked_at"] is None for k in self.keys):
            raise KeyNameTakenError(f"a live key is named {name!r}: revoke it first")
        key = {
            "key_id": f"key-{len(self.keys) + 1}", "name": name, "key_hash": key_hash,
            "scopes": list(scopes),
            "rate_limit": rate[0] if rate else None,
            "rate_period_seconds": rate[1] if rate else None,
            "created_at": datetime.now(UTC), "expires_at": expires_at, "last_used_at": None,
            "revoked_at": None,
        }  # fmt: skip
        self.keys.append(key)
        return {f: key[f] for f in _PUBLIC}

    async def revoke_key(self, name: str) -> Row | None:
        for key in self.keys:
            if key["name"] == name and key["revoked_at"] is None:
                key["revoked_at"] = datetime.now(UTC)
                return {"key_id": key["key_id"], "name": name, "revoked_at": key["revoked_at"]}
        return None

    async def touch_keys(self, hashes: Sequence[str]) -> None:
        for key in self.keys:
            if key["key_hash"] in hashes:
                key["last_used_at"] = datetime.now(UTC)

    async def insert_audit(
        self, *, key_id: str, key_name: str, action: str, target: str | None,
        detail: Mapping[str, Any], outcome: str,
    ) -> Row:  # fmt: skip
        row = {
            "id": len(self.audit) + 1, "at": datetime.now(UTC), "key_id": key_id,
            "key_name": key_name,
            "action": action, "target": target, "detail": dict(detail), "outcome": outcome,
        }  # fmt: skip
        self.audit.append(row)
        return {"id": row["id"], "at": row["at"]}

    async def finish_audit(self, audit_id: int, outcome: str, detail: Mapping[str, Any]) -> None:
        for row in self.audit:
            if row["id"] == audit_id:
                row["outcome"] = outcome
                row["detail"] = {**row["detail"], **detail}

    async def list_audit(
        self, *, key_name: str | None, action: str | None, limit: int,
        after: tuple[datetime, int] | None, key_id: str | None = None,
    ) -> list[Row]:  # fmt: skip
        rows = [
            r for r in self.audit
            if (key_name is None or r["key_name"] == key_name)
            and (key_id is None or r["key_id"] == key_id)
            and (action is None or r["action"] == action)
            and (after is None or (r["at"], r["id"]) < after)
        ]  # fmt: skip
        rows.sort(key=lambda r: (r["at"], r["id"]), reverse=True)
        return [dict(r) for r in rows[:limit]]

    async def prune_audit(self, older_than: float, limit: int) -> int:
        cutoff = datetime.now(UTC) - timedelta(seconds=older_than)
        gone = sorted((r for r in self.audit if r["at"] < cutoff), key=lambda r: (r["at"], r["id"]))
        gone_ids = {r["id"] for r in gone[:limit]}
        self.audit = [r for r in self.audit if r["id"] not in gone_ids]
        return len(gone_ids)
