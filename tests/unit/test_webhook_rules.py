"""Webhooks' pure rules: the signature (and the receiver's check of it), and where a webhook
may send (SSRF): schemes, every resolved address, allowed networks, the pinned target."""

from __future__ import annotations

import asyncio
import ipaddress

import pytest

from asyncz.access import Scope, route_scope
from asyncz.errors import WebhookUrlRefusedError
from asyncz.webhooks.addresses import parse_networks, refused, resolve_target
from asyncz.webhooks.signing import new_secret, sign, signature_header, verify

pytestmark = pytest.mark.unit

BODY = b'{"id":"e1"}'


def test_a_signature_verifies_under_each_live_secret_and_nothing_else() -> None:
    old, new = new_secret(), new_secret()
    assert old.startswith("whsec_") and old != new
    header = signature_header([new, old], 1_800_000_000, BODY)
    assert (
        header
        == f"t=1800000000,v1={sign(new, 1_800_000_000, BODY)},v1={sign(old, 1_800_000_000, BODY)}"
    )
    now = 1_800_000_010.0
    assert verify(header, BODY, new, now=now) and verify(header, BODY, old, now=now)
    assert not verify(header, BODY, new_secret(), now=now)
    assert not verify(header, BODY + b" ", new, now=now)  # the body is what is signed
    assert not verify(header, BODY, new, now=now + 600)  # too old: a replay
    assert not verify(header.replace("t=1800000000", "t=1800000001"), BODY, new, now=now)
    assert not verify("v1=abc", BODY, new, now=now) and not verify("t=x,v1=1", BODY, new)


@pytest.mark.parametrize(
    "address",
    ["10.0.0.1", "172.16.5.4", "192.168.1.1", "127.0.0.1", "169.254.169.254", "100.64.0.1",
     "0.0.0.0", "224.0.0.251", "240.0.0.1", "::1", "fe80::1", "fc00::1", "::ffff:10.0.0.1",
     "ff02::1", "::"],
)  # fmt: skip
def test_a_webhook_may_not_reach_a_private_or_special_address(address: str) -> None:
    assert refused(ipaddress.ip_address(address), ())


def test_a_public_address_and_an_allowed_network_are_reachable() -> None:
    assert not refused(ipaddress.ip_address("93.184.216.34"), ())
    assert not refused(ipaddress.ip_address("2606:4700::1111"), ())
    loopback = parse_networks("127.0.0.0/8, ::1/128")
    assert not refused(ipaddress.ip_address("127.0.0.1"), loopback)
    assert not refused(ipaddress.ip_address("::1"), loopback)
    assert refused(ipaddress.ip_address("10.0.0.1"), loopback)


def resolving(*answers: list[str]):  # type: ignore[no-untyped-def]
    """A resolver that gives each call the next answer (a DNS that changes its mind)."""
    queue = list(answers)

    async def resolve(host: str, port: int) -> list[str]:
        return queue.pop(0)

    return resolve


def target(url: str, resolve=None, **kw):  # type: ignore[no-untyped-def]
    options = {"allow_http": False, "allowed": ()} | kw
    if resolve is not None:
        options["resolve"] = resolve
    return asyncio.run(resolve_target(url, **options))


def test_every_resolved_address_is_checked_and_the_checked_one_is_the_target() -> None:
    pinned = target("https://hooks.example.com:8443/in?x=1", resolving(["93.184.216.34"]))
    assert (pinned.host, pinned.address) == ("hooks.example.com", "93.184.216.34")
    assert pinned.pinned_url == "https://93.184.216.34:8443/in?x=1"
    six = target("https://hooks.example.com/in", resolving(["2606:4700::1111"]))
    assert six.pinned_url == "https://[2606:4700::1111]/in"
    with pytest.raises(WebhookUrlRefusedError, match=r"resolves to 10\.0\.0\.9"):
        target("https://hooks.example.com/", resolving(["93.184.216.34", "10.0.0.9"]))


@pytest.mark.parametrize(
    ("url", "why"),
    [("http://hooks.example.com/", "must use https"), ("ftp://hooks.example.com/", "https"),
     ("https://u:p@hooks.example.com/", "credentials"), ("https:///path", "no host"),
     ("https://hooks.example.com:99999/", "cannot be parsed"), ("https://[::1]/", "::1"),
     ("https://localhost./", "resolves to")],
)  # fmt: skip
def test_a_url_is_refused_with_a_reason(url: str, why: str) -> None:
    with pytest.raises(WebhookUrlRefusedError, match=why):
        target(url, resolving(["127.0.0.1"]))


def test_http_is_refused_unless_the_deployment_allows_it() -> None:
    loopback = parse_networks("127.0.0.0/8")
    pinned = target("http://127.0.0.1:9/x", allow_http=True, allowed=loopback)
    assert pinned.pinned_url == "http://127.0.0.1:9/x"


def test_a_name_that_does_not_resolve_is_refused() -> None:
    async def nowhere(host: str, port: int) -> list[str]:
        raise OSError("no such name")

    with pytest.raises(WebhookUrlRefusedError, match="does not resolve"):
        target("https://nowhere.invalid/", nowhere)


def test_webhooks_need_the_admin_scope() -> None:
    for method in ("GET", "POST", "DELETE"):
        assert route_scope(method, "/webhooks") is Scope.ADMIN
        assert route_scope(method, "/webhooks/3/deliveries") is Scope.ADMIN


def test_a_bad_allowed_network_fails_at_cold_start() -> None:
    from pydantic import ValidationError

    from tests.support.memory import settings

    with pytest.raises(ValidationError, match=r"10\.0\.0\.0/33"):
        settings(webhook_allow_networks="127.0.0.0/8, 10.0.0.0/33")
