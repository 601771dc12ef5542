"""Job dependencies through the job service: one suite, run on the in-memory store and
broker (tests/unit/test_workflows_memory.py) and on PostgreSQL and Redis
(tests/integration/test_workflows_real.py). A module imports these tests and defines the
``service`` fixture: a function returning an async context manager of a JobService."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from asyncz.errors import (
    DependencyLimitError,
    DuplicateJobError,
    InvalidTransitionError,
    UnknownDependencyError,
)
from asyncz.jobs import MAX_PARENTS, Dependency, NewJob, ParentRule

Services = Callable[[], Any]


def job(ref: str | None = None, *parents: str, rule: str = "fail", **kw: Any) -> NewJob:
    deps = tuple(Dependency(p, ParentRule(rule)) for p in parents)
    values: dict[str, Any] = {"task": "echo", "payload": {"ref": ref}, "max_retries": 0}
    values.update(kw)
    return NewJob(depends_on=deps, ref=ref, **values)


def scenario(services: Services, body: Callable[[Any], Any]) -> Any:
    async def go() -> Any:
        async with services() as svc:
            return await body(svc)

    return asyncio.run(go())


async def status(svc: Any, job_id: str) -> str:
    return (await svc.get(job_id)).status.value


async def statuses(svc: Any, ids: dict[str, str]) -> dict[str, str]:
    return {ref: await status(svc, i) for ref, i in ids.items()}


async def run_ready(svc: Any, fail: set[str] = frozenset()) -> list[str]:  # type: ignore[assignment]
    """Claim what Redis holds now (one wave) and finish it (``fail``: job ids whose attempt
    fails); the ids run."""
    ran = []
    for lease in await svc.claim_next("w", ["default"], 50, 0.05, 3600):
        ran.append(lease.job_id)
        if lease.job_id in fail:
            await svc.fail(lease, "boom")
        else:
            await svc.complete(lease, {"from": lease.payload.get("ref")})
    return ran


async def diamond(svc: Any, rule: str = "fail") -> dict[str, str]:
    items = await svc.submit_many(
        [job("a"), job("b", "a"), job("c", "a"), job("d", "b", "c", rule=rule)]
    )
    return {it.ref: it.job_id for it in items}


def test_a_diamond_runs_each_job_after_its_parents(services: Services) -> None:
    async def body(svc: Any) -> None:
        ids = await diamond(svc)
        assert await statuses(svc, ids) == {
            "a": "queued", "b": "waiting", "c": "waiting", "d": "waiting"}  # fmt: skip
        assert (await svc.get(ids["d"])).open_parents == 2
        assert await run_ready(svc) == [ids["a"]]
        assert sorted(await run_ready(svc)) == sorted([ids["b"], ids["c"]])
        [lease] = await svc.claim_next("w", ["default"], 5, 0.05, 3600)
        assert lease.job_id == ids["d"] and lease.has_parents
        parents = await svc.parents_of(ids["d"])
        assert {(p["job_id"], p["ref"], p["status"]) for p in parents} == {
            (ids["b"], "b", "completed"), (ids["c"], "c", "completed")}  # fmt: skip
        assert {p["ref"]: p["result"] for p in parents} == {"b": {"from": "b"}, "c": {"from": "c"}}
        graph = await svc.graph(await svc.get(ids["a"]))
        assert {c["job_id"] for c in graph["dependents"]} == {ids["b"], ids["c"]}
        assert graph["dependents_total"] == 2 and graph["depends_on"] == []
        graph = await svc.graph(await svc.get(ids["d"]))
        assert [(p["job_id"], p["status"]) for p in graph["depends_on"]] == sorted(
            [(ids["b"], "completed"), (ids["c"], "completed")])  # fmt: skip

    scenario(services, body)


def test_a_dead_parent_ends_its_descendants_at_once_and_replay_heals_them(
    services: Services,
) -> None:
    async def body(svc: Any) -> None:
        ids = await diamond(svc)
        items = await svc.submit_many([job("e", ids["d"])])
        ids["e"] = items[0].job_id
        await run_ready(svc)  # a
        await run_ready(svc, fail={ids["b"]})  # b dead, c completed
        assert await statuses(svc, ids) == {
            "a": "completed", "b": "dead", "c": "completed", "d": "dead", "e": "dead"}  # fmt: skip
        assert (await svc.get(ids["d"])).last_error == f"parent_failed: {ids['b']}"
        assert (await svc.get(ids["e"])).last_error == f"parent_failed: {ids['d']}"
        await svc.replay(ids["b"])  # fixed: it succeeds this time
        assert await statuses(svc, {k: ids[k] for k in "bde"}) == {
            "b": "queued", "d": "waiting", "e": "waiting"}  # fmt: skip
        assert (await svc.get(ids["d"])).open_parents == 1
        assert await run_ready(svc) == [ids["b"]]
        assert await run_ready(svc) == [ids["d"]]
        assert await run_ready(svc) == [ids["e"]]
        assert set((await statuses(svc, ids)).values()) == {"completed"}

    scenario(services, body)


def test_the_dlq_bulk_replay_heals_a_graph_whose_jobs_it_replays_together(
    services: Services,
) -> None:
    async def body(svc: Any) -> None:
        ids = await diamond(svc)
        await run_ready(svc, fail={ids["a"]})
        assert set((await statuses(svc, ids)).values()) == {"dead"}
        assert sorted(await svc.replay_dead(limit=10)) == sorted(ids.values())
        assert await statuses(svc, ids) == {
            "a": "queued", "b": "waiting", "c": "waiting", "d": "waiting"}  # fmt: skip
        assert await run_ready(svc) == [ids["a"]]
        assert len(await run_ready(svc)) == 2
        assert await run_ready(svc) == [ids["d"]]

    scenario(services, body)


def test_under_run_a_child_runs_past_a_dead_parent_and_sees_its_status(
    services: Services,
) -> None:
    async def body(svc: Any) -> None:
        ids = await diamond(svc, rule="run")
        await run_ready(svc)
        await run_ready(svc, fail={ids["b"]})
        assert await status(svc, ids["d"]) == "queued"
        parents = {p["ref"]: p for p in await svc.parents_of(ids["d"])}
        assert (parents["b"]["status"], parents["b"]["last_error"]) == ("dead", "boom")
        assert parents["c"]["status"] == "completed"
        with pytest.raises(InvalidTransitionError):
            await svc.purge(ids["b"])  # not while a job depending on it is unfinished
        assert await run_ready(svc) == [ids["d"]]
        await svc.purge(ids["b"])

    scenario(services, body)


def test_cancelling_a_job_cancels_its_waiting_descendants(services: Services) -> None:
    async def body(svc: Any) -> None:
        ids = await diamond(svc)
        await svc.cancel(ids["a"])
        assert set((await statuses(svc, ids)).values()) == {"cancelled"}
        assert (await svc.get(ids["b"])).last_error == f"parent_failed: {ids['a']}"
        ids = await diamond(svc, rule="run")
        await run_ready(svc)
        await svc.cancel(ids["b"])  # queued: cancelled at once; d runs anyway (`run`)
        assert await status(svc, ids["b"]) == "cancelled"
        assert await run_ready(svc) == [ids["c"]]
        assert await run_ready(svc) == [ids["d"]]

    scenario(services, body)


def test_a_child_of_finished_parents_is_queued_or_ended_at_submit(services: Services) -> None:
    async def body(svc: Any) -> None:
        ok = (await svc.submit(job())).job_id
        bad = (await svc.submit(job())).job_id
        await run_ready(svc, fail={bad})
        assert (await svc.submit(job(None, ok))).status.value == "queued"
        born_dead = await svc.submit(job(None, bad))
        assert born_dead.status.value == "dead"
        assert (await svc.get(born_dead.job_id)).last_error == f"parent_failed: {bad}"
        assert (await svc.submit(job(None, ok, bad, rule="run"))).status.value == "queued"
        await svc.replay(bad)  # heals the child born dead
        assert await status(svc, born_dead.job_id) == "waiting"

    scenario(services, body)


def test_a_refused_submit_stores_nothing(services: Services) -> None:
    async def body(svc: Any) -> None:
        parent = (await svc.submit(job())).job_id
        before = len((await svc.list_jobs(limit=100)).items)
        ghost = str(uuid.uuid4())
        with pytest.raises(UnknownDependencyError) as err:
            await svc.submit(job(None, parent, ghost))
        assert ghost in str(err.value) and err.value.job_id == ghost
        with pytest.raises(UnknownDependencyError) as err:
            await svc.submit_many([job("x"), job("y", "x"), job("z", "later"), job("later")])
        assert err.value.index == 2
        with pytest.raises(UnknownDependencyError):
            await svc.submit_many([job("x"), job("y", "x", ghost)])
        with pytest.raises(UnknownDependencyError):
            await svc.submit(job(None, "not-an-id"))
        many = [str(uuid.uuid4()) for _ in range(MAX_PARENTS + 1)]
        with pytest.raises(DependencyLimitError):
            await svc.submit(job(None, *many))
        assert len((await svc.list_jobs(limit=100)).items) == before

    scenario(services, body)


def test_a_graph_batch_resubmitted_with_its_keys_answers_the_stored_graph(
    services: Services,
) -> None:
    async def body(svc: Any) -> None:
        batch = [job("p", idempotency_key="k-p"), job("q", "p", idempotency_key="k-q")]
        first = await svc.submit_many(batch)
        again = await svc.submit_many(batch)
        assert [i.job_id for i in again] == [i.job_id for i in first]
        assert all(i.duplicate for i in again) and [i.ref for i in again] == ["p", "q"]
        with pytest.raises(DuplicateJobError) as err:  # part of a stored graph: refused
            await svc.submit_many([job("p", idempotency_key="k-p"), job("r", "p")])
        assert err.value.job_id == first[0].job_id
        assert len((await svc.list_jobs(limit=100)).items) == 2

    scenario(services, body)


def test_recovery_releases_a_child_whose_parent_ended_unsettled(services: Services) -> None:
    async def body(svc: Any) -> None:
        ids = await diamond(svc)
        await run_ready(svc)  # a
        leases = await svc.claim_next("w", ["default"], 5, 0.05, 3600)
        # the worker dies between the completions' commit and settling the children
        await svc.store.complete_many([(lease, None) for lease in leases])
        assert await status(svc, ids["d"]) == "waiting"
        report = await svc.recover()
        assert report.released >= 1
        assert await status(svc, ids["d"]) == "queued"
        assert await run_ready(svc) == [ids["d"]]

    scenario(services, body)


def test_retention_keeps_a_parent_an_unfinished_job_needs(services: Services) -> None:
    async def body(svc: Any) -> None:
        ids = await diamond(svc)
        await run_ready(svc)  # a
        await run_ready(svc, fail={ids["b"]})  # b dead, c completed, d dead
        await svc.replay(ids["b"])  # d waits again, on b; a and c stay its inputs
        assert await svc.store.maintenance.prune_finished(0.0, 100) == 0
        assert await svc.store.maintenance.prune_dead(0.0, 100) == 0
        await run_ready(svc)
        await run_ready(svc)
        assert await status(svc, ids["d"]) == "completed"
        assert await svc.store.maintenance.prune_finished(0.0, 100) == 4

    scenario(services, body)


def test_the_idle_note_is_not_written_while_a_job_waits(services: Services) -> None:
    async def body(svc: Any) -> None:
        ids = await diamond(svc)
        await run_ready(svc)
        leases = await svc.claim_next("w", ["default"], 5, 0.05, 3600)
        await svc.store.complete_many([(lease, None) for lease in leases])  # crash: unsettled
        svc.readings.settings = svc.settings.model_copy(
            update={"recovery_idle_check_seconds": 3600}
        )
        assert await status(svc, ids["d"]) == "waiting"
        assert not await svc.note_if_idle(0, {"DLQDepth": 0.0})

    scenario(services, body)
