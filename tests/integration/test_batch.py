"""POST /jobs/batch: all-or-nothing validation, one INSERT and one enqueue,
per-item idempotency, results in order, from REST API and HTTP API events alike."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import redis

from asyncz.settings import Settings
from tests.support.api_lambda import FLAVOURS, drain, job_row
from tests.support.apigw import drop_sandbox
from tests.support.ledger import rows

pytestmark = pytest.mark.integration


def count_jobs(settings: Settings) -> int:
    return int(rows(settings.database_url or "", "SELECT count(*) AS n FROM jobs")[0]["n"])


@FLAVOURS
def test_a_batch_is_accepted_in_order_stored_and_enqueued(api: Any, api_settings: Settings) -> None:
    jobs = [{"task": "echo", "payload": {"i": i}, "priority": i % 3} for i in range(10)]
    jobs[9] = {"task": "echo", "payload": {"i": 9}, "delay_seconds": 600}
    r = api("POST", "/jobs/batch", body={"jobs": jobs})
    assert r.status == 202, r.json()
    body = r.json()
    assert (body["accepted"], body["duplicates"], len(body["jobs"])) == (10, 0, 10)
    ids = [item["job_id"] for item in body["jobs"]]
    assert all(item == {"job_id": i, "status": "queued", "duplicate": False}
               for item, i in zip(body["jobs"], ids, strict=True))  # fmt: skip
    assert [job_row(api_settings, i)["payload"]["i"] for i in ids] == list(range(10))
    r_ = redis.Redis.from_url(api_settings.redis_url or "")
    prefix = api_settings.redis_prefix
    ready = {m.decode() for m in r_.zrange(f"{prefix}:{{default}}:ready", 0, -1)}
    delayed = {m.decode() for m in r_.zrange(f"{prefix}:{{default}}:delayed", 0, -1)}
    assert ready == set(ids[:9]) and delayed == {f"0|{ids[9]}"}


@FLAVOURS
@pytest.mark.parametrize(
    ("bad", "code"),
    [
        ({"task": "echo", "payload": {"x": "a\u0000"}}, "invalid_payload"),
        ({"task": "no_such_task"}, "unknown_task"),
        ({"task": "echo", "queue": "nowhere"}, "unknown_queue"),
        ({"payload": {}}, "missing_task"),
        ({"task": "echo", "priority": 1000}, "validation_error"),
    ],
)
def test_one_invalid_item_among_10_stores_nothing_and_names_its_index(
    api: Any, api_settings: Settings, bad: dict[str, Any], code: str
) -> None:
    jobs: list[dict[str, Any]] = [{"task": "echo", "payload": {"i": i}} for i in range(10)]
    jobs[6] = bad
    r = api("POST", "/jobs/batch", body={"jobs": jobs})
    assert r.status == 422
    body = r.json()
    assert (body["error"], body["index"]) == (code, 6)
    assert body["message"].startswith("jobs[6]: ")
    assert count_jobs(api_settings) == 0


@FLAVOURS
def test_an_existing_key_is_reported_as_duplicate_and_the_rest_accepted(
    api: Any, api_settings: Settings
) -> None:
    key = str(uuid.uuid4())
    first = api("POST", "/jobs", body={"task": "echo", "idempotency_key": key}).json()["job_id"]
    jobs = [{"task": "echo", "payload": {"i": i}} for i in range(4)]
    jobs[1]["idempotency_key"] = key
    jobs[2]["idempotency_key"] = jobs[3]["idempotency_key"] = "fresh-" + key
    r = api("POST", "/jobs/batch", body={"jobs": jobs})
    assert r.status == 202
    body = r.json()
    assert (body["accepted"], body["duplicates"]) == (2, 2)
    results = body["jobs"]
    assert results[1] == {"job_id": first, "status": "queued", "duplicate": True}
    assert results[3] == {"job_id": results[2]["job_id"], "status": "queued", "duplicate": True}
    assert not results[0]["duplicate"] and not results[2]["duplicate"]
    assert count_jobs(api_settings) == 3


@FLAVOURS
@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"jobs": []}, "validation_error"),
        ({"jobs": [{"task": "echo"}] * 501}, "batch_size"),  # 500, or 1,002 for a graph
        ({"jobs": [{"task": "echo"}] * 1003}, "validation_error"),
        ({"job": []}, "validation_error"),
    ],
)
def test_batch_size_and_shape_are_checked(
    api: Any, api_settings: Settings, body: dict[str, Any], code: str
) -> None:
    r = api("POST", "/jobs/batch", body=body)
    assert r.status == 422 and r.json()["error"] == code
    assert count_jobs(api_settings) == 0


def test_a_batch_runs_to_completion(api: Any, api_settings: Settings) -> None:
    jobs = [{"task": "echo", "payload": {"i": i}} for i in range(50)]
    ids = [j["job_id"] for j in api("POST", "/jobs/batch", body={"jobs": jobs}).json()["jobs"]]
    done = "SELECT count(*) AS n FROM jobs WHERE status = 'completed'"
    drain(api_settings, lambda: rows(api_settings.database_url or "", done)[0]["n"] == 50)
    assert job_row(api_settings, ids[7])["result"] == {"i": 7}


def test_redis_down_still_accepts_the_batch(api_settings: Settings, clean: None) -> None:
    from asyncz.api import handler as api_handler
    from tests.support.api_lambda import KEY, sandbox
    from tests.support.apigw import call

    down = api_settings.model_copy(update={"redis_url": "redis://127.0.0.1:1/0"})
    api_handler._sandbox = sandbox(down)
    try:
        r = call(api_handler.handler, "POST", "/jobs/batch", api_key=KEY,
                 body={"jobs": [{"task": "echo"}, {"task": "echo"}]})  # fmt: skip
    finally:
        drop_sandbox()
    assert r.status == 202 and r.json()["accepted"] == 2
    assert count_jobs(api_settings) == 2  # durable; recovery enqueues them


def test_openapi_describes_the_batch(api: Any) -> None:
    schema = api("GET", "/openapi.json", key=None).json()
    op = schema["paths"]["/jobs/batch"]["post"]
    assert op["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/SubmitBatch"
    )
    assert "202" in op["responses"] and op["security"] == [{"ApiKey": []}]
    assert schema["components"]["schemas"]["SubmitBatch"]["properties"]["jobs"]["maxItems"] == 1002
