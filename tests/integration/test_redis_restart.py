"""Redis restarted empty under a warm sandbox (as the soak does every few minutes): the
connections pooled before it died with the old server, and the next call on each one meets
a closed socket. The fleet's next tick, and a wait for wakes across the restart, still do
their work; a call while Redis is really down still fails fast as BrokerUnavailableError."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from asyncz import composition
from asyncz.errors import BrokerUnavailableError
from asyncz.fleet import handler as fleet_handler
from asyncz.fleet.wakes import wait_for_wakes
from asyncz.jobs import NewJob
from asyncz.settings import Settings
from tests.support.private_servers import RedisServer
from tests.support.settings import handler_env, make_settings, open_service

pytestmark = pytest.mark.integration


@pytest.fixture
def restartable(clean: None, pg_url: str, own_redis: RedisServer) -> Settings:
    """Settings on the test's database and a Redis of its own, which it may restart."""
    return make_settings(pg_url, own_redis.url)


@pytest.fixture
def fleet_env(restartable: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    """The fleet's settings from its environment, as in its Lambda."""
    with handler_env(restartable, monkeypatch) as settings_read:
        yield settings_read


def submit(settings: Settings, delay: float) -> str:
    async def go() -> str:
        async with open_service(settings) as svc:
            job = NewJob(task="echo", payload={}, delay_seconds=delay)
            return str((await svc.submit(job)).job_id)

    return asyncio.run(go())


def ready_ids(server: RedisServer, settings: Settings) -> set[str]:
    r = server.client()
    try:
        return set(r.zrange(f"{settings.redis_prefix}:{{default}}:ready", 0, -1))
    finally:
        r.close()


def test_the_fleet_tick_right_after_redis_restarts_promotes_and_starts_a_worker(
    fleet_env: Settings, own_redis: RedisServer
) -> None:
    invoked: list[set[str]] = []
    first = fleet_handler.scale(lambda: invoked.append(set()))  # pools a connection
    assert first["started"] == 0 and invoked == []

    own_redis.restart()  # empty; the sandbox's pooled connection died with the old server
    job_id = submit(fleet_env, delay=0.2)  # what recovery would put back, delayed
    time.sleep(0.4)  # due now, with no worker alive to promote it
    out = fleet_handler.scale(lambda: invoked.append(ready_ids(own_redis, fleet_env)))

    assert out == {
        "backlog": 1, "live_workers": 0, "starting_workers": 0, "started": 1, "wakes": 0
    }  # fmt: skip
    assert invoked == [{job_id}]  # promoted (its Lua script loaded again), then a worker


BLIP_SECONDS = 3.0  # longer than one call's reconnect retries: the wait itself rides it out


class BlipAtSecondLook:
    """The real broker, but Redis goes down just before the wait's second look at the
    delayed sets (mid-wait, between two polls) and comes back empty ``BLIP_SECONDS`` later,
    when recovery puts the delayed id back; a look after the blip waits for that."""

    def __init__(self, broker: Any, server: RedisServer, settings: Settings) -> None:
        self._broker, self._server, self._settings = broker, server, settings
        self.looks = 0
        self.failed_looks = 0
        self._back: asyncio.Task[None] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._broker, name)

    async def _come_back(self) -> None:
        await asyncio.sleep(BLIP_SECONDS)
        await asyncio.to_thread(self._server.start)
        async with open_service(self._settings) as svc:
            assert (await svc.recover()).restored_delayed == 1

    async def next_due(self, queues: Any) -> int | None:
        self.looks += 1
        if self.looks == 2:
            await asyncio.to_thread(self._server.stop)
            self._back = asyncio.create_task(self._come_back())
        elif self._back is not None:
            await self._back  # no look between the restart and recovery's re-enqueue
        try:
            due: int | None = await self._broker.next_due(queues)
        except BrokerUnavailableError:
            self.failed_looks += 1
            raise
        return due


def test_a_wait_for_wakes_rides_out_a_redis_restart_and_starts_the_worker_at_the_wake(
    restartable: Settings, own_redis: RedisServer
) -> None:
    job_id = submit(restartable, delay=BLIP_SECONDS + 3)
    invoked: list[set[str]] = []

    async def go() -> tuple[int, int, int]:
        broker = composition.build_broker(restartable)
        proxy = BlipAtSecondLook(broker, own_redis, restartable)
        try:
            invoke = lambda: invoked.append(ready_ids(own_redis, restartable))  # noqa: E731
            out = await wait_for_wakes(proxy, restartable, time.monotonic() + 30, invoke)
            return (*out, proxy.failed_looks)
        finally:
            await broker.close()

    wakes, started, failed_looks = asyncio.run(go())
    assert failed_looks >= 1  # a look met Redis down
    assert (wakes, started) == (1, 1)  # and the wake still got its worker
    assert invoked == [{job_id}]


def test_a_call_while_redis_is_down_fails_fast_as_broker_unavailable(
    restartable: Settings, own_redis: RedisServer
) -> None:
    async def go() -> float:
        broker = composition.build_broker(restartable)
        try:
            await broker.ping()  # pools a connection
            own_redis.stop()
            started = time.monotonic()
            with pytest.raises(BrokerUnavailableError):
                await broker.backlog(["default"])
            return time.monotonic() - started
        finally:
            await broker.close()

    assert asyncio.run(go()) < 3.0
    with pytest.raises(redis.ConnectionError):
        own_redis.client().ping()  # it was really down
