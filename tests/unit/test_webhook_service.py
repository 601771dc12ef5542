"""Webhooks on the in-memory store: a name that resolves to a private address is refused at
registration and again at delivery (a DNS rebind after registration), every action is
audited, the secret is never stored in the clear, and KMS encrypts it in AWS (moto)."""

from __future__ import annotations

import asyncio
import time

import boto3
import pytest
from cryptography.exceptions import InvalidTag
from moto import mock_aws

from asyncz.access import Principal, Scope
from asyncz.errors import WebhookLimitError, WebhookNotFoundError, WebhookUrlRefusedError
from asyncz.outbox.sink import Envelope
from asyncz.service.webhooks import Webhooks
from asyncz.webhooks.cipher import KmsCipher, LocalCipher
from asyncz.webhooks.sink import WebhookSink
from tests.support.memory import service

pytestmark = pytest.mark.unit

OPS = Principal("ops", frozenset(Scope), key_id="key-7")


def dns(answers: dict[str, str]):  # type: ignore[no-untyped-def]
    """A resolver reading ``answers`` at each call (a test changes them: a DNS rebind)."""

    async def resolve(host: str, port: int) -> list[str]:
        return [answers[host]]

    return resolve


def test_a_name_resolving_to_a_private_address_is_refused_at_registration_and_audited() -> None:
    svc = service()
    hooks = Webhooks(
        svc.store, svc.access, svc.settings, resolve=dns({"in.example.com": "10.0.0.7"})
    )
    with pytest.raises(WebhookUrlRefusedError, match=r"resolves to 10\.0\.0\.7"):
        asyncio.run(hooks.register(OPS, url="https://in.example.com/hook"))
    [entry] = svc.store.access.audit  # type: ignore[attr-defined]
    assert (entry["action"], entry["key_name"], entry["outcome"]) == (
        "webhook.create", "ops", "webhook_url_refused")  # fmt: skip
    assert asyncio.run(svc.store.webhooks.live()) == []


def test_a_webhook_whose_name_later_resolves_to_a_private_address_is_not_called() -> None:
    svc = service()
    answers = {"in.example.com": "93.184.216.34"}
    hooks = Webhooks(svc.store, svc.access, svc.settings, resolve=dns(answers))
    secret, row = asyncio.run(hooks.register(OPS, url="https://in.example.com/hook"))
    stored = svc.store.webhooks.hooks[row["id"]]["secret"]  # type: ignore[attr-defined]
    assert secret.encode() not in stored  # encrypted at rest
    answers["in.example.com"] = "169.254.169.254"  # the rebind
    sink = WebhookSink(svc.store.webhooks, hooks.cipher, svc.settings, resolve=dns(answers))
    event = Envelope(id="e-1", type="asyncz.job.dead", time="2026-12-06T14:00:00+00:00",
                     data={"queue": "default", "task": "echo"})  # fmt: skip

    async def deliver() -> None:
        await sink.publish([event])
        await sink.tick(time.monotonic() + 30)
        await sink.aclose()

    asyncio.run(deliver())
    page = asyncio.run(hooks.deliveries(row["id"]))
    [delivery] = page.items
    assert delivery["status"] == "pending" and delivery["last_status_code"] is None
    assert delivery["last_error"].startswith("address refused")
    assert "169.254.169.254" in delivery["last_error"]


def test_pages_published_before_any_webhook_exists_are_counted_not_written() -> None:
    svc = service()
    hooks = Webhooks(
        svc.store, svc.access, svc.settings, resolve=dns({"a.example.com": "93.184.216.34"})
    )
    sink = WebhookSink(svc.store.webhooks, hooks.cipher, svc.settings)
    written: list[int] = []
    add = svc.store.webhooks.add_deliveries

    async def spy(events, retry_for_seconds):  # type: ignore[no-untyped-def]
        written.append(len(events))
        return await add(events, retry_for_seconds)

    svc.store.webhooks.add_deliveries = spy  # type: ignore[method-assign]

    def event(n: int) -> Envelope:
        return Envelope(id=f"e-{n}", type="asyncz.job.completed", time="2026-12-07T12:00:00Z",
                        data={"queue": "default", "task": "echo"})  # fmt: skip

    asyncio.run(sink.publish([event(1), event(2)]))
    assert written == []  # no webhook: the page was not even encoded
    _, row = asyncio.run(hooks.register(OPS, url="https://a.example.com/hook"))
    asyncio.run(sink.publish([event(3)]))
    asyncio.run(hooks.delete(OPS, row["id"]))
    asyncio.run(sink.publish([event(4)]))  # seen once: written (and matched by none) since
    assert written == [1, 1]
    page = asyncio.run(hooks.deliveries(row["id"]))
    assert [d["event_id"] for d in page.items] == ["e-3"]


def test_the_deployment_caps_its_webhooks_and_an_unknown_one_is_not_found() -> None:
    svc = service(webhook_max_count=1)
    hooks = Webhooks(
        svc.store, svc.access, svc.settings, resolve=dns({"a.example": "93.184.216.34"})
    )
    asyncio.run(hooks.register(OPS, url="https://a.example/x"))
    with pytest.raises(WebhookLimitError):
        asyncio.run(hooks.register(OPS, url="https://a.example/y"))
    for action in (hooks.get(9), hooks.delete(OPS, 9), hooks.rotate(OPS, 9), hooks.test(OPS, 9),
                   hooks.deliveries(9)):  # fmt: skip
        with pytest.raises(WebhookNotFoundError):
            asyncio.run(action)


def test_kms_encrypts_a_secret_bound_to_its_purpose() -> None:
    with mock_aws():
        client = boto3.client("kms", region_name="us-east-1")
        key_id = client.create_key(Description="asyncz webhooks")["KeyMetadata"]["KeyId"]
        cipher = KmsCipher(client, key_id)
        sealed = asyncio.run(cipher.encrypt(b"whsec_abc"))
        assert b"whsec_abc" not in sealed
        assert asyncio.run(cipher.decrypt(sealed)) == b"whsec_abc"


def test_the_local_cipher_refuses_a_ciphertext_that_was_tampered_with() -> None:
    async def key() -> bytes:
        return b"k" * 32

    cipher = LocalCipher(key)
    sealed = asyncio.run(cipher.encrypt(b"whsec_abc"))
    assert asyncio.run(cipher.decrypt(sealed)) == b"whsec_abc"
    with pytest.raises(InvalidTag):
        asyncio.run(cipher.decrypt(sealed[:-1] + bytes([sealed[-1] ^ 1])))
