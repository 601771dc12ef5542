"""The PostgreSQL adapter's queries for webhooks (``sql/webhooks.sql``): the store's
``webhooks`` part (:class:`asyncz.store_ports.WebhookStore`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from psycopg.types.json import Jsonb

from asyncz.port_types import Row
from asyncz.store.runner import QueryRunner


class WebhookQueries:
    def __init__(self, run: QueryRunner) -> None:
        self._run = run

    async def cipher_key(self) -> bytes:
        row = await self._run.one("webhook_cipher_key")
        assert row is not None, "migration 0024 inserts the webhooks' key"
        return bytes(row["secret"])

    async def insert(
        self, *, url: str, types: Sequence[str], queues: Sequence[str], tasks: Sequence[str],
        secret: bytes, created_by: str, created_by_key_id: str,
    ) -> Row:  # fmt: skip
        row = await self._run.one(
            "insert_webhook",
            {"url": url, "types": list(types), "queues": list(queues), "tasks": list(tasks),
             "secret": secret, "created_by": created_by,
             "created_by_key_id": created_by_key_id},
        )  # fmt: skip
        assert row is not None
        return row

    async def count(self) -> int:
        row = await self._run.one("count_webhooks")
        return int(row["live"]) if row else 0

    async def live(self) -> list[Row]:
        return await self._run.rows("list_webhooks")

    async def get(self, webhook_id: int) -> Row | None:
        return await self._run.one("get_webhook", {"id": webhook_id})

    async def delete(self, webhook_id: int) -> bool:
        return await self._run.one("delete_webhook", {"id": webhook_id}) is not None

    async def rotate(self, webhook_id: int, secret: bytes, overlap_seconds: float) -> Row | None:
        return await self._run.one(
            "rotate_webhook_secret",
            {"id": webhook_id, "secret": secret, "overlap": overlap_seconds},
        )

    async def add_deliveries(self, events: Sequence[Row], retry_for_seconds: float) -> int:
        # one JSON array, one statement, whatever the page's size
        rows = await self._run.rows(
            "add_webhook_deliveries",
            {"events": json.dumps(list(events), default=str), "retry_for": retry_for_seconds},
        )
        return len(rows)

    async def add_delivery(
        self, webhook_id: int, event: Row, retry_for_seconds: float, *,
        redelivery_of: int | None = None,
    ) -> Row | None:  # fmt: skip
        return await self._run.one(
            "add_webhook_delivery",
            {"webhook_id": webhook_id, "event_id": event["id"], "event_type": event["type"],
             "event": Jsonb(dict(event)), "retry_for": retry_for_seconds,
             "redelivery_of": redelivery_of},
        )  # fmt: skip

    async def get_delivery(self, webhook_id: int, delivery_id: int) -> Row | None:
        return await self._run.one(
            "get_webhook_delivery", {"webhook_id": webhook_id, "id": delivery_id}
        )

    async def claim_due(
        self, *, limit: int, per_endpoint: int, busy: Sequence[int], hold_seconds: float,
        retry_for_seconds: float,
    ) -> list[Row]:  # fmt: skip
        return await self._run.rows(
            "claim_webhook_deliveries",
            {"limit": limit, "per_endpoint": per_endpoint, "busy": list(busy),
             "hold": hold_seconds, "retry_for": retry_for_seconds},
        )  # fmt: skip

    async def finish_attempt(
        self, delivery_id: int, claim_token: Any, *, ok: bool, final: bool, delay_seconds: float,
        status_code: int | None, error: str | None, duration_ms: int,
    ) -> Row | None:  # fmt: skip
        return await self._run.one(
            "finish_webhook_attempt",
            {"id": delivery_id, "claim_token": claim_token, "ok": ok, "final": final,
             "delay": delay_seconds, "status_code": status_code, "error": error,
             "duration_ms": duration_ms},
        )  # fmt: skip

    async def list_deliveries(
        self, webhook_id: int, *, limit: int, before: int | None
    ) -> list[Row]:
        return await self._run.rows(
            "list_webhook_deliveries", {"webhook_id": webhook_id, "limit": limit, "before": before}
        )

    async def list_attempts(self, delivery_ids: Sequence[int]) -> list[Row]:
        return await self._run.rows("list_webhook_attempts", {"ids": list(delivery_ids)})

    async def prune(self, older_than: float, limit: int) -> int:
        row = await self._run.one("prune_webhook_deliveries", {"older_than": older_than,
                                                               "limit": limit})  # fmt: skip
        return int(row["pruned"]) if row else 0
