"""The api's key check reloads the accepted keys after a short TTL."""

from __future__ import annotations

import pytest

from asyncz.api.guards import KEY_CACHE_SECONDS, KeyCheck
from asyncz.connections import hash_api_key

pytestmark = pytest.mark.unit


def test_a_revoked_key_stops_working_within_the_ttl() -> None:
    now = [1000.0]
    keys = {"old-key"}
    loads = []

    def load() -> frozenset[str]:
        loads.append(now[0])
        return frozenset(hash_api_key(k) for k in keys)

    check = KeyCheck(load, clock=lambda: now[0])
    assert check("old-key") and not check("new-key")
    keys.clear()
    keys.add("new-key")  # rotation: the old key is revoked
    now[0] += KEY_CACHE_SECONDS - 1
    assert check("old-key"), "within the TTL the sandbox may still trust what it loaded"
    now[0] += 1
    assert not check("old-key") and check("new-key")
    assert len(loads) == 2  # one load per TTL, not per request


def test_the_ttl_bound_is_one_minute() -> None:
    assert KEY_CACHE_SECONDS <= 60
