"""Webhooks, the operator's side: register (a URL, a filter, a secret shown once), list,
delete, rotate the secret, read the deliveries, redeliver one, send a test event. A part of
:class:`asyncz.service.JobService`; every action is in the audit trail
(:meth:`asyncz.service.access.Access.audited`). The sending is the sink's
(:mod:`asyncz.webhooks.sink`)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from asyncz.access import Principal
from asyncz.errors import (
    WebhookDeliveryNotFoundError,
    WebhookLimitError,
    WebhookNotFoundError,
    WebhookUrlRefusedError,
)
from asyncz.outbox.sink import DEFAULT_SOURCE, SPEC_VERSION
from asyncz.pagination import decode_cursor, encode_cursor
from asyncz.port_types import Page, Row
from asyncz.ports import JobStore
from asyncz.service.access import Access
from asyncz.settings import Settings
from asyncz.webhooks.addresses import Resolver, parse_networks, resolve_target, system_resolver
from asyncz.webhooks.cipher import LocalCipher, SecretCipher
from asyncz.webhooks.signing import new_secret

TEST_EVENT_TYPE = "asyncz.webhook.test"


def _not_found(webhook_id: int) -> WebhookNotFoundError:
    return WebhookNotFoundError(f"no live webhook has the id {webhook_id}")


class Webhooks:
    def __init__(
        self, store: JobStore, access: Access, settings: Settings,
        cipher: SecretCipher | None = None, *, resolve: Resolver = system_resolver,
        wake: Callable[[], None] = lambda: None,
    ) -> None:  # fmt: skip
        self.store = store
        self.access = access
        self.settings = settings
        # KMS where the composition root configured it, else the deployment's own key
        self.cipher = cipher or LocalCipher(store.webhooks.cipher_key)
        self.resolve = resolve
        self.wake = wake  # the events function, which sends what is due (asyncz.outbox.wake)

    async def check_url(self, url: str) -> None:
        """Refuse a URL the deployment would not call (WebhookUrlRefusedError)."""
        bound = self.settings.webhook_timeout_seconds
        try:
            async with asyncio.timeout(bound):  # a slow DNS must not hold the request
                await resolve_target(
                    url, allow_http=self.settings.webhook_allow_http,
                    allowed=parse_networks(self.settings.webhook_allow_networks),
                    resolve=self.resolve,
                )  # fmt: skip
        except TimeoutError:
            raise WebhookUrlRefusedError(
                f"the webhook's host did not resolve within {bound:g} s"
            ) from None

    async def register(
        self, actor: Principal, *, url: str, types: Sequence[str] = (),
        queues: Sequence[str] = (), tasks: Sequence[str] = (),
    ) -> tuple[str, Row]:  # fmt: skip
        """A new webhook and its signing secret (returned this once, stored encrypted)."""
        detail = {"types": list(types), "queues": list(queues), "tasks": list(tasks)}
        async with self.access.audited(actor, "webhook.create", url, detail) as done:
            await self.check_url(url)
            if await self.store.webhooks.count() >= self.settings.webhook_max_count:
                raise WebhookLimitError(
                    f"this deployment has {self.settings.webhook_max_count} webhooks, its "
                    "most (ASYNCZ_WEBHOOK_MAX_COUNT): delete one first"
                )
            secret = new_secret()
            row = await self.store.webhooks.insert(
                url=url, types=types, queues=queues, tasks=tasks,
                secret=await self.cipher.encrypt(secret.encode()), created_by=actor.name,
                created_by_key_id=actor.key_id,
            )  # fmt: skip
            done["webhook_id"] = row["id"]
        return secret, row

    async def live(self) -> list[Row]:
        return await self.store.webhooks.live()

    async def get(self, webhook_id: int) -> Row:
        row = await self.store.webhooks.get(webhook_id)
        if row is None:
            raise _not_found(webhook_id)
        return row

    async def delete(self, actor: Principal, webhook_id: int) -> None:
        async with self.access.audited(actor, "webhook.delete", str(webhook_id), {}):
            if not await self.store.webhooks.delete(webhook_id):
                raise _not_found(webhook_id)

    async def rotate(
        self, actor: Principal, webhook_id: int, overlap_seconds: float | None = None
    ) -> tuple[str, Row]:
        """A new secret that signs from now on; the old one signs beside it for the overlap."""
        overlap = self.settings.webhook_secret_overlap_seconds
        overlap = overlap if overlap_seconds is None else overlap_seconds
        detail = {"overlap_seconds": overlap}
        async with self.access.audited(actor, "webhook.rotate", str(webhook_id), detail):
            secret = new_secret()
            row = await self.store.webhooks.rotate(
                webhook_id, await self.cipher.encrypt(secret.encode()), overlap
            )
            if row is None:
                raise _not_found(webhook_id)
        return secret, row

    async def deliveries(
        self, webhook_id: int, *, limit: int = 50, cursor: str | None = None
    ) -> Page:
        """Newest first, each with its attempts (status code or error, time, duration); a
        deleted webhook's too."""
        after = decode_cursor(cursor, ident=lambda i: str(int(i)))
        rows = await self.store.webhooks.list_deliveries(
            webhook_id, limit=limit, before=int(after[1]) if after else None
        )
        if not rows and after is None:
            await self.get(webhook_id)  # none at all: is there such a webhook?
        attempts: dict[int, list[Row]] = {r["id"]: [] for r in rows}
        for attempt in await self.store.webhooks.list_attempts(list(attempts)):
            attempts[attempt["delivery_id"]].append(attempt)
        items = [{**r, "attempt_log": attempts[r["id"]]} for r in rows]
        last = rows[-1] if len(rows) == limit else None
        return Page(items, encode_cursor(last["created_at"], str(last["id"])) if last else None)

    async def redeliver(self, actor: Principal, webhook_id: int, delivery_id: int) -> Row:
        """The delivery's event again (the same ``id``), as a new delivery with its retries."""
        target = f"{webhook_id}/{delivery_id}"
        async with self.access.audited(actor, "webhook.redeliver", target, {}) as done:
            old = await self.store.webhooks.get_delivery(webhook_id, delivery_id)
            if old is None:
                raise WebhookDeliveryNotFoundError(
                    f"webhook {webhook_id} has no delivery {delivery_id}"
                )
            row = await self._add(webhook_id, _event_of(old), redelivery_of=delivery_id)
            done["delivery_id"] = row["id"]
        return row

    async def test(self, actor: Principal, webhook_id: int) -> Row:
        """A test event (``asyncz.webhook.test``) delivered like any other."""
        async with self.access.audited(actor, "webhook.test", str(webhook_id), {}) as done:
            event = {
                "specversion": SPEC_VERSION, "id": str(uuid.uuid4()), "type": TEST_EVENT_TYPE,
                "source": DEFAULT_SOURCE, "subject": f"webhook/{webhook_id}",
                "time": datetime.now(UTC).isoformat(),
                "data": {"webhook_id": webhook_id, "sent_by": actor.name},
            }  # fmt: skip
            row = await self._add(webhook_id, event)
            done["delivery_id"] = row["id"]
        return row

    async def _add(self, webhook_id: int, event: Row, redelivery_of: int | None = None) -> Row:
        row = await self.store.webhooks.add_delivery(
            webhook_id, event, self.settings.webhook_retry_for_seconds,
            redelivery_of=redelivery_of,
        )  # fmt: skip
        if row is None:
            raise _not_found(webhook_id)
        self.wake()  # sent within a second, not at the next minute's sweep
        return row


def _event_of(delivery: Row) -> dict[str, Any]:
    return dict(delivery["event"])
