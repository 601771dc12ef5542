"""Cascades in bounded pages (settle, cancel's cascade, replay's heal) and the recovery sweep
that resumes them: one suite, run on the in-memory store and broker
(tests/unit/test_cascades_memory.py) and on PostgreSQL and Redis
(tests/integration/test_cascades_real.py). A module imports these tests and defines the
``cascade_services`` fixture: a function of settings overrides returning an async context
manager of a JobService."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

from asyncz.errors import QueryTimeoutError, StoreUnavailableError
from tests.support.workflows import job, run_ready

CascadeServices = Callable[..., Any]
CHILDREN = 500
PAGE = 50


def run(services: CascadeServices, body: Callable[[Any], Any], **overrides: Any) -> Any:
    async def go() -> Any:
        async with services(**overrides) as svc:
            return await body(svc)

    return asyncio.run(go())


async def family(svc: Any, children: int = CHILDREN) -> tuple[str, list[str]]:
    """A queued parent and ``children`` waiting on it (rule ``fail``)."""
    [parent] = await svc.submit_many([job("p")])
    ids: list[str] = []
    while len(ids) < children:
        items = await svc.submit_many(
            [job(None, parent.job_id) for _ in range(min(250, children - len(ids)))]
        )
        ids.extend(it.job_id for it in items)
    return parent.job_id, ids


async def counts(svc: Any, ids: list[str]) -> Counter[str]:
    return Counter([(await svc.get(i)).status.value for i in ids])


def fail_after(part: Any, name: str, pages: int, error: Exception) -> list[int]:
    """``part.name`` works ``pages`` times, then raises ``error`` (a crash between pages);
    returns the list of calls made, for the test to read."""
    real = getattr(part, name)
    calls: list[int] = []

    async def wrapped(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) > pages:
            raise error
        return await real(*args, **kwargs)

    setattr(part, name, wrapped)
    return calls


def test_a_cancelled_parent_settles_its_children_in_pages_and_the_sweep_resumes_a_crash(
    cascade_services: CascadeServices,
) -> None:
    async def body(svc: Any) -> None:
        parent, children = await family(svc)
        deps = svc.store.dependencies
        real_settle = deps.settle
        calls = fail_after(deps, "settle", 2, StoreUnavailableError("the database went away"))
        await svc.cancel(parent)
        assert len(calls) == 3, "two pages, then the crash"
        assert (await svc.get(parent)).cascade_pending, "a crash leaves the cascade flagged"
        assert await counts(svc, children) == {"cancelled": 2 * PAGE, "waiting": 400}
        deps.settle = real_settle  # the database is back
        report = await svc.recover()
        assert report.failed == []
        assert await counts(svc, children) == {"cancelled": CHILDREN}
        assert not (await svc.get(parent)).cascade_pending
        graph = await svc.graph(await svc.get(parent))
        assert graph["dependents_total"] == CHILDREN
        assert [c["job_id"] for c in graph["dependents"]] == sorted(children, key=uuid.UUID)
        for child in children[:3]:
            assert (await svc.get(child)).last_error == f"parent_failed: {parent}"

    run(cascade_services, body, cascade_page_size=PAGE)


def test_a_cascade_out_of_time_is_left_flagged_and_the_sweep_finishes_it(
    cascade_services: CascadeServices,
) -> None:
    async def body(svc: Any) -> None:
        parent, children = await family(svc, 120)
        await svc.cancel(parent)  # no time at all: every page is the sweep's
        assert (await svc.get(parent)).cascade_pending
        assert await counts(svc, children) == {"waiting": 120}
        await svc.recover()
        assert await counts(svc, children) == {"cancelled": 120}
        assert not (await svc.get(parent)).cascade_pending

    run(cascade_services, body, cascade_page_size=PAGE, cascade_seconds=0)


def test_a_completed_parent_releases_every_child_page_by_page(
    cascade_services: CascadeServices,
) -> None:
    async def body(svc: Any) -> None:
        parent, children = await family(svc, 230)
        assert await run_ready(svc) == [parent]
        assert await counts(svc, children) == {"queued": 230}
        assert not (await svc.get(parent)).cascade_pending, "a finished cascade is not flagged"

    run(cascade_services, body, cascade_page_size=PAGE)


def test_a_replayed_parent_heals_its_children_in_pages_across_a_crash(
    cascade_services: CascadeServices,
) -> None:
    async def body(svc: Any) -> None:
        parent, children = await family(svc, 300)
        await run_ready(svc, fail={parent})
        assert await counts(svc, children) == {"dead": 300}
        deps = svc.store.dependencies
        real_heal = deps.heal
        fail_after(deps, "heal", 3, QueryTimeoutError("the statement timed out"))
        replayed = await svc.replay(parent)
        assert replayed.cascade_pending, "the heal is not done: the job says so"
        assert await counts(svc, children) == {"waiting": 3 * PAGE, "dead": 150}
        deps.heal = real_heal
        await svc.recover()
        assert await counts(svc, children) == {"waiting": 300}
        assert not (await svc.get(parent)).cascade_pending
        assert await run_ready(svc) == [parent]
        assert await counts(svc, children) == {"queued": 300}

    run(cascade_services, body, cascade_page_size=PAGE)


def test_a_failing_recovery_step_is_named_and_the_other_steps_still_run(
    cascade_services: CascadeServices,
) -> None:
    async def body(svc: Any) -> None:
        await svc.submit_many([job("lone")])
        fail_after(svc.store.maintenance, "recover_stale_leases", 0, QueryTimeoutError("slow"))
        fail_after(svc.store.dependencies, "pending_cascades", 0, StoreUnavailableError("down"))
        report = await svc.recover()
        assert report.failed == ["leases", "cascades"]
        assert report.reenqueued == 1, "the re-enqueue scan ran all the same"
        assert svc.metrics.seen["RecoveryStepFailed"] == 2

    run(cascade_services, body)
