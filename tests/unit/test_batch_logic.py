"""The service's batch submit on the in-memory store and broker: defaults and
validation per item (an error names its index, nothing is stored), per-item idempotency,
one enqueue after the commit, and a crash in between left to recovery."""

from __future__ import annotations

import asyncio

import pytest

from asyncz.errors import BatchSizeError, InvalidInputError, UnknownQueueError, UnknownTaskError
from asyncz.jobs import NewJob
from asyncz.testing import MemoryBroker, MemoryStore
from tests.support.memory import service

pytestmark = pytest.mark.unit


def test_an_unknown_task_or_queue_names_its_index_and_stores_nothing() -> None:
    svc = service()
    jobs = [NewJob(task="echo", payload={"i": i}) for i in range(10)]
    jobs[4] = NewJob(task="nope", payload={})
    with pytest.raises(UnknownTaskError) as info:
        asyncio.run(svc.submit_many(jobs))
    assert info.value.index == 4 and str(info.value).startswith("jobs[4]: ")
    jobs[4] = NewJob(task="echo", payload={}, queue="elsewhere")
    with pytest.raises(UnknownQueueError) as queue_info:
        asyncio.run(svc.submit_many(jobs))
    assert queue_info.value.index == 4
    assert isinstance(svc.store, MemoryStore) and svc.store.jobs == {}


OUT_OF_BOUNDS = [
    ({"priority": 101}, "priority"), ({"priority": -101}, "priority"),
    ({"max_retries": 21}, "max_retries"), ({"max_retries": -1}, "max_retries"),
    ({"timeout_seconds": -5}, "timeout_seconds"),
    ({"concurrency_key": ""}, "concurrency_key"),
    ({"concurrency_key": "k" * 201}, "concurrency_key"),
    ({"unique_key": "u" * 201}, "unique_key"), ({"tracestate": "s" * 513}, "tracestate"),
    ({"traceparent": "00-" + "1" * 51}, "traceparent"),
]  # fmt: skip


@pytest.mark.parametrize(("fields", "named"), OUT_OF_BOUNDS)
def test_a_value_out_of_a_jobs_bounds_is_refused_by_name_and_stores_nothing(
    fields: dict[str, object], named: str
) -> None:
    """The service holds a job's bounds for every path (the table checks none of them):
    a single submit and a batch item alike, before anything is written."""
    svc = service()
    bad = NewJob(task="echo", payload={}, **fields)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=named):
        asyncio.run(svc.submit(bad))
    with pytest.raises(InvalidInputError, match=named) as info:
        asyncio.run(svc.submit_many([NewJob(task="echo", payload={}), bad]))
    assert info.value.index == 1
    assert isinstance(svc.store, MemoryStore) and svc.store.jobs == {}


def test_the_edges_of_a_jobs_bounds_are_stored() -> None:
    svc = service()
    edges = [{"priority": 100, "max_retries": 0}, {"priority": -100, "max_retries": 20},
             {"concurrency_key": "k" * 200, "unique_key": "u" * 200, "tracestate": "s" * 512,
              "traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}]  # fmt: skip
    for fields in edges:
        asyncio.run(svc.submit(NewJob(task="echo", payload={}, **fields)))  # type: ignore[arg-type]
    assert isinstance(svc.store, MemoryStore) and len(svc.store.jobs) == 3


@pytest.mark.parametrize("n", [0, 501])
def test_a_batch_holds_1_to_500_jobs(n: int) -> None:
    with pytest.raises(BatchSizeError):
        asyncio.run(service().submit_many([NewJob(task="echo", payload={})] * n))


def test_duplicates_carry_the_existing_job_and_the_rest_are_enqueued_once() -> None:
    svc = service()
    first = asyncio.run(svc.submit(NewJob(task="echo", payload={}, idempotency_key="k")))
    items = asyncio.run(svc.submit_many([
        NewJob(task="echo", payload={"a": 1}),
        NewJob(task="echo", payload={}, idempotency_key="k"),
        NewJob(task="sleep", payload={}, delay_seconds=60),
    ]))  # fmt: skip
    assert [it.duplicate for it in items] == [False, True, False]
    assert items[1].job_id == first.job_id and items[1].status == "queued"
    broker = svc.broker
    assert isinstance(broker, MemoryBroker)
    assert set(broker.ready["default"]) == {first.job_id, items[0].job_id}
    assert [m.split("|")[1] for m in broker.delayed["default"]] == [items[2].job_id]
    job = asyncio.run(svc.get(items[0].job_id or ""))
    assert job.max_retries == 3 and job.timeout_seconds == 30  # defaults were filled
    # no metric line per submit: recovery counts the submitted jobs once a minute
    assert "JobsSubmitted" not in svc.metrics.seen  # type: ignore[attr-defined]


def test_a_crash_between_the_commit_and_the_enqueue_is_recovered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Crash(BaseException):
        pass

    def crash(name: str) -> None:
        if name == "submit.after_commit":
            raise Crash

    svc = service()
    monkeypatch.setattr("asyncz.service.submitting.crash_point", crash)
    with pytest.raises(Crash):
        asyncio.run(svc.submit_many([NewJob(task="echo", payload={"i": i}) for i in range(5)]))
    assert isinstance(svc.store, MemoryStore) and len(svc.store.jobs) == 5
    assert isinstance(svc.broker, MemoryBroker) and not svc.broker.ready.get("default")
    asyncio.run(svc.recover())
    assert set(svc.broker.ready["default"]) == set(svc.store.jobs)
