"""Redis adapter: dispatch only. Holds job ids (and nothing Postgres cannot rebuild).

Keys (``{prefix}`` defaults to ``asyncz``; the hash tag keeps a queue's two sets in one slot):
  ``{prefix}:{<queue>}:ready``    zset, member = job id, score = priority band + enqueue ms
  ``{prefix}:{<queue>}:delayed``  zset, member = ``<priority>|<job id>``, score = run_at ms
  ``{prefix}:queues``             set of queue names ever enqueued to
  ``{prefix}:workers``            zset, member = worker id, score = presence expiry ms
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.credentials import CredentialProvider
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from asyncz.broker.keys import SCORE_SCALE, KeySpace
from asyncz.broker.limits import RedisLimits
from asyncz.errors import BrokerUnavailableError
from asyncz.jobs import PRIORITY_MAX
from asyncz.port_types import Dispatch, epoch_ms

log = logging.getLogger("asyncz.broker")

_UNAVAILABLE = (RedisConnectionError, RedisTimeoutError, OSError)


@contextmanager
def _guard() -> Iterator[None]:
    """Turn driver errors into the domain's :class:`BrokerUnavailableError`: a server that
    cannot be reached, and one that refuses commands (OOM under maxmemory, READONLY after
    a failover) alike, so every caller's outage handling covers both."""
    try:
        yield
    except _UNAVAILABLE as exc:
        log.warning("redis unavailable: %s", exc)
        raise BrokerUnavailableError("the queue (Redis) is unavailable") from exc
    except ResponseError as exc:
        log.warning("redis refused the command: %s", exc)
        raise BrokerUnavailableError("the queue (Redis) refused the command") from exc


# A pooled connection that died with its server (a restart, a failover) fails its next
# command at once; redis-py then drops it and retries on a fresh one. ``Redis.from_url``
# builds the pool from its keyword arguments alone, so without a ``retry`` here the
# connections get none (``Redis()``'s default never reaches them). Only ConnectionError is
# retried: a timeout has already waited its full socket timeout. A few short backoffs ride
# out a blip and still give up within about a second when Redis is really down.
RECONNECT_RETRIES = 3


def _reconnect_retry() -> Retry:
    """The retry every broker connection gets: reconnect on ConnectionError, briefly."""
    backoff = ExponentialWithJitterBackoff(cap=0.5, base=0.1)
    return Retry(backoff, RECONNECT_RETRIES, supported_errors=(RedisConnectionError,))


def _client_options(
    password: str | None, socket_timeout: float, credentials: CredentialProvider | None = None
) -> dict[str, Any]:
    return {
        "password": password,
        "credential_provider": credentials,
        "decode_responses": True,
        "socket_connect_timeout": socket_timeout,
        "health_check_interval": 30,
        "retry": _reconnect_retry(),
    }


class RedisBroker:
    """Per-queue ready/delayed sorted sets, worker presence, backlog counts."""

    def __init__(
        self, client: aioredis.Redis, prefix: str = "asyncz", *, track_activity: bool = False
    ) -> None:
        fair = resources.files("asyncz.broker").joinpath("fair.lua").read_text("utf-8")
        self.keys = KeySpace(prefix, client.register_script(fair))
        self._r = client
        # Count enqueues (INCR) so recovery can tell that nothing happened since it last
        # found Postgres idle; off by default: the submit path stays one ZADD.
        self._track = track_activity
        source = resources.files("asyncz.broker").joinpath("promote.lua").read_text("utf-8")
        self._promote = client.register_script(source)
        self.limits = RedisLimits(client, prefix, _guard)
        source = resources.files("asyncz.broker").joinpath("request_rate.lua").read_text("utf-8")
        self._request_rate = client.register_script(source)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        prefix: str,
        password: str | None = None,
        socket_timeout: float = 5.0,
        credentials: CredentialProvider | None = None,
        track_activity: bool = False,
    ) -> RedisBroker:
        """Build the broker; redis-py connects lazily at the first command. ``credentials``
        (IAM auth) gives a user and a fresh token for each new connection."""
        client = aioredis.Redis.from_url(
            url,
            **_client_options(password, socket_timeout, credentials),
            # A blocking BZMPOP (<= 25 s) must fit inside the read timeout.
            socket_timeout=socket_timeout + 30.0,
            max_connections=64,
        )
        return cls(client, prefix, track_activity=track_activity)

    async def close(self) -> None:
        await self._r.aclose()

    async def enqueue(self, items: Sequence[Dispatch], *, register: bool = False) -> int:
        """``ZADD NX`` every item (idempotent); returns how many were new.

        Queue names go to the ``queues`` set the first time this broker sees them (or always
        with ``register``, which recovery uses: a FLUSHALL empties that set too). One item
        to a known queue is one round trip with no pipeline: the submit hot path.
        """
        if not items:
            return 0
        fresh = self.keys.fresh(items, register)
        with _guard():
            if len(items) == 1 and not fresh and not self._track:
                return int(await self.keys.add(self._r, items[0]))
            async with self._r.pipeline(transaction=False) as pipe:
                counted = self.keys.fill(pipe, items, fresh)
                if self._track:
                    pipe.incr(self.keys.activity_key)
                results = await pipe.execute()
        self.keys.known |= fresh
        return sum(int(r) for r in results[:counted])

    async def reschedule(self, items: Sequence[Dispatch]) -> None:
        """Move ids already enqueued to where they belong now (one round trip)."""
        with _guard():
            async with self._r.pipeline(transaction=False) as pipe:
                for it in items:
                    self.keys.move(pipe, it)
                await pipe.execute()

    async def promote_due(self, queues: Sequence[str], limit: int = 1000) -> int:
        """Move due delayed ids to ready (Lua, atomic per queue); returns how many moved."""
        moved = 0
        with _guard():
            for q in queues:
                moved += int(
                    await self._promote(
                        keys=[self.keys.delayed_key(q), self.keys.ready_key(q)],
                        args=[limit, PRIORITY_MAX, SCORE_SCALE],
                    )
                )
        return moved

    async def next_due(self, queues: Sequence[str]) -> int | None:
        """The lowest score over the queues' delayed sets (one ZRANGE 0 0 each, one round trip)."""
        if not queues:
            return None
        with _guard():
            async with self._r.pipeline(transaction=False) as pipe:
                for q in queues:
                    pipe.zrange(self.keys.delayed_key(q), 0, 0, withscores=True)
                firsts = await pipe.execute()
        scores = [int(first[0][1]) for first in firsts if first]
        return min(scores, default=None)

    async def pop(self, queues: Sequence[str], max_items: int, timeout: float) -> list[str]:
        """Block up to ``timeout`` s for the first queue (in priority order) that has ids,
        and take up to ``max_items`` of them: one BZMPOP, one round trip (Redis 7+/Valkey)."""
        keys = [self.keys.ready_key(q) for q in queues]
        with _guard():
            popped: list[Any] | None = await self._r.bzmpop(  # type: ignore[assignment]
                max(timeout, 0.01), len(keys), keys, min=True, count=max(max_items, 1)
            )
        if not popped:
            return []
        _key, pairs = popped  # [key, [[member, score], ...]]
        return [str(pair[0]) for pair in pairs]

    async def known_queues(self) -> list[str]:
        with _guard():
            return sorted(str(q) for q in await self._r.smembers(self.keys.queues_key))

    async def backlog(self, queues: Sequence[str]) -> dict[str, tuple[int, int]]:
        """``{queue: (ready, delayed)}``."""
        with _guard():
            async with self._r.pipeline(transaction=False) as pipe:
                for q in queues:
                    pipe.zcard(self.keys.ready_key(q))
                    pipe.zcard(self.keys.delayed_key(q))
                res = await pipe.execute()
        return {q: (int(res[2 * i]), int(res[2 * i + 1])) for i, q in enumerate(queues)}

    async def register_worker(self, worker_id: str, ttl_seconds: float) -> None:
        """Presence until ``ttl_seconds`` from now (refreshed by the worker's upkeep), and
        when it first registered (one round trip)."""
        now = epoch_ms()
        with _guard():
            async with self._r.pipeline(transaction=False) as pipe:
                pipe.zadd(self.keys.workers_key, {worker_id: now + int(ttl_seconds * 1000)})
                pipe.hsetnx(self.keys.workers_since_key, worker_id, now)
                await pipe.execute()

    async def unregister_worker(self, worker_id: str) -> None:
        with _guard():
            async with self._r.pipeline(transaction=False) as pipe:
                pipe.zrem(self.keys.workers_key, worker_id)
                pipe.hdel(self.keys.workers_since_key, worker_id)
                await pipe.execute()

    async def live_worker_list(self) -> list[dict[str, Any]]:
        """The live workers: ``worker_id``, ``since_ms`` (first registered), ``expires_ms``
        (presence); what a worker that died left behind is dropped on the way."""
        with _guard():
            async with self._r.pipeline(transaction=False) as pipe:
                self.keys.prune_and_count_workers(pipe)
                pipe.zrange(self.keys.workers_key, 0, -1, withscores=True)
                pipe.hgetall(self.keys.workers_since_key)
                _, _, live, since = await pipe.execute()
            gone = [w for w in since if w not in dict(live)]
            if gone:
                await self._r.hdel(self.keys.workers_since_key, *gone)
        return [
            {"worker_id": w, "since_ms": int(since.get(w, 0) or 0) or None,
             "expires_ms": int(score)}
            for w, score in live
        ]  # fmt: skip

    async def live_workers(self) -> int:
        """Workers whose presence has not expired (expired entries are dropped on the way)."""
        with _guard():
            async with self._r.pipeline(transaction=False) as pipe:
                self.keys.prune_and_count_workers(pipe)
                _, n = await pipe.execute()
        return int(n)

    async def add_starting(self, count: int, ttl_seconds: float) -> None:
        """Count ``count`` workers just invoked as starting until they register (or until
        ``ttl_seconds`` pass: an invoke that never ran must not block the next scale-out)."""
        expiry = epoch_ms() + int(ttl_seconds * 1000)
        with _guard():
            await self._r.zadd(
                self.keys.starting_key, {uuid.uuid4().hex: expiry for _ in range(count)}
            )

    async def starting_workers(self) -> int:
        with _guard():
            async with self._r.pipeline(transaction=False) as pipe:
                pipe.zremrangebyscore(self.keys.starting_key, "-inf", epoch_ms())
                pipe.zcard(self.keys.starting_key)
                _, n = await pipe.execute()
        return int(n)

    async def worker_started(self) -> None:
        """A worker has registered: it no longer counts as starting."""
        with _guard():
            await self._r.zpopmin(self.keys.starting_key, 1)

    async def try_lock(self, name: str, ttl_seconds: float) -> bool:
        """A best-effort, expiring mutex (``SET NX PX``), e.g. so a burst wakes one worker."""
        key, options = self.keys.lock_args(name, ttl_seconds)
        with _guard():
            return bool(await self._r.set(key, "1", **options))

    async def unlock(self, name: str) -> None:
        key, _ = self.keys.lock_args(name, 1.0)
        with _guard():
            await self._r.delete(key)

    async def lock_held(self, name: str) -> bool:
        key, _ = self.keys.lock_args(name, 1.0)
        with _guard():
            return bool(await self._r.exists(key))

    def _position_key(self, scan: str) -> str:
        name = "scan-position" if scan == "queued" else f"{scan}-position"
        return f"{self.keys.prefix}:recovery:{name}"

    async def scan_position(self, scan: str = "queued") -> str | None:
        """Where recovery's walk over ``queued`` (re-enqueue) or ``waiting`` jobs stopped
        last time (``None``: at the start)."""
        with _guard():
            value = await self._r.get(self._position_key(scan))
        return str(value) if value is not None else None

    async def save_scan_position(self, position: str | None, scan: str = "queued") -> None:
        key = self._position_key(scan)
        with _guard():
            if position is None:
                await self._r.delete(key)
            else:
                await self._r.set(key, position)

    async def activity(self) -> int:
        """How many enqueues this prefix has seen (0 after a FLUSHALL, or untracked)."""
        with _guard():
            value = await self._r.get(self.keys.activity_key)
        return int(value or 0)

    async def idle_mark(self) -> str | None:
        """What recovery noted when it last found Postgres idle (None: expired or never)."""
        with _guard():
            value = await self._r.get(self.keys.idle_key)
        return str(value) if value is not None else None

    async def set_idle_mark(self, value: str | None, ttl_seconds: float) -> None:
        with _guard():
            if value is None:
                await self._r.delete(self.keys.idle_key)
            else:
                await self._r.set(self.keys.idle_key, value, px=max(1, int(ttl_seconds * 1000)))

    async def take_request(self, key_id: str, limit: int, period_seconds: int) -> float:
        """Admit one request of the API key ``key_id`` under its rate limit, counted across
        every sandbox: 0.0 when admitted, else the seconds until one would be."""
        key = f"{self.keys.prefix}:rate:{{key:{key_id}}}"
        with _guard():
            wait_ms = await self._request_rate(
                keys=[key], args=[limit, period_seconds * 1000, uuid.uuid4().hex]
            )
        return int(wait_ms) / 1000.0

    async def ping(self) -> None:
        with _guard():
            await self._r.ping()
