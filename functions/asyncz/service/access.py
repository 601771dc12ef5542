"""Named API keys and the audit trail: a part of :class:`asyncz.service.JobService`.

Every operator action is written to the audit trail *before* it runs (outcome
``pending``) and given its outcome after: an action whose audit row cannot be written is
not done, so none goes unrecorded.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

from asyncz.access import Principal, check_name, hash_api_key, new_key, parse_scopes
from asyncz.errors import AsyncZError, KeyNotFoundError
from asyncz.pagination import decode_cursor, encode_cursor
from asyncz.port_types import Page, Row
from asyncz.ports import JobStore, MetricsSink
from asyncz.settings import Settings

log = logging.getLogger("asyncz.access")


class Access:
    def __init__(self, store: JobStore, settings: Settings, metrics: MetricsSink) -> None:
        self.store = store
        self.settings = settings
        self.metrics = metrics

    # --- keys ----------------------------------------------------------------------------

    async def create_key(
        self,
        actor: Principal,
        *,
        name: str,
        scopes: Iterable[str],
        rate: tuple[int, int] | None = None,
        expires_at: datetime | None = None,
    ) -> tuple[str, Row]:
        """A new key (returned once, never stored) and its stored row."""
        check_name(name)
        wanted = sorted(s.value for s in parse_scopes(scopes))
        key = new_key()
        detail = {"scopes": wanted, "rate": list(rate) if rate else None}
        async with self.audited(actor, "key.create", name, detail) as done:
            row = await self.store.access.create_key(
                name=name, key_hash=hash_api_key(key), scopes=wanted, rate=rate,
                expires_at=expires_at,
            )  # fmt: skip
            done["key_id"] = row["key_id"]  # the name may later be another key's
        return key, row

    async def revoke_key(self, actor: Principal, name: str) -> Row:
        async with self.audited(actor, "key.revoke", name, {}) as done:
            row = await self.store.access.revoke_key(name)
            if row is None:
                raise KeyNotFoundError(f"no live key is named {name!r}")
            done["key_id"] = row["key_id"]
        return row

    async def list_keys(self, *, revoked: bool = False) -> list[Row]:
        return await self.store.access.list_keys(revoked=revoked)

    # --- audit ---------------------------------------------------------------------------

    @asynccontextmanager
    async def audited(
        self, actor: Principal, action: str, target: str | None, detail: dict[str, Any]
    ) -> AsyncIterator[dict[str, Any]]:
        """Record ``action`` by ``actor`` (its key's id, its name beside) before it runs, then
        its outcome: ``ok``, or the error code it failed with. Yields a dict the action may
        add figures to (e.g. a count)."""
        row = await self.store.access.insert_audit(
            key_id=actor.key_id,
            key_name=actor.name,
            action=action,
            target=target,
            detail=detail,
            outcome="pending",
        )
        extra: dict[str, Any] = {}
        outcome = "ok"
        try:
            yield extra
        except AsyncZError as exc:
            outcome = exc.code
            raise
        except BaseException:
            outcome = "error"
            raise
        finally:
            try:
                await self.store.access.finish_audit(row["id"], outcome, extra)
            except Exception:  # the action's answer stands; its row says "pending"
                log.error("audit: could not record the outcome of %s", action, exc_info=True)
                self.metrics.add_metric("AuditWriteFailed", "Count", 1)

    async def audit_page(
        self,
        *,
        key_name: str | None = None,
        action: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        key_id: str | None = None,
    ) -> Page:
        after = decode_cursor(cursor, ident=lambda i: str(int(i)))
        position = (after[0], int(after[1])) if after else None
        rows = await self.store.access.list_audit(
            key_name=key_name, action=action, limit=limit, after=position, key_id=key_id
        )
        last = rows[-1] if len(rows) == limit else None
        return Page(rows, encode_cursor(last["at"], str(last["id"])) if last else None)
