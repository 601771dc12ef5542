"""The api Lambda handler driven with API Gateway proxy events (REST, and HTTP API for submits)."""

from __future__ import annotations

import json
import re
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis

from asyncz.connections import hash_api_key
from asyncz.maintenance.cost import architecture, dollars
from asyncz.prices import PRICED_ON
from asyncz.settings import Settings, get_settings
from tests.support.api_lambda import FLAVOURS, KEY, drain, job_row, make_dead, sandbox
from tests.support.apigw import EVENTS, FakeContext, call
from tests.support.ledger import rows
from tests.support.settings import make_settings

pytestmark = pytest.mark.integration

SOON = (datetime.now(UTC) + timedelta(days=40)).date().isoformat()
TOO_LATE = (datetime.now(UTC) + timedelta(days=400)).date().isoformat()
ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|\+00:00)$")


# --- submit ---------------------------------------------------------------------------------


@FLAVOURS
def test_submit_returns_202_with_id_and_location_and_enqueues(
    api: Any, api_settings: Settings
) -> None:
    r = api("POST", "/jobs", body={"task": "echo", "payload": {"a": 1}, "priority": 5})
    assert r.status == 202
    body = r.json()
    assert body["status"] == "queued" and uuid.UUID(body["job_id"])
    assert r.headers["location"] == f"/jobs/{body['job_id']}"
    row = job_row(api_settings, body["job_id"])
    assert row["task"] == "echo" and row["payload"] == {"a": 1} and row["priority"] == 5
    ready = redis.Redis.from_url(api_settings.redis_url or "").zrange(
        f"{api_settings.redis_prefix}:{{default}}:ready", 0, -1
    )
    assert ready == [body["job_id"].encode()]


@FLAVOURS
def test_seed_curl_bodies_work_verbatim(api: Any, api_settings: Settings) -> None:
    r = api("POST", "/jobs", body={"payload": {"task": "email_send", "user_id": 42}})
    assert r.status == 202
    row = job_row(api_settings, r.json()["job_id"])
    assert row["task"] == "email_send" and row["payload"] == {"task": "email_send", "user_id": 42}
    key = str(uuid.uuid4())
    seed = {
        "payload": {"task": "pdf_generate", "report_id": 7},
        "max_retries": 3,
        "idempotency_key": key,
    }
    first = api("POST", "/jobs", body=seed)
    assert first.status == 202
    assert job_row(api_settings, first.json()["job_id"])["max_retries"] == 3
    again = api("POST", "/jobs", body=seed)
    assert again.status == 409
    assert again.json()["error"] == "duplicate_idempotency_key"
    assert again.json()["job_id"] == first.json()["job_id"]
    assert again.json()["status"] == "queued"
    # and the jobs do their real work
    drain(
        api_settings,
        lambda: all(
            r["status"] == "completed"
            for r in rows(api_settings.database_url, "SELECT status FROM jobs")
        ),
    )
    done = api("GET", f"/jobs/{first.json()['job_id']}").json()
    assert done["status"] == "completed" and done["result"]["pages"] == 1
    with open(done["result"]["document_path"], "rb") as f:
        assert f.read(8) == b"%PDF-1.4"
    mail = api("GET", f"/jobs/{r.json()['job_id']}").json()["result"]
    with open(mail["message_path"], "rb") as f:
        assert b"To: user-42@example.invalid" in f.read()


@FLAVOURS
def test_idempotency_key_header_is_accepted(api: Any) -> None:
    first = api(
        "POST", "/jobs", body={"task": "echo", "payload": {}}, headers={"Idempotency-Key": "hdr-1"}
    )
    again = api(
        "POST", "/jobs", body={"task": "echo", "payload": {}}, headers={"Idempotency-Key": "hdr-1"}
    )
    assert first.status == 202 and again.status == 409
    assert again.json()["job_id"] == first.json()["job_id"]


@FLAVOURS
def test_scheduling_fields(api: Any, api_settings: Settings) -> None:
    r = api(
        "POST",
        "/jobs",
        body={
            "task": "echo",
            "payload": {},
            "delay_seconds": 60,
            "queue": "reports",
            "max_retries": 0,
            "timeout_seconds": 5,
        },
    )
    row = job_row(api_settings, r.json()["job_id"])
    assert (row["run_at"] - row["created_at"]).total_seconds() >= 59
    assert row["queue"] == "reports" and row["timeout_seconds"] == 5 and row["max_retries"] == 0
    at = api("POST", "/jobs", body={"task": "echo", "payload": {}, "run_at": f"{SOON}T00:00:00Z"})
    assert job_row(api_settings, at.json()["job_id"])["run_at"].date().isoformat() == SOON
    too_late = api("POST", "/jobs", body={"task": "echo", "run_at": f"{TOO_LATE}T00:00:00Z"})
    assert too_late.status == 422 and "365 days" in too_late.json()["message"] + str(
        too_late.json()
    )
    both = api(
        "POST",
        "/jobs",
        body={"task": "echo", "payload": {}, "delay_seconds": 1, "run_at": f"{SOON}T00:00:00Z"},
    )
    assert both.status == 422 and both.json()["error"] == "validation_error"
    naive = api("POST", "/jobs", body={"task": "echo", "payload": {}, "run_at": f"{SOON}T00:00:00"})
    assert naive.status == 422


# --- read -----------------------------------------------------------------------------------


def test_get_job_fields_unknown_and_malformed(api: Any) -> None:
    job_id = api("POST", "/jobs", body={"task": "echo", "payload": {"x": 1}}).json()["job_id"]
    body = api("GET", f"/jobs/{job_id}").json()
    for field in (
        "status",
        "task",
        "queue",
        "attempts",
        "max_retries",
        "payload",
        "result",
        "last_error",
        "created_at",
        "started_at",
        "finished_at",
        "worker_id",
    ):
        assert field in body
    assert ISO_UTC.match(body["created_at"]) and ISO_UTC.match(body["run_at"])
    missing = api("GET", f"/jobs/{UNKNOWN_JOB}")
    assert missing.status == 404 and missing.json()["error"] == "job_not_found"
    bad = api("GET", "/jobs/not-a-uuid")
    assert bad.status == 422 and bad.json()["error"] == "validation_error"
    assert bad.json()["details"][0]["field"] == "path.job_id"


def test_list_jobs_filters_and_keyset_pages_newest_first(api: Any) -> None:
    ids = [
        api("POST", "/jobs", body={"task": "echo", "payload": {"i": i}}).json()["job_id"]
        for i in range(7)
    ]
    api("POST", "/jobs", body={"task": "sleep", "payload": {}, "queue": "other"})
    seen: list[str] = []
    cursor = None
    for _ in range(5):
        q = "/jobs?task=echo&limit=3" + (f"&cursor={cursor}" if cursor else "")
        page = api("GET", q).json()
        seen += [j["job_id"] for j in page["items"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert seen == list(reversed(ids))
    other = api("GET", "/jobs?queue=other").json()["items"]
    assert [j["task"] for j in other] == ["sleep"]
    assert api("GET", "/jobs?status=completed").json()["items"] == []
    assert api("GET", "/jobs?status=bogus").status == 422
    assert api("GET", "/jobs?limit=100000000").status == 422
    forged = api("GET", "/jobs?cursor=eyJ0Ijoibm9wZSJ9")
    assert forged.status == 422 and forged.json()["error"] == "invalid_cursor"
    assert api("GET", "/jobs?cursor=%27%3B%20DROP%20TABLE%20jobs%3B--").status == 422


def test_attempts_log(api: Any, api_settings: Settings) -> None:
    job_id = api(
        "POST", "/jobs", body={"task": "flaky", "payload": {"failures": 1}, "max_retries": 2}
    ).json()["job_id"]
    drain(api_settings, lambda: job_row(api_settings, job_id)["status"] == "completed")
    log = api("GET", f"/jobs/{job_id}/attempts").json()
    assert log["job_id"] == job_id
    assert [a["outcome"] for a in log["items"]] == ["failed", "completed"]
    assert "flaky failure 1 of 1" in log["items"][0]["error"]
    assert api("GET", f"/jobs/{UNKNOWN_JOB}/attempts").status == 404


# --- cancel ---------------------------------------------------------------------------------


def test_cancel_queued_now_running_at_next_heartbeat_terminal_409(
    api: Any, api_settings: Settings
) -> None:
    queued = api("POST", "/jobs", body={"task": "echo", "payload": {}, "delay_seconds": 300})
    r = api("POST", f"/jobs/{queued.json()['job_id']}/cancel")
    assert r.status == 200 and r.json()["status"] == "cancelled"
    again = api("POST", f"/jobs/{queued.json()['job_id']}/cancel")
    assert again.status == 409 and again.json()["error"] == "invalid_state"
    assert api("POST", f"/jobs/{UNKNOWN_JOB}/cancel").status == 404

    running = api("POST", "/jobs", body={"task": "sleep", "payload": {"seconds": 60}})
    job_id = running.json()["job_id"]

    def cancel_when_running() -> bool:
        status = job_row(api_settings, job_id)["status"]
        if status == "processing" and not getattr(cancel_when_running, "sent", False):
            reply = api("POST", f"/jobs/{job_id}/cancel")
            assert reply.json() == {
                "job_id": job_id,
                "status": "processing",
                "cancel_requested": True,
                "cascade_pending": False,
            }
            cancel_when_running.sent = True  # type: ignore[attr-defined]
        return status == "cancelled"

    drain(api_settings, cancel_when_running)
    final = api("GET", f"/jobs/{job_id}").json()
    assert final["status"] == "cancelled"
    outcomes = [a["outcome"] for a in api("GET", f"/jobs/{job_id}/attempts").json()["items"]]
    assert outcomes == ["cancelled"]


# --- DLQ ------------------------------------------------------------------------------------


def test_dlq_list_replay_purge(api: Any, api_settings: Settings) -> None:
    ids = make_dead(api, api_settings, 5)
    page1 = api("GET", "/dlq?limit=3").json()
    page2 = api("GET", f"/dlq?limit=3&cursor={page1['next_cursor']}").json()
    listed = [j["job_id"] for j in page1["items"] + page2["items"]]
    assert sorted(listed) == sorted(ids) and len(set(listed)) == 5
    assert page1["items"][0]["last_error"].startswith("TaskFailedError: m")

    one = api("POST", f"/dlq/{ids[0]}/replay")
    assert one.status == 200 and one.json()["status"] == "queued"
    assert api("POST", f"/dlq/{ids[0]}/replay").status == 409
    assert api("POST", f"/dlq/{UNKNOWN_JOB}/replay").status == 404

    bulk = api("POST", "/dlq/replay", body={"task": "fail", "limit": 2})
    assert bulk.status == 200 and bulk.json()["replayed"] == 2
    assert api("POST", "/dlq/replay", body={"limit": 5000}).status == 422

    gone = ids[-1] if ids[-1] not in bulk.json()["job_ids"] else ids[-2]
    assert api("DELETE", f"/dlq/{gone}").status == 204
    assert api("GET", f"/jobs/{gone}").status == 404
    assert api("DELETE", f"/dlq/{ids[0]}").status == 409  # queued again, not dead
    remaining = api("GET", "/dlq").json()["items"]
    assert len(remaining) == 1


# --- health, stats --------------------------------------------------------------------------


def test_health_ok_without_key_and_503_when_redis_is_down(api: Any, api_settings: Settings) -> None:
    make_dead(api, api_settings, 1)
    ok = api("GET", "/health", key=None)
    assert ok.status == 200
    assert ok.json() == {
        "status": "ok",
        "dependencies": {"postgres": "ok", "redis": "ok"},
    }
    broken = make_settings(
        api_settings.database_url or "", "redis://127.0.0.1:1/0", redis_socket_timeout_seconds=0.5
    )
    adapter = sandbox(broken)
    down = call(adapter, "GET", "/health")
    assert down.status == 503
    assert down.json()["dependencies"] == {"redis": "down", "postgres": "ok"}  # no error text


def test_stats_per_queue(api: Any, api_settings: Settings) -> None:
    api("POST", "/jobs", body={"task": "echo", "payload": {}})
    api("POST", "/jobs", body={"task": "echo", "payload": {}, "delay_seconds": 100})
    api("POST", "/jobs", body={"task": "echo", "payload": {}, "queue": "q2"})
    stats = api("GET", "/stats").json()
    default = stats["queues"]["default"]
    assert default["counts"]["queued"] == 2 and default["ready"] == 1 and default["delayed"] == 1
    assert stats["queues"]["q2"]["ready"] == 1
    assert default["oldest_queued_age_seconds"] >= 0
    assert stats["live_workers"] == 0


def test_stats_estimates_the_cost_of_the_last_hour_and_day(
    api: Any, api_settings: Settings
) -> None:
    for _ in range(2):
        api("POST", "/jobs", body={"task": "echo", "payload": {}})
    batch = {"jobs": [{"task": "echo", "payload": {}}] * 3}
    assert api("POST", "/jobs/batch", body=batch).status == 202
    url = api_settings.database_url or ""
    rows(url, "UPDATE jobs SET created_at = now() - interval '2 hours' WHERE id IN "
              "(SELECT id FROM jobs ORDER BY created_at LIMIT 1)")  # fmt: skip
    # a completed attempt is its job's row; one that failed has a row of job_attempts
    rows(url, "UPDATE jobs SET status = 'completed', attempts = 1, started_at = now() - "
              "interval '2.5 s', finished_at = now() WHERE id IN (SELECT id FROM jobs "
              "ORDER BY created_at DESC LIMIT 1)")  # fmt: skip
    rows(url, "INSERT INTO job_attempts (job_id, attempt, started_at, finished_at, outcome) "
              "SELECT id, 1, now() - interval '1 s', now(), 'failed' "
              "FROM jobs ORDER BY created_at DESC OFFSET 1 LIMIT 1")  # fmt: skip
    cost = api("GET", "/stats").json()["cost"]
    hour, day = cost["last_hour"], cost["last_day"]
    # a batch is one request: its jobs share their transaction's created_at
    assert {k: hour[k] for k in ("jobs", "requests", "attempts")} == {
        "jobs": 4, "requests": 2, "attempts": 2
    }  # fmt: skip
    assert {k: day[k] for k in ("jobs", "requests", "attempts")} == {
        "jobs": 5, "requests": 3, "attempts": 2
    }  # fmt: skip
    assert abs(hour["attempt_seconds"] - 3.5) < 0.01
    expected = dollars(hour, front="rest", arch=architecture(), concurrency=10)
    assert hour["dollars"] == round(expected, 6) and 0 < hour["dollars"] < day["dollars"]
    assert cost["estimate"] is True and cost["api"] == "rest"
    assert cost["prices_of"] == PRICED_ON and "us-east-1" in cost["source"]


# --- auth and bad input ---------------------------------------------------------------------

UNKNOWN_JOB = "00000000-0000-4000-8000-000000000001"  # a fixed id: test ids match on every worker
ENDPOINTS = [
    ("POST", "/jobs"),
    ("GET", "/jobs"),
    ("GET", f"/jobs/{UNKNOWN_JOB}"),
    ("GET", f"/jobs/{UNKNOWN_JOB}/attempts"),
    ("POST", f"/jobs/{UNKNOWN_JOB}/cancel"),
    ("GET", "/dlq"),
    ("POST", f"/dlq/{UNKNOWN_JOB}/replay"),
    ("POST", "/dlq/replay"),
    ("DELETE", f"/dlq/{UNKNOWN_JOB}"),
    ("GET", "/stats"),
    ("GET", "/tasks"),
]


@FLAVOURS
@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
def test_every_endpoint_but_health_needs_the_key(api: Any, method: str, path: str) -> None:
    body = {"task": "echo", "payload": {}} if method == "POST" else None
    for key in (None, "wrong", KEY + "x", ""):
        r = api(method, path, key=key, body=body)
        assert r.status == 401, (key, r.body)
        assert r.json()["error"] == "unauthorized"
    assert rows(api_settings_db(api), "SELECT count(*) AS n FROM jobs") == [{"n": 0}]


def api_settings_db(_: Any) -> str:
    return get_settings().database_url or ""


@FLAVOURS
def test_bad_input_gets_clear_4xx_and_loses_nothing(api: Any, api_settings: Settings) -> None:
    unknown = api("POST", "/jobs", body={"task": "no_such_task", "payload": {}})
    assert unknown.status == 422 and unknown.json()["error"] == "unknown_task"
    no_task = api("POST", "/jobs", body={"payload": {"user_id": 1}})
    assert no_task.status == 422 and no_task.json()["error"] == "missing_task"
    big = api("POST", "/jobs", body={"task": "echo", "payload": {"blob": "x" * 70_000}})
    assert big.status == 413 and big.json()["error"] == "payload_too_large"
    text = api("POST", "/jobs", raw_body=b"task=echo", headers={"Content-Type": "text/plain"})
    assert text.status == 415 and text.json()["error"] == "unsupported_media_type"
    broken = api(
        "POST", "/jobs", raw_body=b'{"task": "echo", ', headers={"Content-Type": "application/json"}
    )
    assert broken.status == 422 and broken.json()["error"] == "invalid_json"
    latin = api(
        "POST",
        "/jobs",
        raw_body=b'{"task": "echo", "payload": {"a": "\xff\xfe"}}',
        headers={"Content-Type": "application/json"},
    )
    assert latin.status == 422
    deep = api(
        "POST",
        "/jobs",
        raw_body=b'{"task":"echo","payload":' + b'{"a":' * 100_000 + b"1" + b"}" * 100_001,
        headers={"Content-Type": "application/json"},
    )
    assert deep.status in (413, 422)
    nested = api(
        "POST",
        "/jobs",
        raw_body=b'{"task":"echo","payload":' + b'{"a":' * 70 + b"1" + b"}" * 71,
        headers={"Content-Type": "application/json"},
    )
    assert nested.status == 422 and nested.json()["error"] == "json_too_deep"
    extra = api("POST", "/jobs", body={"task": "echo", "payload": {}, "surprise": 1})
    assert extra.status == 422 and extra.json()["details"][0]["field"] == "body.surprise"
    retries = api("POST", "/jobs", body={"task": "echo", "payload": {}, "max_retries": 21})
    assert retries.status == 422 and "max_retries" in retries.json()["message"]
    not_object = api("POST", "/jobs", body={"task": "echo", "payload": [1, 2]})
    assert not_object.status == 422
    nul = api("POST", "/jobs", body={"task": "echo", "payload": {"a": "x\u0000y"}})
    assert nul.status == 422 and nul.json()["error"] == "invalid_payload"
    nan = api(
        "POST",
        "/jobs",
        raw_body=b'{"task": "echo", "payload": {"a": [1, NaN]}}',
        headers={"Content-Type": "application/json"},
    )
    assert nan.status == 422 and nan.json()["error"] == "invalid_payload"
    nul_key = api("POST", "/jobs", body={"task": "echo", "payload": {}, "idempotency_key": "a\x00"})
    assert nul_key.status == 422
    nul_query = api("GET", "/jobs?queue=a%00b")
    assert nul_query.status == 422 and nul_query.json()["error"] == "invalid_input"
    assert rows(api_settings.database_url, "SELECT count(*) AS n FROM jobs") == [{"n": 0}]


@FLAVOURS
def test_sql_looking_strings_are_stored_verbatim(api: Any, api_settings: Settings) -> None:
    evil = "'; DROP TABLE jobs; -- \" OR 1=1 /* %s %(id)s $1"
    r = api(
        "POST",
        "/jobs",
        body={
            "task": "echo",
            "payload": {"q": evil, evil: evil},
            "queue": "q'1",
            "idempotency_key": evil,
        },
    )
    assert r.status == 422  # the queue name is restricted; nothing else is
    r = api(
        "POST",
        "/jobs",
        body={"task": "echo", "payload": {"q": evil, evil: evil}, "idempotency_key": evil},
    )
    assert r.status == 202
    got = api("GET", f"/jobs/{r.json()['job_id']}").json()
    assert got["payload"] == {"q": evil, evil: evil} and got["idempotency_key"] == evil
    assert api("GET", "/jobs?task=" + "%27%20OR%201%3D1--").json()["items"] == []


def counting_waker() -> tuple[list[int], Any]:
    """A worker wake that only counts its calls."""
    woken: list[int] = []

    async def waker() -> None:
        woken.append(1)

    return woken, waker


@FLAVOURS
def test_wake_worker_once_for_a_burst_when_none_is_alive(
    api_settings: Settings, clean: None, flavour: str
) -> None:
    woken, waker = counting_waker()
    adapter = sandbox(api_settings, waker)
    for _ in range(5):
        assert (
            call(
                adapter,
                "POST",
                "/jobs",
                body={"task": "echo", "payload": {}},
                api_key=KEY,
                flavour=flavour,
            ).status
            == 202
        )
    assert woken == [1]


@FLAVOURS
def test_resuming_a_queue_starts_a_worker_for_what_it_holds(
    api_settings: Settings, clean: None, flavour: str
) -> None:
    woken, waker = counting_waker()
    # a scale-out decision every 50 ms (the default: one a second across the deployment)
    adapter = sandbox(api_settings.model_copy(update={"scale_out_seconds": 0.05}), waker)

    def post(path: str, body: dict[str, Any] | None = None) -> int:
        return call(adapter, "POST", path, body=body or {}, api_key=KEY, flavour=flavour).status

    assert post("/queues/default/pause") == 200
    assert post("/jobs", {"task": "echo", "payload": {}}) == 202
    assert woken == []  # its queue is paused: no worker would take it
    time.sleep(0.1)  # the next decision's turn
    assert post("/queues/default/resume") == 200
    assert woken == [1]  # at once, not at the fleet's next tick


@FLAVOURS
def test_handler_event_shape_and_base64_body(
    api_settings: Settings, clean: None, flavour: str
) -> None:
    event = EVENTS[flavour](
        "POST",
        "/jobs",
        raw_body=json.dumps({"task": "echo", "payload": {"é": "ü"}}).encode(),
        api_key=KEY,
        headers={"Content-Type": "application/json; charset=utf-8"},
    )
    import base64

    event["body"] = base64.b64encode(event["body"].encode()).decode()
    event["isBase64Encoded"] = True
    out = sandbox(api_settings)(event, FakeContext())
    assert out["statusCode"] == 202
    assert json.loads(out["body"])["status"] == "queued"


@FLAVOURS
def test_submit_survives_redis_outage_with_202(
    api_settings: Settings, clean: None, flavour: str
) -> None:
    broken = make_settings(
        api_settings.database_url or "",
        "redis://127.0.0.1:1/0",
        redis_socket_timeout_seconds=0.5,
        api_key_hashes=hash_api_key(KEY),
    )
    adapter = sandbox(broken)
    r = call(
        adapter, "POST", "/jobs", body={"task": "echo", "payload": {}}, api_key=KEY, flavour=flavour
    )
    assert r.status == 202
    assert job_row(api_settings, r.json()["job_id"])["status"] == "queued"


@FLAVOURS
def test_postgres_down_gives_503_with_a_clear_error(
    api_settings: Settings, clean: None, flavour: str
) -> None:
    broken = make_settings(
        "postgresql://postgres@127.0.0.1:1/none",
        api_settings.redis_url or "",
        db_connect_timeout_seconds=1,
        api_key_hashes=hash_api_key(KEY),
    )
    adapter = sandbox(broken)
    r = call(
        adapter, "POST", "/jobs", body={"task": "echo", "payload": {}}, api_key=KEY, flavour=flavour
    )
    assert r.status == 503 and r.json()["error"] == "database_unavailable"
    assert call(adapter, "GET", "/health").status == 503


@FLAVOURS
def test_key_rotation_old_key_is_refused_once_removed(
    api_settings: Settings, clean: None, flavour: str
) -> None:
    old, new = "old-key-" + "o" * 20, "new-key-" + "n" * 20
    both = api_settings.model_copy(
        update={"api_key_hashes": f"{hash_api_key(old)},{hash_api_key(new)}"}
    )
    during = sandbox(both)
    for key in (old, new):
        assert call(during, "GET", "/stats", api_key=key).status == 200
    after = sandbox(api_settings.model_copy(update={"api_key_hashes": hash_api_key(new)}))
    assert call(after, "GET", "/stats", api_key=new).status == 200
    refused = call(
        after, "POST", "/jobs", api_key=old, body={"task": "echo", "payload": {}}, flavour=flavour
    )
    assert refused.status == 401 and refused.json()["error"] == "unauthorized"
    assert call(after, "GET", "/health", api_key=old).status == 200  # health needs no key
