"""Typed tasks through the api Lambda handler (REST and HTTP API events) and a worker: a bad
payload refused at submit with nothing stored, a good one run with its model and its result
stored as JSON, and a queued payload an older model accepted ending in the DLQ."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from asyncz.settings import Settings
from tests.support.api_lambda import FLAVOURS, KEY, drain, job
from tests.support.apigw import handler_api
from tests.support.ledger import rows

pytestmark = pytest.mark.integration

TASKS = "tests.support.typed_app"


@pytest.fixture
def flavour() -> str:
    return "rest"


@pytest.fixture
def typed_settings(api_settings: Settings) -> Settings:
    return api_settings.model_copy(update={"task_modules": TASKS})


@pytest.fixture
def api(typed_settings: Settings, clean: None, flavour: str) -> Iterator[Any]:
    with handler_api(typed_settings, KEY, flavour) as request:
        yield request


def job_count(settings: Settings) -> int:
    return int(rows(settings.database_url, "SELECT count(*) AS n FROM jobs")[0]["n"])


@FLAVOURS
def test_a_misspelt_field_is_422_invalid_payload_naming_it_and_stores_nothing(
    api: Any, typed_settings: Settings
) -> None:
    api("POST", "/jobs", body={"task": "shout", "payload": {"text": "first"}})
    before = job_count(typed_settings)
    reply = api("POST", "/jobs", body={"task": "shout", "payload": {"txet": "hi"}})
    assert reply.status == 422 and reply.body["error"] == "invalid_payload", reply.body
    assert "payload.text" in reply.body["message"]
    assert reply.body["details"] == [
        {"field": "payload.text", "problem": "Field required", "type": "missing"}
    ]
    wrong_type = api("POST", "/jobs", body={"task": "area", "payload": {"width": "wide"}})
    assert wrong_type.status == 422 and wrong_type.body["error"] == "invalid_payload"
    assert {d["field"] for d in wrong_type.body["details"]} == {"payload.width", "payload.height"}
    assert job_count(typed_settings) == before == 1


@FLAVOURS
def test_a_batch_with_one_bad_item_is_refused_whole_naming_its_index(
    api: Any, typed_settings: Settings
) -> None:
    batch = {
        "jobs": [
            {"task": "shout", "payload": {"text": "ok"}},
            {"task": "echo", "payload": {"anything": 1}},
            {"task": "shout", "payload": {"text": "loud", "times": 99}},
        ]
    }
    reply = api("POST", "/jobs/batch", body=batch)
    assert reply.status == 422 and reply.body["error"] == "invalid_payload", reply.body
    assert reply.body["index"] == 2 and reply.body["message"].startswith("jobs[2]: ")
    assert reply.body["details"][0]["field"] == "payload.times"
    assert job_count(typed_settings) == 0


def test_a_typed_task_runs_with_its_model_and_its_result_is_stored_as_json(
    api: Any, typed_settings: Settings
) -> None:
    ids = [
        api("POST", "/jobs", body={"task": t, "payload": p}).body["job_id"]
        for t, p in [
            ("shout", {"text": "hi", "times": 2}),
            ("shout_async", {"text": "hey"}),
            ("area", {"width": 3, "height": 3}),
            ("sleep", {"seconds": 0, "ignored": "builtin payloads keep extra fields"}),
        ]
    ]
    drain(typed_settings, lambda: all(job(api, i)["status"] == "completed" for i in ids))
    results = [job(api, i)["result"] for i in ids]
    assert results[:3] == [
        {"text": "HI HI", "job_id": None},
        {"text": "HEY", "job_id": ids[1]},
        {"area": 9.0, "square": True},
    ]
    assert results[3]["interrupted"] is False
    stored = rows(typed_settings.database_url, "SELECT result FROM jobs WHERE id=%s", (ids[0],))
    assert stored == [{"result": {"text": "HI HI", "job_id": None}}]


def test_a_result_not_of_its_declared_type_fails_the_attempt_clearly(
    api: Any, typed_settings: Settings
) -> None:
    body = {"task": "shout_wrongly", "payload": {"text": "hi"}, "max_retries": 0}
    job_id = api("POST", "/jobs", body=body).body["job_id"]
    drain(typed_settings, lambda: job(api, job_id)["status"] == "dead")
    error = job(api, job_id)["last_error"]
    assert error.startswith("invalid_result: task 'shout_wrongly' returned a value that is not")
    assert "result.text: Field required" in error


def test_a_queued_payload_an_older_model_accepted_goes_to_the_dlq_and_the_worker_goes_on(
    api: Any, typed_settings: Settings
) -> None:
    old = api("POST", "/jobs", body={"task": "shout", "payload": {"text": "x"}, "max_retries": 1})
    # the job as an older ShoutIn stored it: its field was called `words`, now `text`
    rows(
        typed_settings.database_url,
        "UPDATE jobs SET payload = %s::jsonb WHERE id = %s RETURNING id",
        ('{"words": "hi"}', old.body["job_id"]),
    )
    good = api("POST", "/jobs", body={"task": "shout", "payload": {"text": "after"}}).body
    drain(
        typed_settings,
        lambda: (
            job(api, old.body["job_id"])["status"] == "dead"
            and job(api, good["job_id"])["status"] == "completed"
        ),
    )
    dead = job(api, old.body["job_id"])
    assert dead["attempts"] == 2, dead
    assert dead["last_error"].startswith("invalid_payload: payload does not fit task 'shout'")
    assert "payload.text: Field required" in dead["last_error"]
    dlq = api("GET", "/dlq").body["items"]
    assert [j["job_id"] for j in dlq] == [old.body["job_id"]]
    assert job(api, good["job_id"])["result"] == {"text": "AFTER", "job_id": None}
    attempts = api("GET", f"/jobs/{old.body['job_id']}/attempts").body["items"]
    assert [a["outcome"] for a in attempts] == ["failed", "failed"]


def test_get_tasks_lists_builtin_and_user_tasks_with_schemas_and_defaults(
    api: Any, typed_settings: Settings
) -> None:
    reply = api("GET", "/tasks")
    assert reply.status == 200, reply.body
    tasks = {t["name"]: t for t in reply.body["items"]}
    assert {"echo", "sleep", "email_send", "pdf_generate", "shout", "area"} <= set(tasks)
    shout = tasks["shout"]
    assert shout["typed"] and not shout["is_async"] and not shout["takes_context"]
    assert shout["description"] == "The text in capitals, ``times`` times."
    assert shout["payload_schema"]["required"] == ["text"]
    assert shout["payload_schema"]["properties"]["times"]["maximum"] == 10
    assert shout["result_schema"]["title"] == "ShoutOut"
    assert (shout["queue"], shout["schedule"]) == ("default", None)
    assert shout["max_retries"] == typed_settings.default_max_retries
    assert tasks["shout_async"]["is_async"] and tasks["shout_async"]["takes_context"]
    assert tasks["echo"]["typed"] is False and tasks["echo"]["payload_schema"] == {"type": "object"}
    assert tasks["echo"]["timeout_seconds"] == 30
    assert tasks["area"]["result_schema"]["properties"]["square"]["type"] == "boolean"
    assert api("GET", "/tasks", headers={"x-api-key": "wrong"}).status == 401


def test_openapi_describes_each_task_payload_and_validates_as_openapi_31(api: Any) -> None:
    from openapi_spec_validator import validate
    from openapi_spec_validator.validation import OpenAPIV31SpecValidator

    schema = api("GET", "/openapi.json").body
    validate(schema, cls=OpenAPIV31SpecValidator)
    components = schema["components"]["schemas"]
    body = schema["paths"]["/jobs"]["post"]["requestBody"]["content"]["application/json"]
    assert body["schema"] == {"$ref": "#/components/schemas/TypedSubmitJob"}
    union = components["TypedSubmitJob"]
    assert union["discriminator"]["propertyName"] == "task"
    assert union["discriminator"]["mapping"]["shout"] == "#/components/schemas/SubmitJob.shout"
    assert len(union["oneOf"]) == len(union["discriminator"]["mapping"]) >= 10
    shout = components["SubmitJob.shout"]
    assert shout["properties"]["task"] == {"const": "shout"}
    assert shout["properties"]["payload"] == {"$ref": "#/components/schemas/Task.ShoutIn"}
    assert components["Task.ShoutIn"]["required"] == ["text"]
    area = components["SubmitJob.area"]["properties"]["payload"]["$ref"]
    assert area.endswith("/Task.Rectangle")
    assert components["SubmitJob.echo"]["properties"]["payload"] == {"type": "object"}
    items = components["SubmitBatch"]["properties"]["jobs"]["items"]
    assert items == {"$ref": "#/components/schemas/TypedSubmitJob"}
    assert "/tasks" in schema["paths"]
