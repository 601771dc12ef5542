"""GET /stats' cost estimate: the arithmetic of docs/cost.md on the counts the store keeps."""

from __future__ import annotations

import asyncio

import pytest

from asyncz import prices
from asyncz.jobs import NewJob
from asyncz.maintenance.cost import CostEstimate, architecture, dollars
from tests.support.memory import service

pytestmark = pytest.mark.unit


def test_a_million_single_submits_on_lean_cost_what_docs_cost_md_says() -> None:
    counts = {"requests": 1_000_000, "attempts": 1_000_000, "attempt_seconds": 0.0}
    got = dollars(counts, front="http", arch="arm64", concurrency=10)
    gateway_and_requests = 1.00 + 0.20
    duration = (22 + 16) / 1000 * 1_000_000 * 0.0000133334  # api + worker GB-s, 1 GB
    logs = (115 + 115) * 1_000_000 / 1e9 * 0.50
    assert got == pytest.approx(gateway_and_requests + duration + logs)
    assert got == pytest.approx(1.82, abs=0.01)  # docs/cost.md measures $1.69–1.86


def test_a_batch_is_one_request_and_run_time_is_shared_by_the_workers_slots() -> None:
    base = {"requests": 10_000, "attempts": 1_000_000, "attempt_seconds": 0.0}
    rest = dollars(base, front="rest", arch="x86_64", concurrency=10)
    http = dollars(base, front="http", arch="x86_64", concurrency=10)
    assert rest - http == pytest.approx(10_000 * 2.50 / 1e6)
    longer = {**base, "attempt_seconds": 1000.0}
    extra = dollars(longer, front="http", arch="x86_64", concurrency=10) - http
    assert extra == pytest.approx(1000 / 10 * prices.LAMBDA_PER_GB_SECOND["x86_64"])
    arm = dollars(longer, front="http", arch="arm64", concurrency=10)
    assert arm < dollars(longer, front="http", arch="x86_64", concurrency=10)


def test_the_estimate_counts_requests_and_is_cached_for_a_while() -> None:
    svc = service()

    async def go() -> None:
        await svc.submit(NewJob(task="echo", payload={}))
        await svc.submit_many([NewJob(task="echo", payload={})] * 4)
        fresh = CostEstimate(svc.store, front="http", concurrency=10, cache_seconds=0)
        first = await fresh.estimate()
        assert first["last_hour"]["jobs"] == 5 and first["last_hour"]["requests"] == 2
        assert first["last_day"] == first["last_hour"] and first["estimate"] is True
        assert first["architecture"] == architecture() and first["prices_of"] == prices.PRICED_ON
        cached = CostEstimate(svc.store, front="http", concurrency=10, cache_seconds=60)
        before = await cached.estimate()
        await svc.submit(NewJob(task="echo", payload={}))
        assert await cached.estimate() == before  # at most once a minute per sandbox
        assert (await fresh.estimate())["last_hour"]["requests"] == 3

    asyncio.run(go())
