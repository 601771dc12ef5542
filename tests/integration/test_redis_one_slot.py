"""ElastiCache Serverless is a Redis cluster: a command over several keys must find them in one
hash slot, or it fails with CROSSSLOT. The serverless profile gives the broker a prefix that
is a hash tag (``{asyncz}``, see ``infra/asyncz_cdk/data_stack.py``); this checks that every key
the broker writes then lands in one slot, the multi-queue BZMPOP included."""

from __future__ import annotations

import asyncio
import uuid

import pytest
import redis
from redis.crc import key_slot

from asyncz.broker.redis import RedisBroker
from asyncz.port_types import Dispatch, Slot, epoch_ms
from asyncz.tasks.limits import Counted, Rate, TaskLimits

pytestmark = pytest.mark.integration


def test_a_hash_tag_prefix_puts_every_broker_key_in_one_slot(redis_server_url: str) -> None:
    tag = f"t{uuid.uuid4().hex[:8]}"
    prefix = "{" + tag + "}"  # as the serverless profile's "{asyncz}"

    async def use_every_key() -> list[str]:
        broker = RedisBroker.from_url(redis_server_url, prefix=prefix, track_activity=True)
        try:
            now = epoch_ms()
            await broker.enqueue(
                [
                    Dispatch(str(uuid.uuid4()), "default", 0, now, True),
                    Dispatch(str(uuid.uuid4()), "emails", 5, now, True),
                    Dispatch(str(uuid.uuid4()), "reports", 0, now + 600_000, False),
                ],
                register=True,
            )
            await broker.promote_due(["default", "emails", "reports"])
            assert await broker.pop(["default", "emails", "reports"], 2, 0.1)  # BZMPOP over 3
            await broker.register_worker("w1", 30)
            await broker.add_starting(1, 30)
            assert await broker.try_lock("wake-worker", 30)
            await broker.save_scan_position("0")
            await broker.set_idle_mark("x", 30)
            # flow control: a keyed (fair) enqueue, slots, held ids, rate windows, pauses
            await broker.enqueue([Dispatch(str(uuid.uuid4()), "default", 0, now, True, "k1")])
            lim = TaskLimits(concurrency=1, key_concurrency=1, rate=Rate(5, 60))
            slots = [Slot(str(uuid.uuid4()), uuid.uuid4().hex, "t", "k1", "default", 0, lim)
                     for _ in range(2)]  # fmt: skip
            await broker.limits.restore(  # a rebuild (of another task's limits)
                [Counted(kind, "u", key, "r:x", 1000, 60_200)
                 for kind in ("slots", "starts") for key in (None, "k1")]
            )  # fmt: skip
            assert await broker.limits.acquire(slots, 30) == ["ok", "concurrency"]
            await broker.limits.refresh(slots[:1], 30)
            await broker.limits.release(slots[:1])
            await broker.limits.wake_due()
            await broker.limits.mirror_paused({"default"})
            client = redis.Redis.from_url(redis_server_url)
            return [k.decode() for k in client.scan_iter(match=f"{{{tag}}}*")]
        finally:
            await broker.close()

    keys = asyncio.run(use_every_key())
    assert len(keys) >= 8, keys  # ready x2, delayed, queues, workers, starting, lock, ...
    assert {key_slot(k.encode()) for k in keys} == {key_slot(tag.encode())}, keys
    redis.Redis.from_url(redis_server_url).delete(*keys)
