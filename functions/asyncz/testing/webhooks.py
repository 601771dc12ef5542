"""The in-memory store's webhooks: its ``webhooks`` part
(:class:`asyncz.webhook_ports.WebhookStore`) on dicts, held to the same contract."""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from asyncz.port_types import Row

_PUBLIC = ("id", "url", "types", "queues", "tasks", "created_by", "created_at", "rotated_at",
           "previous_until")  # fmt: skip
_LISTED = ("id", "webhook_id", "event_id", "event_type", "redelivery_of", "status", "attempts",
           "next_at", "last_status_code", "last_error", "created_at", "finished_at")  # fmt: skip


def _now() -> datetime:
    return datetime.now(UTC)


def _matches(hook: dict[str, Any], event: Row) -> bool:
    return all(
        not hook[field] or event[key] in hook[field]
        for field, key in (("types", "type"), ("queues", "queue"), ("tasks", "task"))
    )


class MemoryWebhooks:
    def __init__(self) -> None:
        self.hooks: dict[int, dict[str, Any]] = {}
        self.deliveries: dict[int, dict[str, Any]] = {}
        self.attempts: list[dict[str, Any]] = []
        self._key = os.urandom(32)

    async def cipher_key(self) -> bytes:
        return self._key

    async def insert(
        self, *, url: str, types: Sequence[str], queues: Sequence[str], tasks: Sequence[str],
        secret: bytes, created_by: str, created_by_key_id: str,
    ) -> Row:  # fmt: skip
        hook: dict[str, Any] = {
            "id": len(self.hooks) + 1, "url": url, "types": list(types), "queues": list(queues),
            "tasks": list(tasks), "secret": secret, "previous_secret": None,
            "previous_until": None, "created_by": created_by,
            "created_by_key_id": created_by_key_id, "created_at": _now(), "rotated_at": None,
            "deleted_at": None,
        }  # fmt: skip
        self.hooks[hook["id"]] = hook
        return {f: hook[f] for f in _PUBLIC}

    def _live(self, webhook_id: int) -> dict[str, Any] | None:
        hook = self.hooks.get(webhook_id)
        return hook if hook is not None and hook["deleted_at"] is None else None

    async def count(self) -> int:
        return sum(1 for h in self.hooks.values() if h["deleted_at"] is None)

    async def live(self) -> list[Row]:
        return [{f: h[f] for f in _PUBLIC} for h in self.hooks.values() if h["deleted_at"] is None]

    async def get(self, webhook_id: int) -> Row | None:
        hook = self._live(webhook_id)
        return {f: hook[f] for f in _PUBLIC} if hook else None

    async def delete(self, webhook_id: int) -> bool:
        hook = self._live(webhook_id)
        if hook is None:
            return False
        hook["deleted_at"] = _now()
        return True

    async def rotate(self, webhook_id: int, secret: bytes, overlap_seconds: float) -> Row | None:
        hook = self._live(webhook_id)
        if hook is None:
            return None
        now = _now()
        hook.update(previous_secret=hook["secret"], secret=secret, rotated_at=now,
                    previous_until=now + timedelta(seconds=overlap_seconds))  # fmt: skip
        return {f: hook[f] for f in _PUBLIC}

    def _add(self, hook_id: int, event: Row, retry_for: float, redelivery_of: int | None) -> Row:
        now = _now()
        row: dict[str, Any] = {
            "id": len(self.deliveries) + 1, "webhook_id": hook_id, "event_id": event["id"],
            "event_type": event["type"], "event": dict(event), "redelivery_of": redelivery_of,
            "status": "pending", "attempts": 0, "next_at": now,
            "give_up_at": now + timedelta(seconds=retry_for), "claim_token": None,
            "claimed_until": None, "last_status_code": None, "last_error": None,
            "created_at": now, "finished_at": None,
        }  # fmt: skip
        self.deliveries[row["id"]] = row
        return row

    async def add_deliveries(self, events: Sequence[Row], retry_for_seconds: float) -> int:
        added = 0
        for event in events:
            for hook in [h for h in self.hooks.values() if h["deleted_at"] is None]:
                taken = any(
                    d["webhook_id"] == hook["id"] and d["event_id"] == event["id"]
                    and d["redelivery_of"] is None for d in self.deliveries.values()
                )  # fmt: skip
                if _matches(hook, event) and not taken:
                    self._add(hook["id"], event["body"], retry_for_seconds, None)
                    added += 1
        return added

    async def add_delivery(
        self, webhook_id: int, event: Row, retry_for_seconds: float, *,
        redelivery_of: int | None = None,
    ) -> Row | None:  # fmt: skip
        if self._live(webhook_id) is None:
            return None
        row = self._add(webhook_id, event, retry_for_seconds, redelivery_of)
        return {f: row[f] for f in ("id", "webhook_id", "event_id", "status", "created_at")}

    async def get_delivery(self, webhook_id: int, delivery_id: int) -> Row | None:
        row = self.deliveries.get(delivery_id)
        if row is None or row["webhook_id"] != webhook_id:
            return None
        return {**{f: row[f] for f in _LISTED}, "event": row["event"]}

    async def claim_due(
        self, *, limit: int, per_endpoint: int, busy: Sequence[int], hold_seconds: float,
        retry_for_seconds: float,
    ) -> list[Row]:  # fmt: skip
        now = _now()
        window = now - timedelta(seconds=retry_for_seconds)
        hooks = {
            i for i, h in self.hooks.items()
            if (h["deleted_at"] is None or h["deleted_at"] > window) and i not in busy
        }  # fmt: skip
        due = sorted(
            (d for d in self.deliveries.values()
             if d["status"] == "pending" and d["next_at"] <= now
             and (d["claimed_until"] is None or d["claimed_until"] < now)
             and d["webhook_id"] in hooks),
            key=lambda d: (d["next_at"], d["id"]),
        )  # fmt: skip
        taken: list[Row] = []
        per: dict[int, int] = {}
        for d in due:
            if per.get(d["webhook_id"], 0) >= per_endpoint:
                continue
            per[d["webhook_id"]] = per.get(d["webhook_id"], 0) + 1
            d["claim_token"] = uuid.uuid4()
            d["claimed_until"] = now + timedelta(seconds=hold_seconds)
            hook = self.hooks[d["webhook_id"]]
            signs = hook["previous_until"] is not None and hook["previous_until"] > now
            taken.append({
                "id": d["id"], "webhook_id": d["webhook_id"], "event": d["event"],
                "attempts": d["attempts"], "claim_token": d["claim_token"], "url": hook["url"],
                "secret": hook["secret"],
                "previous_secret": hook["previous_secret"] if signs else None,
                "deleted": hook["deleted_at"] is not None,
            })  # fmt: skip
            if len(taken) == limit:
                break
        return sorted(taken, key=lambda r: r["id"])

    async def finish_attempt(
        self, delivery_id: int, claim_token: Any, *, ok: bool, final: bool, delay_seconds: float,
        status_code: int | None, error: str | None, duration_ms: int,
    ) -> Row | None:  # fmt: skip
        d = self.deliveries.get(delivery_id)
        if d is None or d["claim_token"] != claim_token or d["status"] != "pending":
            return None
        now = _now()
        again = now + timedelta(seconds=delay_seconds)
        ended = ok or final or again > d["give_up_at"]
        d.update(
            attempts=d["attempts"] + 1,
            status="delivered" if ok else "failed" if ended else "pending",
            next_at=again, finished_at=now if ended else None, claim_token=None,
            claimed_until=None, last_status_code=status_code, last_error=error,
        )  # fmt: skip
        self.attempts.append({
            "delivery_id": delivery_id, "attempt": d["attempts"], "at": now,
            "status_code": status_code, "error": error, "duration_ms": duration_ms,
        })  # fmt: skip
        return {"status": d["status"], "attempt": d["attempts"]}

    async def list_deliveries(
        self, webhook_id: int, *, limit: int, before: int | None
    ) -> list[Row]:
        rows = sorted(
            (d for d in self.deliveries.values()
             if d["webhook_id"] == webhook_id and (before is None or d["id"] < before)),
            key=lambda d: -d["id"],
        )  # fmt: skip
        return [{f: d[f] for f in _LISTED} for d in rows[:limit]]

    async def list_attempts(self, delivery_ids: Sequence[int]) -> list[Row]:
        rows = [dict(a) for a in self.attempts if a["delivery_id"] in delivery_ids]
        return sorted(rows, key=lambda a: (a["delivery_id"], a["attempt"]))

    async def prune(self, older_than: float, limit: int) -> int:
        cutoff = _now() - timedelta(seconds=older_than)
        ended = sorted(
            (d for d in self.deliveries.values()
             if d["status"] != "pending" and d["finished_at"] < cutoff),
            key=lambda d: d["finished_at"],
        )[:limit]  # fmt: skip
        for d in ended:
            del self.deliveries[d["id"]]
        gone = {d["id"] for d in ended}
        self.attempts = [a for a in self.attempts if a["delivery_id"] not in gone]
        return len(ended)
