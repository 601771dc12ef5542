"""Webhooks end to end: registered through the api handler, events published to the webhook
sink, delivered over real HTTP to a receiver on this machine, read back through the API;
the signature checked with the recipe docs/events.md shows."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from asyncz.jobs import NewJob
from asyncz.outbox.handler import build_sinks
from asyncz.outbox.pump import Pump
from asyncz.outbox.sink import Envelope
from asyncz.settings import Settings
from asyncz.store.postgres import PostgresStore
from asyncz.webhooks.cipher import LocalCipher
from asyncz.webhooks.sink import WebhookSink
from tests.support.api_lambda import handler_settings
from tests.support.settings import make_settings, open_service
from tests.support.webhook_receiver import Received, receiver

pytestmark = pytest.mark.integration

DOC = Path(__file__).parents[2] / "docs" / "events.md"
FAST = {
    "webhooks": True,
    "webhook_allow_http": True,
    "webhook_allow_networks": "127.0.0.0/8",
    "webhook_retry_base_seconds": 0.05,
    "webhook_retry_max_seconds": 0.2,
    "webhook_timeout_seconds": 2.0,
}


def doc_verify() -> Callable[..., bool]:
    """The verification recipe of docs/events.md, run as the page shows it."""
    [block] = [b for b in re.findall(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL)
               if "def verify_asyncz_signature" in b]  # fmt: skip
    scope: dict[str, Any] = {}
    exec(compile(block, str(DOC), "exec"), scope)
    verify: Callable[..., bool] = scope["verify_asyncz_signature"]
    return verify


@pytest.fixture(scope="module")
def api_settings(pg_url: str, redis_server_url: str) -> Iterator[Settings]:
    from asyncz.access import hash_api_key
    from tests.support.api_lambda import KEY

    settings = make_settings(pg_url, redis_server_url, api_key_hashes=hash_api_key(KEY), **FAST)
    with handler_settings(settings) as ready:
        yield ready


def envelope(kind: str = "asyncz.job.dead", queue: str = "default", task: str = "echo") -> Envelope:
    job_id = str(uuid.uuid4())
    return Envelope(
        id=str(uuid.uuid4()), type=kind, time="2026-12-06T14:00:00+00:00",
        data={"job_id": job_id, "task": task, "queue": queue, "status": kind.rsplit(".")[-1],
              "attempts": 1, "submitted_by": "ops"},
    )  # fmt: skip


def run_sink(
    settings: Settings, body: Callable[[WebhookSink], Awaitable[None]], **overrides: Any
) -> None:
    async def main() -> None:
        store = PostgresStore.create(settings.database_url or "")
        await store.open()
        sink = WebhookSink(
            store.webhooks, LocalCipher(store.webhooks.cipher_key),
            settings.model_copy(update=overrides),
        )  # fmt: skip
        try:
            await body(sink)
        finally:
            await sink.aclose()
            await store.close()

    asyncio.run(main())


async def tick_until(sink: WebhookSink, done: Callable[[], bool], bound: float = 30.0) -> None:
    """Tick the sink (as the pump does) until ``done``; the bound only ends a broken test."""
    give_up = time.monotonic() + bound
    while not done() and time.monotonic() < give_up:
        await sink.tick(time.monotonic() + 10)
        await asyncio.sleep(0.02)


def register(api: Any, url: str, **filters: Any) -> dict[str, Any]:
    reply = api("POST", "/webhooks", body={"url": url, **filters})
    assert reply.status == 201, reply.body
    created: dict[str, Any] = reply.json()
    assert created["secret"].startswith("whsec_")
    return created


def test_an_endpoint_that_fails_three_times_gets_the_event_signed_on_the_fourth_try(
    api: Any, api_settings: Settings
) -> None:
    verify = doc_verify()
    with receiver([500, 503, 500]) as hook:
        created = register(api, hook.url, types=["asyncz.job.dead"])
        event = envelope()

        async def body(sink: WebhookSink) -> None:
            await sink.publish([event, envelope("asyncz.job.completed")])  # not its type
            await tick_until(sink, lambda: len(hook.received) >= 4)

        run_sink(api_settings, body)
        got = hook.wait_for(4)
    assert len(got) == 4
    ids = {r.headers["AsyncZ-Event-Id"] for r in got}
    assert ids == {event.id}  # the same id on every try, and nothing of the other type
    last = got[-1]
    assert verify(last.headers["AsyncZ-Signature"], last.body, created["secret"])
    assert not verify(last.headers["AsyncZ-Signature"], last.body, "whsec_someone-else")
    assert not verify(last.headers["AsyncZ-Signature"], last.body + b" ", created["secret"])
    sent = json.loads(last.body)
    assert (sent["specversion"], sent["id"], sent["type"]) == ("1.0", event.id, event.type)
    assert sent["data"]["job_id"] == event.data["job_id"] and "time" in sent and sent["source"]

    page = api("GET", f"/webhooks/{created['id']}/deliveries").json()
    [delivery] = page["items"]
    assert (delivery["status"], delivery["attempts"], delivery["event_id"]) == (
        "delivered", 4, event.id)  # fmt: skip
    log = delivery["attempt_log"]
    assert [a["status_code"] for a in log] == [500, 503, 500, 200]
    assert [a["error"] for a in log] == ["HTTP 500", "HTTP 503", "HTTP 500", None]
    assert all(a["duration_ms"] >= 0 and a["at"] for a in log)


def test_a_redelivery_from_the_api_arrives_with_the_same_id(
    api: Any, api_settings: Settings
) -> None:
    with receiver() as hook:
        created = register(api, hook.url)
        event = envelope()

        async def first(sink: WebhookSink) -> None:
            await sink.publish([event])
            await sink.publish([event])  # the pump offering the page again adds nothing
            await tick_until(sink, lambda: len(hook.received) >= 1)

        run_sink(api_settings, first)
        [delivery] = api("GET", f"/webhooks/{created['id']}/deliveries").json()["items"]
        again = api("POST", f"/webhooks/{created['id']}/deliveries/{delivery['id']}/redeliver")
        assert again.status == 202 and again.json()["event_id"] == event.id
        missing = api("POST", f"/webhooks/{created['id']}/deliveries/999999/redeliver")
        assert missing.status == 404 and missing.json()["error"] == "webhook_delivery_not_found"

        async def second(sink: WebhookSink) -> None:
            await tick_until(sink, lambda: len(hook.received) >= 2)

        run_sink(api_settings, second)
        got = hook.wait_for(2)
    assert [r.headers["AsyncZ-Event-Id"] for r in got] == [event.id, event.id]
    items = api("GET", f"/webhooks/{created['id']}/deliveries").json()["items"]
    assert [(d["redelivery_of"], d["status"]) for d in items] == [
        (delivery["id"], "delivered"), (None, "delivered")]  # fmt: skip
    actions = [e["action"] for e in api("GET", "/audit").json()["items"]]
    assert actions[:2] == ["webhook.redeliver", "webhook.redeliver"]  # the refused one too
    assert "webhook.create" in actions


def test_a_test_event_and_a_delete_are_audited_and_a_deleted_webhook_gets_nothing(
    api: Any, api_settings: Settings
) -> None:
    with receiver() as hook:
        created = register(api, hook.url)
        queued = api("POST", f"/webhooks/{created['id']}/test")
        assert queued.status == 202

        async def body(sink: WebhookSink) -> None:
            await tick_until(sink, lambda: len(hook.received) >= 1)

        run_sink(api_settings, body)
        [test_event] = hook.wait_for(1)
        assert b'"type":"asyncz.webhook.test"' in test_event.body
        again = api("POST", f"/webhooks/{created['id']}/test")  # pending when deleted
        assert api("DELETE", f"/webhooks/{created['id']}").status == 204
        assert api("GET", f"/webhooks/{created['id']}").json()["error"] == "webhook_not_found"
        assert api("GET", "/webhooks").json()["items"] == []

        async def after(sink: WebhookSink) -> None:
            await sink.publish([envelope()])  # a deleted webhook matches nothing
            await tick_until(sink, lambda: False, bound=0.5)

        run_sink(api_settings, after)
        assert len(hook.received) == 1
    statuses = [
        (d["id"], d["status"], d["last_error"])
        for d in api("GET", f"/webhooks/{created['id']}/deliveries").json()["items"]
    ]
    assert statuses[0] == (again.json()["id"], "failed", "webhook deleted")
    actions = [e["action"] for e in api("GET", "/audit").json()["items"]]
    assert actions[:3] == ["webhook.delete", "webhook.test", "webhook.test"]


def test_a_url_that_resolves_to_a_private_address_is_refused_at_registration(api: Any) -> None:
    for url in ("https://10.1.2.3/hook", "https://169.254.169.254/latest/meta-data",
                "https://[::ffff:192.168.0.1]/hook", "https://[fe80::1]/hook",
                "https://100.64.0.1/hook", "https://224.0.0.1/hook", "ftp://example.com/x",
                "https://user:pw@example.com/x"):  # fmt: skip
        reply = api("POST", "/webhooks", body={"url": url})
        assert reply.status == 422, url
        assert reply.json()["error"] == "webhook_url_refused", url
    assert api("GET", "/webhooks").json()["items"] == []
    refused = [e for e in api("GET", "/audit").json()["items"] if e["action"] == "webhook.create"]
    assert {e["outcome"] for e in refused} == {"webhook_url_refused"}


def test_one_dead_endpoint_does_not_delay_another_s_deliveries(
    api: Any, api_settings: Settings
) -> None:
    release = threading.Event()
    healthy_done_first: list[bool] = []
    with receiver(hold=release, hold_seconds=20.0) as dead, receiver() as alive:
        register(api, dead.url)
        register(api, alive.url)
        events = [envelope() for _ in range(20)]

        async def body(sink: WebhookSink) -> None:
            await sink.publish(events)
            ticking = asyncio.create_task(sink.tick(time.monotonic() + 60))
            # every healthy delivery arrives while the dead endpoint still holds its requests
            arrived = await asyncio.to_thread(alive.wait_for, 20, 20.0)
            healthy_done_first.append(len(arrived) == 20 and not release.is_set())
            release.set()
            await ticking

        run_sink(api_settings, body, webhook_timeout_seconds=25.0)
    assert healthy_done_first == [True]
    assert {r.headers["AsyncZ-Event-Id"] for r in alive.received} == {e.id for e in events}


def test_during_a_rotation_both_secrets_verify_and_after_it_only_the_new_one(
    api: Any, api_settings: Settings
) -> None:
    verify = doc_verify()
    with receiver() as hook:
        created = register(api, hook.url)
        rotated = api("POST", f"/webhooks/{created['id']}/rotate", body={"overlap_seconds": 3600})
        assert rotated.status == 200 and rotated.json()["previous_secret_until"]
        new = rotated.json()["secret"]
        assert new != created["secret"]

        async def deliver(sink: WebhookSink, count: int) -> None:
            await sink.publish([envelope()])
            await tick_until(sink, lambda: len(hook.received) >= count)

        run_sink(api_settings, lambda s: deliver(s, 1))
        during = hook.wait_for(1)[0]
        assert during.headers["AsyncZ-Signature"].count("v1=") == 2
        for secret in (created["secret"], new):
            assert verify(during.headers["AsyncZ-Signature"], during.body, secret)

        newest = api("POST", f"/webhooks/{created['id']}/rotate", body={"overlap_seconds": 0})
        run_sink(api_settings, lambda s: deliver(s, 2))
        after: Received = hook.wait_for(2)[1]
    assert after.headers["AsyncZ-Signature"].count("v1=") == 1
    assert verify(after.headers["AsyncZ-Signature"], after.body, newest.json()["secret"])
    assert not verify(after.headers["AsyncZ-Signature"], after.body, new)
    assert [e["action"] for e in api("GET", "/audit").json()["items"]][:2] == [
        "webhook.rotate", "webhook.rotate"]  # fmt: skip


def test_a_job_that_ends_reaches_its_webhook_through_the_outbox_and_the_events_function(
    api: Any, api_settings: Settings
) -> None:
    verify = doc_verify()
    with receiver() as hook:
        created = register(api, hook.url, types=["asyncz.job.cancelled"], tasks=["echo"])

        async def end_a_job() -> str:
            async with open_service(api_settings) as svc:
                job_id = (await svc.submit(NewJob(task="echo", payload={}))).job_id
                await svc.cancel(job_id)  # its end's event is written with the change
                await svc.submit(NewJob(task="echo", payload={}))  # no end: no event
                pump = Pump(svc.store.outbox, svc.broker, build_sinks(api_settings, svc),
                            api_settings)  # fmt: skip
                while not hook.received:  # the publisher's runs, as its rule starts them
                    await pump.run(time.monotonic() + 3)
                return job_id

        job_id = asyncio.run(end_a_job())
        [got] = hook.wait_for(1)
    sent = json.loads(got.body)
    assert (sent["type"], sent["data"]["job_id"], sent["data"]["status"]) == (
        "asyncz.job.cancelled", job_id, "cancelled")  # fmt: skip
    assert verify(got.headers["AsyncZ-Signature"], got.body, created["secret"])


def test_a_redirect_is_not_followed_and_the_deliveries_page_like_other_listings(
    api: Any, api_settings: Settings
) -> None:
    with receiver([302], default=302) as hook:
        created = register(api, hook.url)
        for _ in range(3):
            assert api("POST", f"/webhooks/{created['id']}/test").status == 202

        async def body(sink: WebhookSink) -> None:
            # the jitter at its ceiling: each retry a whole minute away (a full jitter drawn
            # near 0 sent a delivery again within the tick, as it should)
            sink._rand = lambda: 1.0
            await tick_until(sink, lambda: len(hook.received) >= 3)

        # retries a minute away: each delivery's one attempt is what the listing shows
        run_sink(api_settings, body, webhook_retry_base_seconds=60.0)
        assert len(hook.received) == 3
    first = api("GET", f"/webhooks/{created['id']}/deliveries?limit=2").json()
    assert len(first["items"]) == 2 and first["next_cursor"]
    rest = api("GET", f"/webhooks/{created['id']}/deliveries?limit=2&cursor={first['next_cursor']}")
    [last] = rest.json()["items"]
    assert rest.json()["next_cursor"] is None
    ids = [d["id"] for d in first["items"]] + [last["id"]]
    assert ids == sorted(ids, reverse=True)  # newest first, none twice
    for delivery in [*first["items"], last]:
        [attempt] = delivery["attempt_log"]
        assert (attempt["status_code"], attempt["error"]) == (302, "redirect not followed")
        assert delivery["status"] == "pending"  # tried again later, never at the redirect
    bad = api("GET", f"/webhooks/{created['id']}/deliveries?cursor=not-a-cursor")
    assert bad.status == 422 and bad.json()["error"] == "invalid_cursor"
