"""A sender that dies between a webhook's answer and recording it (``ASYNCZ_CRASH_AT=
webhook.after_send``: the process exits at once, as a Lambda sandbox does): the delivery
stays claimed until its claim lapses, then the next sender sends it again with the same
event id and records it delivered. At least once, never lost."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid

import psycopg
import pytest

from tests.support.webhook_receiver import receiver

pytestmark = pytest.mark.chaos

SENDER = textwrap.dedent("""
    import asyncio, sys, time
    from asyncz.outbox.sink import Envelope
    from asyncz.settings import Settings
    from asyncz.store.postgres import PostgresStore
    from asyncz.webhooks.cipher import LocalCipher
    from asyncz.webhooks.sink import WebhookSink

    async def main(url, event_id, hook_url):
        store = PostgresStore.create(url)
        await store.open()
        cipher = LocalCipher(store.webhooks.cipher_key)
        if hook_url:  # register it as the api does: the secret encrypted
            await store.webhooks.insert(url=hook_url, types=[], queues=[], tasks=[],
                                        secret=await cipher.encrypt(b"whsec_chaos"),
                                        created_by="ops", created_by_key_id="key-1")
        settings = Settings(database_url=url, redis_url="redis://unused",
                            webhook_allow_http=True, webhook_allow_networks="127.0.0.0/8",
                            webhook_timeout_seconds=1.0)
        sink = WebhookSink(store.webhooks, cipher, settings)
        if event_id:
            await sink.publish([Envelope(id=event_id, type="asyncz.job.dead",
                                         time="2026-12-06T14:00:00+00:00",
                                         data={"queue": "default", "task": "echo"})])
        give_up = time.monotonic() + 20
        while time.monotonic() < give_up:  # as the pump does: tick until the work is done
            await sink.tick(time.monotonic() + 5)
            done = await store.webhooks.list_deliveries(1, limit=1, before=None)
            if done and done[0]["status"] == "delivered":
                break
            await asyncio.sleep(0.1)
        await sink.aclose()
        await store.close()

    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
""")


def run_sender(url: str, *args: str, crash: bool) -> int:
    env = dict(os.environ)
    env.pop("ASYNCZ_CRASH_AT", None)
    if crash:
        env["ASYNCZ_CRASH_AT"] = "webhook.after_send"
    return subprocess.run([sys.executable, "-c", SENDER, url, *args], env=env,
                          timeout=60, check=False).returncode  # fmt: skip


def test_a_sender_killed_after_sending_leaves_the_delivery_to_be_sent_again(
    chaos_db: str,
) -> None:
    event_id = str(uuid.uuid4())
    with receiver() as hook:
        assert run_sender(chaos_db, event_id, hook.url, crash=True) == 137  # died after the answer
        assert [r.headers["AsyncZ-Event-Id"] for r in hook.wait_for(1)] == [event_id]
        with psycopg.connect(chaos_db, autocommit=True) as conn:
            row = conn.execute("SELECT status, attempts FROM webhook_deliveries").fetchone()
        assert row == ("pending", 0)  # its outcome never recorded
        assert run_sender(chaos_db, "", "", crash=False) == 0  # once the claim (2 s) lapses
        got = hook.wait_for(2)
    assert [r.headers["AsyncZ-Event-Id"] for r in got] == [event_id, event_id]
    with psycopg.connect(chaos_db, autocommit=True) as conn:
        row = conn.execute("SELECT status, attempts FROM webhook_deliveries").fetchone()
    assert row == ("delivered", 1)
