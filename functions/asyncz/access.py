"""Who may do what: named API keys, their scopes, and the route each scope opens.

A key is a random secret shown once; only its SHA-256 is stored. Every api sandbox holds the
live keys in memory (:class:`KeyRing`) and reloads them every ``KEY_RELOAD_SECONDS``, so a
request's key check costs no database round trip and a revoked key stops working within
that bound. The keys the deployment was configured with (``ASYNCZ_API_KEYS``, the keys
secret) are named keys too, with every scope, until the operator rotates them.

Pure domain: no driver, no FastAPI.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

log = logging.getLogger("asyncz.access")

# How long a sandbox trusts the keys it loaded: the bound on how long a revoked key works.
KEY_RELOAD_SECONDS = 5.0
# The configured keys (a secret read costs money per call) are read again after this long.
CONFIGURED_RELOAD_SECONDS = 60.0
# A key the sandbox has not loaded is looked up alone (one indexed query), so a key just
# created works at once on every sandbox; the answer "no such key" is kept until the next
# reload (at most this many), so a repeated wrong key costs no query.
MAX_MISSED_KEYS = 10_000
# A reload waits at most this long (a frozen database must not hold every request): past it
# the sandbox keeps the keys it has and tries again after KEY_RELOAD_SECONDS.
KEY_LOAD_TIMEOUT_SECONDS = 1.0
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_RATE = re.compile(r"^\s*(\d{1,7})\s*/\s*(\d{0,5})\s*(s|sec|second|m|min|minute|h|hour)\s*$")
_PERIOD = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600, "hour": 3600}
CONFIGURED_KEY_NAME = "configured"  # the keys of ASYNCZ_API_KEYS and the keys secret
# A configured key's id: this prefix and the start of its digest (stable across reloads and
# sandboxes, and apart from every stored key's "key-<row id>").
CONFIGURED_KEY_ID_PREFIX = "configured-"


class Scope(StrEnum):
    SUBMIT = "submit"  # POST /jobs, /jobs/batch; read the jobs this key submitted
    READ = "read"  # every GET: jobs, attempts, DLQ, stats, schedules, audit
    OPERATE = "operate"  # cancel, replay, bulk replay, purge
    ADMIN = "admin"  # create, list and revoke keys; webhooks
    EVENTS = "events"  # POST /events: wake the durable tasks waiting for an event


ALL_SCOPES = frozenset(Scope)


@dataclass(frozen=True, slots=True)
class Principal:
    """The key a request came with: its name, what it may do, how often. What it owns (its
    jobs, audit entries, rate bucket) is by ``key_id``, which a later key of the same name
    (after a revoke) does not share."""

    name: str
    scopes: frozenset[Scope]
    rate: tuple[int, int] | None = None  # (requests, per seconds) across every sandbox
    key_hash: str = ""
    key_id: str = ""

    def may(self, scope: Scope) -> bool:
        return scope in self.scopes


def parse_scopes(values: Iterable[str]) -> frozenset[Scope]:
    """``["submit", "read"]`` (or one comma-separated string each) as scopes; ValueError
    naming what is not a scope."""
    out: set[Scope] = set()
    for value in values:
        for part in str(value).split(","):
            part = part.strip().lower()
            if not part:
                continue
            try:
                out.add(Scope(part))
            except ValueError:
                known = ", ".join(s.value for s in Scope)
                raise ValueError(f"{part!r} is not a scope (one of: {known})") from None
    if not out:
        raise ValueError("give at least one scope")
    return frozenset(out)


def parse_rate(text: str) -> tuple[int, int]:
    """``"5/s"``, ``"100/m"``, ``"1000/10m"``: (requests, period in seconds)."""
    match = _RATE.match(text)
    if not match or int(match[1]) < 1:
        raise ValueError(f"{text!r} is not a rate: write requests/period, e.g. 5/s, 100/m")
    periods = int(match[2] or 1) * _PERIOD[match[3]]
    if periods < 1:
        raise ValueError(f"{text!r}: the period must be at least one second")
    return int(match[1]), periods


def format_rate(rate: tuple[int, int] | None) -> str | None:
    if rate is None:
        return None
    count, seconds = rate
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds % size == 0:
            n = seconds // size
            return f"{count}/{'' if n == 1 else n}{unit}"
    return f"{count}/{'' if seconds == 1 else seconds}s"


def check_name(name: str) -> str:
    if not NAME.match(name):
        raise ValueError(
            "a key name is 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    return name


def hash_api_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def configured_key_id(key_hash: str) -> str:
    return CONFIGURED_KEY_ID_PREFIX + key_hash[:12]


def new_key() -> str:
    """A fresh key: 32 random bytes, URL-safe, with a prefix that says what it is."""
    return "az_" + secrets.token_urlsafe(32)


def route_scope(method: str, path: str) -> Scope | None:
    """The scope a request needs; ``None`` for the public paths (checked before)."""
    if path.startswith(("/keys", "/webhooks")):  # a webhook's URL may carry a token of its own
        return Scope.ADMIN
    if path == "/whoami":
        return None  # any key may ask what it may do
    if method == "GET" or method == "HEAD":
        return Scope.READ
    if method == "POST" and path in ("/jobs", "/jobs/batch"):
        return Scope.SUBMIT
    if method == "POST" and path == "/events":
        return Scope.EVENTS
    return Scope.OPERATE


def own_job_read(method: str, path: str) -> bool:
    """Reads a submit-only key may make: the list of its own jobs, and a job (or its
    attempts) that the endpoint finds it submitted."""
    return method == "GET" and (path == "/jobs" or path.startswith("/jobs/"))


class KeyRing:
    """The live keys of this sandbox, by SHA-256. ``load`` returns the stored keys;
    ``configured`` the hashes the deployment was configured with (every scope). Reloaded
    when ``ttl_seconds`` old; a reload that fails keeps the keys it had (and logs), so a
    database outage does not lock everyone out, and the configured keys always work."""

    def __init__(
        self,
        load: Callable[[], Awaitable[list[dict[str, Any]]]] | None,
        configured: Callable[[], frozenset[str]],
        *,
        touch: Callable[[list[str]], Awaitable[None]] | None = None,
        find_one: Callable[[str], Awaitable[dict[str, Any] | None]] | None = None,
        ttl_seconds: float = KEY_RELOAD_SECONDS,
        configured_ttl_seconds: float = CONFIGURED_RELOAD_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._load = load
        self._configured = configured
        self._touch = touch
        self._find_one = find_one
        self._missed: set[str] = set()  # digests found to be no live key, until the reload
        self._ttl = ttl_seconds
        self._configured_ttl = configured_ttl_seconds
        self._configured_at: float | None = None
        self.loaded = load is None  # the stored keys were read at least once
        self._clock = clock
        self._keys: dict[str, Principal] = {}
        self._expiry: dict[str, datetime] = {}
        self._loaded_at: float | None = None
        self._used: set[str] = set()
        self._lock = asyncio.Lock()

    @property
    def stale(self) -> bool:
        return self._older_than(self._ttl)

    def _older_than(self, seconds: float) -> bool:
        return self._loaded_at is None or self._clock() - self._loaded_at >= seconds

    def invalidate(self) -> None:
        """Reload at the next request (this sandbox created or revoked a key)."""
        self._loaded_at = None
        self._missed.clear()

    async def refresh(self, max_age: float | None = None) -> None:
        """Reload if stale, or older than ``max_age`` (one reload at a time per sandbox)."""
        age = self._ttl if max_age is None else max_age
        if not self._older_than(age):
            return
        async with self._lock:
            if not self._older_than(age):
                return
            self.reload_configured()
            if self._load is not None:
                try:
                    async with asyncio.timeout(KEY_LOAD_TIMEOUT_SECONDS):
                        rows = await self._load()
                    self._apply(rows)
                    self.loaded = True
                except Exception:
                    log.warning("api keys: reload failed, keeping the loaded keys", exc_info=True)
                await self._flush_used()
            self._loaded_at = self._clock()

    def reload_configured(self) -> None:
        now = self._clock()
        if self._configured_at is not None and now - self._configured_at < self._configured_ttl:
            return
        self._configured_at = now
        configured = {
            h: Principal(CONFIGURED_KEY_NAME, ALL_SCOPES, key_hash=h, key_id=configured_key_id(h))
            for h in self._configured()
        }
        stored = {h: p for h, p in self._keys.items() if p.name != CONFIGURED_KEY_NAME}
        self._keys = {**stored, **configured}

    async def find(self, key: str) -> Principal | None:
        """:meth:`lookup`, and for a key the loaded ones lack (created since the last
        reload?) one indexed query of that key alone, bounded in time like a reload."""
        found = self.lookup(key)
        if found is not None or self._find_one is None:
            return found
        digest = hash_api_key(key)
        if digest in self._missed:
            return None
        try:
            async with asyncio.timeout(KEY_LOAD_TIMEOUT_SECONDS):
                row = await self._find_one(digest)
        except Exception:
            log.warning("api keys: could not look a key up", exc_info=True)
            return None
        if row is None:
            if len(self._missed) >= MAX_MISSED_KEYS:
                self._missed.clear()
            self._missed.add(digest)
            return None
        self._apply([row], keep=True)
        return self.lookup(key)

    def _apply(self, rows: list[dict[str, Any]], *, keep: bool = False) -> None:
        """The loaded keys become ``rows`` (``keep``: ``rows`` are added to them)."""
        if keep:
            keys, expiry = dict(self._keys), dict(self._expiry)
        else:
            keys = {h: p for h, p in self._keys.items() if p.name == CONFIGURED_KEY_NAME}
            expiry = {}
            self._missed.clear()
        for row in rows:
            try:
                scopes = parse_scopes(row["scopes"])
            except ValueError:
                log.warning("api key %s: unknown scopes %s, skipped", row["name"], row["scopes"])
                continue
            rate = (row["rate_limit"], row["rate_period_seconds"]) if row["rate_limit"] else None
            keys[row["key_hash"]] = Principal(
                row["name"], scopes, rate, row["key_hash"], row["key_id"]
            )
            if row.get("expires_at") is not None:
                expiry[row["key_hash"]] = row["expires_at"]
        self._keys, self._expiry = keys, expiry

    async def _flush_used(self) -> None:
        used, self._used = self._used, set()
        if used and self._touch is not None:
            try:
                async with asyncio.timeout(KEY_LOAD_TIMEOUT_SECONDS):
                    await self._touch(sorted(used))
            except Exception:
                log.warning("api keys: could not record last use", exc_info=True)

    def lookup(self, key: str, now: datetime | None = None) -> Principal | None:
        """The principal of ``key`` among the loaded keys (no I/O), else ``None``. Found by
        its SHA-256: a lookup's timing could only tell a digest, which does not lead back to
        a key."""
        if self._configured_at is None:
            self.reload_configured()
        found = self._keys.get(hash_api_key(key))
        if found is None:
            return None
        expires = self._expiry.get(found.key_hash)
        if expires is not None and (now or datetime.now(expires.tzinfo)) >= expires:
            return None
        if found.name != CONFIGURED_KEY_NAME:
            self._used.add(found.key_hash)
        return found
