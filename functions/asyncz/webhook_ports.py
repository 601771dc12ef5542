"""The protocol of the store's ``webhooks`` part (see :mod:`asyncz.store.webhooks`), beside
:mod:`asyncz.store_ports`. Protocols only."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from asyncz.port_types import Row


class WebhookStore(Protocol):
    """Webhooks (a URL, a filter, an encrypted secret), one delivery per event and matching
    webhook, one attempt row per request. Webhook rows carry ``id, url, types, queues,
    tasks, created_by, created_at, rotated_at, previous_until`` (never a secret)."""

    async def cipher_key(self) -> bytes:
        """The deployment's local key for signing secrets where there is no KMS."""
        ...

    async def insert(
        self, *, url: str, types: Sequence[str], queues: Sequence[str], tasks: Sequence[str],
        secret: bytes, created_by: str, created_by_key_id: str,
    ) -> Row: ...  # fmt: skip
    async def count(self) -> int:
        """The live webhooks."""
        ...

    async def live(self) -> list[Row]: ...
    async def get(self, webhook_id: int) -> Row | None: ...
    async def delete(self, webhook_id: int) -> bool:
        """False when no live webhook has the id."""
        ...

    async def rotate(self, webhook_id: int, secret: bytes, overlap_seconds: float) -> Row | None:
        """The new (encrypted) secret signs; the old one signs beside it for the overlap."""
        ...

    async def add_deliveries(self, events: Sequence[Row], retry_for_seconds: float) -> int:
        """One statement: a pending delivery for each event (``id, type, queue, task,
        body``) and each live webhook whose filter matches it, none twice; how many."""
        ...

    async def add_delivery(
        self, webhook_id: int, event: Row, retry_for_seconds: float, *,
        redelivery_of: int | None = None,
    ) -> Row | None:  # fmt: skip
        """One delivery of ``event`` (the body) to a live webhook; None if it is not."""
        ...

    async def get_delivery(self, webhook_id: int, delivery_id: int) -> Row | None: ...
    async def claim_due(
        self, *, limit: int, per_endpoint: int, busy: Sequence[int], hold_seconds: float,
        retry_for_seconds: float,
    ) -> list[Row]:  # fmt: skip
        """Claim due pending deliveries, at most ``per_endpoint`` of each webhook (live, or
        deleted within ``retry_for_seconds``), none of ``busy`` webhooks: ``id, webhook_id,
        event, attempts, claim_token, url, secret, previous_secret`` (only while it still
        signs) and ``deleted``."""
        ...

    async def finish_attempt(
        self, delivery_id: int, claim_token: Any, *, ok: bool, final: bool, delay_seconds: float,
        status_code: int | None, error: str | None, duration_ms: int,
    ) -> Row | None:  # fmt: skip
        """Record an attempt under the claim: delivered (ok), failed (final, or past its
        bound after ``delay_seconds``) or pending again; None if the claim was lost."""
        ...

    async def list_deliveries(
        self, webhook_id: int, *, limit: int, before: int | None
    ) -> list[Row]:
        """Newest first, ids below ``before``."""
        ...

    async def list_attempts(self, delivery_ids: Sequence[int]) -> list[Row]: ...

    async def prune(self, older_than: float, limit: int) -> int:
        """Delete up to ``limit`` deliveries (and their attempts) that ended more than
        ``older_than`` seconds ago; how many."""
        ...
