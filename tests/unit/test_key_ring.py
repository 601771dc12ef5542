"""The api's keys in memory: reloaded within a bound, scopes per route, rates parsed."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from asyncz.access import (
    ALL_SCOPES,
    CONFIGURED_KEY_NAME,
    KEY_RELOAD_SECONDS,
    KeyRing,
    Scope,
    configured_key_id,
    format_rate,
    hash_api_key,
    parse_rate,
    parse_scopes,
    route_scope,
)

pytestmark = pytest.mark.unit


class Keys:
    """A store's live keys, a clock, and what was loaded and touched."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.rows: dict[str, dict[str, Any]] = {}
        self.loads = 0
        self.touched: list[list[str]] = []
        self.down = False

    def add(self, key: str, name: str, scopes: list[str], **kw: Any) -> None:
        self.rows[key] = {"key_id": f"key-{len(self.rows) + 1}", "name": name,
                          "key_hash": hash_api_key(key), "scopes": scopes,
                          "rate_limit": None, "rate_period_seconds": None, "expires_at": None,
                          **kw}  # fmt: skip

    async def load(self) -> list[dict[str, Any]]:
        self.loads += 1
        if self.down:
            raise ConnectionError("database down")
        return list(self.rows.values())

    async def touch(self, hashes: list[str]) -> None:
        self.touched.append(hashes)

    def ring(self, configured: frozenset[str] = frozenset()) -> KeyRing:
        return KeyRing(self.load, lambda: configured, touch=self.touch, clock=lambda: self.now)


def test_a_revoked_key_stops_working_within_the_reload_bound() -> None:
    keys = Keys()
    keys.add("k-billing", "billing-svc", ["submit"])
    ring = keys.ring()

    async def go() -> None:
        await ring.refresh()
        assert ring.lookup("k-billing").name == "billing-svc"
        del keys.rows["k-billing"]  # revoked
        keys.now += KEY_RELOAD_SECONDS - 0.5
        await ring.refresh()
        assert ring.lookup("k-billing") is not None, "within the bound the sandbox may trust it"
        keys.now += 0.5
        await ring.refresh()
        assert ring.lookup("k-billing") is None
        assert keys.loads == 2  # one load per bound, not per request

    asyncio.run(go())
    assert KEY_RELOAD_SECONDS <= 10


def test_configured_keys_have_every_scope_and_survive_a_failed_reload() -> None:
    keys = Keys()
    keys.add("k-read", "dash", ["read"])
    ring = keys.ring(frozenset({hash_api_key("from-secret"), hash_api_key("second")}))

    async def go() -> None:
        await ring.refresh()
        configured = ring.lookup("from-secret")
        assert (configured.name, configured.scopes) == (CONFIGURED_KEY_NAME, ALL_SCOPES)
        # each configured key has an id of its own, the same in every sandbox
        assert configured.key_id == configured_key_id(hash_api_key("from-secret"))
        assert configured.key_id != ring.lookup("second").key_id
        assert configured.key_id.startswith("configured-")
        keys.down = True
        keys.now += KEY_RELOAD_SECONDS
        await ring.refresh()  # logged, not raised: the loaded keys stay
        assert ring.lookup("k-read").scopes == {Scope.READ} and ring.loaded

    asyncio.run(go())


def test_a_ring_that_never_loaded_knows_only_the_configured_keys() -> None:
    keys = Keys()
    keys.down = True
    keys.add("k-read", "dash", ["read"])
    ring = keys.ring(frozenset({hash_api_key("from-secret")}))
    asyncio.run(ring.refresh())
    assert not ring.loaded  # the gate answers 503, not 401, for an unknown key then
    assert ring.lookup("k-read") is None and ring.lookup("from-secret") is not None


def test_an_expired_key_is_refused_and_last_use_is_written_per_reload() -> None:
    keys = Keys()
    keys.add("k-old", "old", ["read"], expires_at=datetime.now(UTC) - timedelta(seconds=1))
    keys.add("k-new", "new", ["read"], rate_limit=5, rate_period_seconds=1)
    ring = keys.ring()

    async def go() -> None:
        await ring.refresh()
        assert ring.lookup("k-old") is None
        assert ring.lookup("k-new").rate == (5, 1)
        ring.lookup("k-new")
        assert keys.touched == []  # not per request
        keys.now += KEY_RELOAD_SECONDS
        await ring.refresh()
        assert keys.touched == [[hash_api_key("k-new")]]

    asyncio.run(go())


def test_a_new_key_is_picked_up_by_an_early_reload() -> None:
    keys = Keys()
    ring = keys.ring()

    async def go() -> None:
        await ring.refresh()
        keys.add("k-fresh", "fresh", ["submit"])
        await ring.refresh(max_age=1.0)
        assert ring.lookup("k-fresh") is None  # loaded just now: no reload yet
        keys.now += 1.0
        await ring.refresh(max_age=1.0)
        assert ring.lookup("k-fresh") is not None

    asyncio.run(go())


@pytest.mark.parametrize(
    ("method", "path", "scope"),
    [
        ("POST", "/jobs", Scope.SUBMIT),
        ("POST", "/jobs/batch", Scope.SUBMIT),
        ("POST", "/events", Scope.EVENTS),
        ("GET", "/jobs", Scope.READ),
        ("GET", "/dlq", Scope.READ),
        ("GET", "/audit", Scope.READ),
        ("POST", "/jobs/1/cancel", Scope.OPERATE),
        ("POST", "/dlq/replay", Scope.OPERATE),
        ("DELETE", "/dlq/1", Scope.OPERATE),
        ("POST", "/queues/default/pause", Scope.OPERATE),
        ("GET", "/keys", Scope.ADMIN),
        ("POST", "/keys", Scope.ADMIN),
        ("GET", "/whoami", None),
    ],
)
def test_each_route_needs_one_scope(method: str, path: str, scope: Scope | None) -> None:
    assert route_scope(method, path) == scope


def test_rates_and_scopes_parse_or_say_why_not() -> None:
    assert parse_rate("5/s") == (5, 1)
    assert parse_rate("600/m") == (600, 60)
    assert parse_rate("1000/10m") == (1000, 600)
    assert format_rate((5, 1)) == "5/s" and format_rate((1000, 600)) == "1000/10m"
    for bad in ("5", "0/s", "x/s", "5/y", "5/0s"):
        with pytest.raises(ValueError, match=r"rate|period"):
            parse_rate(bad)
    assert parse_scopes(["submit,read"]) == {Scope.SUBMIT, Scope.READ}
    with pytest.raises(ValueError, match="'write' is not a scope"):
        parse_scopes(["write"])
    with pytest.raises(ValueError, match="at least one"):
        parse_scopes([])


def test_a_key_not_loaded_yet_is_looked_up_alone_and_a_wrong_one_once() -> None:
    keys = Keys()
    asked: list[str] = []

    async def find_one(digest: str) -> dict[str, Any] | None:
        asked.append(digest)
        return next((r for r in keys.rows.values() if r["key_hash"] == digest), None)

    ring = KeyRing(
        keys.load, frozenset, touch=keys.touch, find_one=find_one, clock=lambda: keys.now
    )

    async def go() -> None:
        await ring.refresh()
        keys.add("k-new", "new", ["read"])  # created on another sandbox just now
        assert (await ring.find("k-new")).name == "new"
        assert (await ring.find("wrong")) is None and (await ring.find("wrong")) is None
        assert asked == [hash_api_key("k-new"), hash_api_key("wrong")]  # the wrong key once
        assert await ring.find("k-new") is not None and len(asked) == 2  # now loaded
        keys.now += KEY_RELOAD_SECONDS
        await ring.refresh()  # a reload forgets the misses
        assert await ring.find("wrong") is None and len(asked) == 3

    asyncio.run(go())
