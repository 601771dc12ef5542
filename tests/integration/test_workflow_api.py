"""Job dependencies through the api Lambda handler (API Gateway events, REST and HTTP API):
a diamond submitted in one batch, the failure rules, replay, and refusals."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from asyncz.jobs import MAX_PARENTS
from asyncz.settings import Settings
from tests.support.api_lambda import FLAVOURS, KEY, drain, job
from tests.support.apigw import handler_api
from tests.support.ledger import rows

pytestmark = pytest.mark.integration

TASKS = "tests.support.workflow_tasks"


@pytest.fixture
def flavour() -> str:
    return "rest"


@pytest.fixture
def wf_settings(api_settings: Settings) -> Settings:
    return api_settings.model_copy(update={"task_modules": TASKS})


@pytest.fixture
def api(wf_settings: Settings, clean: None, flavour: str) -> Iterator[Any]:
    with handler_api(wf_settings, KEY, flavour) as request:
        yield request


def diamond(b_task: str = "wf_part", rule: str = "fail") -> dict[str, Any]:
    return {
        "jobs": [
            {"task": "wf_part", "payload": {"n": 1}, "ref": "a"},
            {"task": b_task, "payload": {"n": 2, "failures": 1}, "ref": "b",
             "depends_on": ["a"], "max_retries": 0},
            {"task": "wf_part", "payload": {"n": 3}, "ref": "c", "depends_on": ["a"]},
            {"task": "wf_merge", "ref": "d", "depends_on": ["b", {"job_id": "c"}],
             "on_parent_failure": rule},
        ]
    }  # fmt: skip


@FLAVOURS
def test_a_diamond_in_one_batch_runs_d_after_b_and_c_with_both_results(
    api: Any, wf_settings: Settings
) -> None:
    reply = api("POST", "/jobs/batch", body=diamond())
    assert reply.status == 202, reply.body
    refs = reply.body["refs"]
    assert [j["ref"] for j in reply.body["jobs"]] == ["a", "b", "c", "d"]
    assert [j["status"] for j in reply.body["jobs"]] == ["queued", "waiting", "waiting", "waiting"]
    d = job(api, refs["d"])
    assert (d["status"], d["open_parents"]) == ("waiting", 2)
    assert [(p["job_id"], p["ref"], p["status"]) for p in d["depends_on"]] == sorted(
        [(refs["b"], "b", "waiting"), (refs["c"], "c", "waiting")])  # fmt: skip
    waiting = api("GET", "/jobs?status=waiting").body["items"]
    assert {j["job_id"] for j in waiting} == {refs["b"], refs["c"], refs["d"]}
    assert api("GET", "/stats").body["queues"]["default"]["counts"]["waiting"] == 3

    drain(wf_settings, lambda: job(api, refs["d"])["status"] == "completed")
    d = job(api, refs["d"])
    assert d["result"]["parents"] == 2 and d["result"]["sum"] == 5
    assert d["result"]["refs"] == ["b", "c"] and d["open_parents"] == 0
    [attempt] = api("GET", f"/jobs/{refs['d']}/attempts").body["items"]
    ended = [job(api, refs[r])["finished_at"] for r in "bc"]
    assert attempt["started_at"] >= max(ended)
    a = job(api, refs["a"])
    assert {c["job_id"] for c in a["dependents"]} == {refs["b"], refs["c"]}
    assert a["dependents_total"] == 2


def test_a_dead_parent_ends_d_at_once_and_replaying_it_completes_d(
    api: Any, wf_settings: Settings
) -> None:
    refs = api("POST", "/jobs/batch", body=diamond(b_task="flaky")).body["refs"]
    drain(wf_settings, lambda: job(api, refs["d"])["status"] == "dead")
    d = job(api, refs["d"])
    assert d["last_error"] == f"parent_failed: {refs['b']}" and d["attempts"] == 0
    assert job(api, refs["c"])["status"] == "completed"
    assert refs["d"] in {j["job_id"] for j in api("GET", "/dlq").body["items"]}
    reply = api("POST", f"/dlq/{refs['b']}/replay")
    assert reply.status == 200 and reply.body["status"] == "queued", reply.body
    assert job(api, refs["d"])["status"] == "waiting"
    drain(wf_settings, lambda: job(api, refs["d"])["status"] == "completed")
    assert job(api, refs["d"])["result"]["statuses"] == {"b": "completed", "c": "completed"}


def test_under_run_d_runs_past_a_dead_parent_and_sees_its_status(
    api: Any, wf_settings: Settings
) -> None:
    refs = api("POST", "/jobs/batch", body=diamond(b_task="fail", rule="run")).body["refs"]
    drain(wf_settings, lambda: job(api, refs["d"])["status"] == "completed")
    assert job(api, refs["b"])["status"] == "dead"
    assert job(api, refs["d"])["result"]["statuses"] == {"b": "dead", "c": "completed"}


def test_cancelling_a_parent_cancels_its_waiting_children(api: Any) -> None:
    parent = api("POST", "/jobs", body={"task": "wf_part", "delay_seconds": 600}).body["job_id"]
    child = api("POST", "/jobs", body={"task": "wf_part", "depends_on": [parent]}).body
    assert child["status"] == "waiting"
    assert api("POST", f"/jobs/{parent}/cancel").status == 200
    got = job(api, child["job_id"])
    assert (got["status"], got["last_error"]) == ("cancelled", f"parent_failed: {parent}")


@FLAVOURS
def test_refused_dependencies_are_422_and_store_nothing(api: Any, wf_settings: Settings) -> None:
    parent = api("POST", "/jobs", body={"task": "wf_part"}).body["job_id"]
    ghost = str(uuid.uuid4())
    reply = api("POST", "/jobs", body={"task": "wf_part", "depends_on": [parent, ghost]})
    assert reply.status == 422 and reply.body["error"] == "unknown_dependency", reply.body
    assert reply.body["job_id"] == ghost and ghost in reply.body["message"]
    too_many = [str(uuid.uuid4()) for _ in range(MAX_PARENTS + 1)]
    reply = api("POST", "/jobs", body={"task": "wf_part", "depends_on": too_many})
    assert reply.status == 422 and reply.body["error"] == "dependency_limit", reply.body
    batch = {"jobs": [{"task": "wf_part", "ref": "x"},
                      {"task": "wf_part", "depends_on": ["x", ghost]}]}  # fmt: skip
    reply = api("POST", "/jobs/batch", body=batch)
    assert reply.status == 422 and reply.body["error"] == "unknown_dependency", reply.body
    assert reply.body["index"] == 1
    later = {"jobs": [{"task": "wf_part", "depends_on": ["y"]}, {"task": "wf_part", "ref": "y"}]}
    reply = api("POST", "/jobs/batch", body=later)
    assert reply.status == 422 and reply.body["error"] == "unknown_dependency", reply.body
    reply = api("POST", "/jobs", body={"task": "wf_part", "ref": "solo"})
    assert reply.status == 422, reply.body
    assert rows(wf_settings.database_url, "SELECT count(*) AS n FROM jobs")[0]["n"] == 1


def test_a_cancel_whose_cascade_outlives_the_call_answers_202_and_the_sweep_finishes_it(
    wf_settings: Settings, clean: None
) -> None:
    import asyncio

    from tests.support.settings import open_service

    slow = wf_settings.model_copy(update={"cascade_seconds": 0.0})
    family = {"jobs": [{"task": "wf_part", "payload": {"n": 0}, "ref": "p"}] + [
        {"task": "wf_part", "payload": {"n": i}, "depends_on": ["p"]} for i in range(1, 4)
    ]}  # fmt: skip
    with handler_api(slow, KEY, "rest") as api:
        ids = [it["job_id"] for it in api("POST", "/jobs/batch", body=family).body["jobs"]]
        reply = api("POST", f"/jobs/{ids[0]}/cancel")
        assert reply.status == 202, reply.body
        assert reply.body == {
            "job_id": ids[0], "status": "cancelled", "cancel_requested": True,
            "cascade_pending": True}  # fmt: skip
        assert job(api, ids[0])["cascade_pending"] is True
        assert {job(api, i)["status"] for i in ids[1:]} == {"waiting"}

        async def sweep() -> None:
            async with open_service(slow) as svc:
                await svc.recover()

        asyncio.run(sweep())
        assert job(api, ids[0])["cascade_pending"] is False
        assert {job(api, i)["status"] for i in ids[1:]} == {"cancelled"}
    with handler_api(wf_settings, KEY, "rest") as api:  # in time: done, and said so
        ids = [it["job_id"] for it in api("POST", "/jobs/batch", body=family).body["jobs"]]
        reply = api("POST", f"/jobs/{ids[0]}/cancel")
        assert reply.status == 200 and reply.body["cascade_pending"] is False
        assert {job(api, i)["status"] for i in ids[1:]} == {"cancelled"}


def test_a_graph_batch_naming_one_idempotency_key_twice_is_a_422_naming_both_items(
    api: Any,
) -> None:
    body = diamond()
    body["jobs"][1]["idempotency_key"] = body["jobs"][3]["idempotency_key"] = "same-key"
    reply = api("POST", "/jobs/batch", body=body)
    assert reply.status == 422, reply.body
    assert reply.body["error"] == "invalid_input" and reply.body["index"] == 3
    assert "jobs[1] and jobs[3]" in reply.body["message"]
    assert api("GET", "/jobs").body["items"] == [], "nothing of the graph is stored"
