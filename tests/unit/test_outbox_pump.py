"""The publisher over the in-memory store: it delivers each event once to every sink and
forgets it; a sink that fails keeps the page for the next run and does not stop another
sink's own work; one publisher at a time, and without Redis still one; the wake after ends
is never awaited by the job's path, is folded to one invoke per interval, and is not sent
while a publisher drains."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Sequence
from typing import Any

import pytest

from asyncz.errors import BrokerUnavailableError
from asyncz.jobs import NewJob
from asyncz.outbox.console import ConsoleSink
from asyncz.outbox.pump import LOCK, Pump
from asyncz.outbox.sink import EVENT_TYPES, Envelope
from asyncz.outbox.wake import PumpWake, unless_draining
from asyncz.service import JobService
from tests.support.memory import service

pytestmark = pytest.mark.unit


class Recording:
    """A sink that keeps what it was given; ``fail`` makes publish raise."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.got: list[Envelope] = []
        self.ticks = 0

    async def publish(self, events: Sequence[Envelope]) -> None:
        if self.fail:
            raise RuntimeError("the endpoint is down")
        self.got.extend(events)

    async def tick(self, deadline: float) -> None:
        self.ticks += 1


async def _ends(svc: JobService, n: int) -> list[str]:
    ids = [(await svc.submit(NewJob(task="echo", payload={"i": i}))).job_id for i in range(n)]
    leases = await svc.claim_next("w", ["default"], n, 0.1, 3600)
    await svc.complete_many([(lease, {"i": 1}) for lease in leases])
    return ids


def _pump(svc: JobService, *sinks: Any, **kw: Any) -> Pump:
    return Pump(svc.store.outbox, svc.broker, sinks, svc.settings, **kw)


def test_every_sink_gets_each_event_once_and_the_outbox_forgets_it() -> None:
    async def go() -> None:
        svc = service(outbox_page_size=2)
        ids = await _ends(svc, 5)
        first, second = Recording(), Recording()
        report = await _pump(svc, first, second).run(float("inf"))
        assert report.published == 5 and report.failed == []
        for sink in (first, second):
            assert sorted(e.data["job_id"] for e in sink.got) == sorted(ids)
            assert {e.type for e in sink.got} == {"asyncz.job.completed"} and sink.ticks == 1
        assert (await _pump(svc, first).run(float("inf"))).published == 0
        assert len(first.got) == 5

    asyncio.run(go())


def test_a_failing_sink_keeps_the_page_and_the_others_still_do_their_own_work() -> None:
    async def go() -> None:
        svc = service()
        await _ends(svc, 2)
        down, up = Recording(fail=True), Recording()
        report = await _pump(svc, up, down).run(float("inf"))
        assert report.published == 0 and len(report.failed) == 1
        assert up.ticks == 1  # its retries still run
        assert (await svc.store.outbox.gauges())["backlog"] == 2
        down.fail = False
        assert (await _pump(svc, up, down).run(float("inf"))).published == 2
        assert len(down.got) == 2  # once the endpoint is back, each event once
        assert len(up.got) == 4  # at least once: the sink that took the first try sees them again

    asyncio.run(go())


def test_a_second_publisher_leaves_the_outbox_to_the_one_draining_it() -> None:
    async def go() -> None:
        svc = service()
        await _ends(svc, 1)
        assert await svc.broker.try_lock(LOCK, 60)
        sink = Recording()
        assert (await _pump(svc, sink).run(float("inf"))).published == 0
        await svc.broker.unlock(LOCK)
        assert (await _pump(svc, sink).run(float("inf"))).published == 1
        assert await svc.broker.try_lock(LOCK, 60)  # the run let go of it

    asyncio.run(go())


def test_without_redis_the_publisher_still_publishes() -> None:
    async def go() -> None:
        svc = service()
        await _ends(svc, 1)

        async def down(*args: Any) -> bool:
            raise BrokerUnavailableError("redis down")

        svc.broker.try_lock = down  # type: ignore[method-assign]
        svc.broker.unlock = down  # type: ignore[method-assign,assignment]
        sink = Recording()
        assert (await _pump(svc, sink).run(float("inf"))).published == 1

    asyncio.run(go())


def test_the_console_sink_prints_one_cloudevent_a_line() -> None:
    async def go() -> str:
        svc = service()
        [job_id] = await _ends(svc, 1)
        out = io.StringIO()
        await _pump(svc, ConsoleSink(out)).run(float("inf"))
        return job_id + "\n" + out.getvalue()

    job_id, line = asyncio.run(go()).splitlines()
    kind, _, body = line.removeprefix("event ").partition(" ")
    event = json.loads(body)
    assert kind == event["type"] == "asyncz.job.completed"
    assert event["specversion"] == "1.0" and event["subject"] == job_id
    assert event["data"]["job_id"] == job_id and event["source"] == "asyncz"


def test_a_completion_never_waits_for_the_wake() -> None:
    async def go() -> None:
        svc = service()
        started, release = asyncio.Event(), asyncio.Event()

        async def stuck_invoke() -> None:
            started.set()
            await release.wait()  # the Lambda API hangs

        svc.leases.ended = PumpWake(stuck_invoke, 1.0)
        await _ends(svc, 1)  # returns while the invoke still hangs
        await asyncio.sleep(0)
        assert started.is_set() and not release.is_set()
        release.set()

    asyncio.run(go())


def test_the_wake_sends_one_invoke_now_and_folds_later_calls_into_one() -> None:
    async def go() -> PumpWake:
        async def invoke() -> None:
            return None

        wake = PumpWake(invoke, 0.05)
        for _ in range(5):
            wake()
            await asyncio.sleep(0)
        await asyncio.sleep(0.2)  # past the interval: the trailing one has gone
        return wake

    assert asyncio.run(go()).sent == 2


def test_a_failed_wake_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    async def go() -> PumpWake:
        async def invoke() -> None:
            raise ConnectionError("no Lambda endpoint")

        wake = PumpWake(invoke, 1.0)
        wake()
        await asyncio.sleep(0.01)
        return wake

    assert asyncio.run(go()).sent == 0
    assert "the sweep delivers" in caplog.text


def test_no_invoke_while_a_publisher_holds_the_lock_and_one_without_redis() -> None:
    # The holder looks for pending events after it lets go, so the ends are its to send.
    async def go() -> list[bool]:
        svc = service()
        calls: list[int] = []

        async def invoke() -> None:
            calls.append(1)

        assert await svc.broker.try_lock(LOCK, 30)
        sent = [await unless_draining(svc.broker, invoke)]  # held: left to the holder
        await svc.broker.unlock(LOCK)
        sent.append(await unless_draining(svc.broker, invoke))

        async def down(name: str) -> bool:
            raise BrokerUnavailableError("Redis is down")

        svc.broker.lock_held = down  # type: ignore[method-assign]
        sent.append(await unless_draining(svc.broker, invoke))
        assert len(calls) == sent.count(True)
        return sent

    assert asyncio.run(go()) == [False, True, True]


def test_an_event_matches_its_json_schema_also_in_the_openapi_document() -> None:
    from jsonschema import Draft202012Validator

    from asyncz.api.app import create_app
    from asyncz.outbox.envelopes import EVENT_SCHEMA
    from tests.support.memory import settings as memory_settings

    async def go() -> Envelope:
        svc = service(outbox_result_bytes=1000)
        await _ends(svc, 1)
        sink = Recording()
        await _pump(svc, sink).run(float("inf"))
        return sink.got[0]

    event = asyncio.run(go()).as_dict()
    Draft202012Validator(EVENT_SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER).validate(
        event
    )
    assert event["data"]["result"] == {"i": 1}
    document = create_app(memory_settings(api_key_hashes="0" * 64)).openapi()
    component = document["components"]["schemas"]["JobEvent"]
    assert component["properties"]["type"]["enum"] == list(EVENT_TYPES)
