"""The database commits, then its answer is late: the api must not claim an outcome it does
not know.

Each api sandbox runs with ``ASYNCZ_DELAY_AT`` holding the answer to one named statement
past the store's bound (``db_query_timeout_seconds``): the row is committed, the caller's
wait times out. The api then looks for the row it tried to write and answers ``202`` when it
is there (and enqueues it, so it runs without recovery); when it cannot tell, ``503
outcome_unknown`` says so and names the job, and a second try with the same idempotency key
is answered ``409`` naming the same job, which then runs. No recovery runs in these tests:
every job that completes was enqueued by the api.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.chaos import chaos_settings
from tests.support.fleet import ApiSandbox, Fleet
from tests.support.ledger import check_ledger, rows, wait_terminal
from tests.support.private_servers import RedisServer

pytestmark = pytest.mark.chaos

LATE = 2.0  # seconds an answer is held: past the 1 s bound below


def late(point: str, *more: str) -> str:
    return ",".join(f"store.after.{p}={LATE}" for p in (point, *more))


def settings_for(db: str, redis_url: str, tmp_path: Path) -> Any:
    return chaos_settings(db, redis_url, tmp_path, db_query_timeout_seconds=1.0)


def test_a_submit_whose_answer_is_late_is_answered_from_the_row_and_runs(
    chaos_db: str,
    own_redis: RedisServer,
    tmp_path: Path,
    api_factory: Callable[..., ApiSandbox],
    fleet_factory: Callable[..., Fleet],
) -> None:
    settings = settings_for(chaos_db, own_redis.url, tmp_path)
    single = api_factory(settings, ASYNCZ_DELAY_AT=late("insert_job"))
    keyed = api_factory(settings, ASYNCZ_DELAY_AT=late("insert_job_idempotent"))
    batch = api_factory(settings, ASYNCZ_DELAY_AT=late("insert_jobs"))
    fleet_factory(settings).start(concurrency=4)

    one = single.request("POST", "/jobs", {"task": "echo", "payload": {"n": 1}})
    two = keyed.request(
        "POST", "/jobs", {"task": "echo", "payload": {"n": 2}, "idempotency_key": "late-2"}
    )
    many = batch.request(
        "POST", "/jobs/batch", {"jobs": [{"task": "echo", "payload": {"n": n}} for n in (3, 4)]}
    )
    assert one and one["status"] == 202, one
    assert two and two["status"] == 202, two
    assert many and many["status"] == 202 and many["body"]["accepted"] == 2, many
    assert min(r["seconds"] for r in (one, two, many)) >= 1.0, "no answer was late"
    ids = [one["body"]["job_id"], two["body"]["job_id"]]
    ids += [item["job_id"] for item in many["body"]["jobs"]]
    stored = rows(chaos_db, "SELECT id::text AS id FROM jobs")
    assert sorted(r["id"] for r in stored) == sorted(ids), "an answer named a job not stored"
    wait_terminal(chaos_db, len(ids), 30)
    assert check_ledger(chaos_db, ids)["status"] == {"completed": len(ids)}


def test_when_the_api_cannot_tell_it_says_so_and_a_second_try_finds_the_job(
    chaos_db: str,
    own_redis: RedisServer,
    tmp_path: Path,
    api_factory: Callable[..., ApiSandbox],
    fleet_factory: Callable[..., Fleet],
) -> None:
    settings = settings_for(chaos_db, own_redis.url, tmp_path)
    # the INSERT's answer is late, and so is the look for its row
    blind = api_factory(settings, ASYNCZ_DELAY_AT=late("insert_job_idempotent", "find_jobs"))
    body = {"task": "echo", "payload": {"n": 5}, "idempotency_key": "unknown-5"}
    first = blind.request("POST", "/jobs", body)
    assert first and first["status"] == 503, first
    assert first["body"]["error"] == "outcome_unknown"
    job_id = first["body"]["job_id"]
    assert f"job {job_id} may have been stored" in first["body"]["message"]
    assert "same idempotency key is safe" in first["body"]["message"]
    assert rows(chaos_db, "SELECT id::text AS id, status FROM jobs") == [
        {"id": job_id, "status": "queued"}
    ]
    fleet_factory(settings).start(concurrency=2)
    again = blind.request("POST", "/jobs", body)
    assert again and again["status"] == 409, again
    assert again["body"]["error"] == "duplicate_idempotency_key"
    assert again["body"]["job_id"] == job_id
    # the duplicate put the queued job in Redis: it runs now, with no recovery sweep
    wait_terminal(chaos_db, 1, 30)
    assert check_ledger(chaos_db, [job_id])["status"] == {"completed": 1}


def test_an_operator_action_whose_answer_is_late_says_its_outcome_is_unknown(
    chaos_db: str,
    own_redis: RedisServer,
    tmp_path: Path,
    api_factory: Callable[..., ApiSandbox],
) -> None:
    settings = settings_for(chaos_db, own_redis.url, tmp_path)
    plain = api_factory(settings)
    job = plain.request("POST", "/jobs", {"task": "echo", "payload": {}, "delay_seconds": 3600})
    assert job and job["status"] == 202
    job_id = job["body"]["job_id"]
    blind = api_factory(settings, ASYNCZ_DELAY_AT=late("cancel_job"))
    first = blind.request("POST", f"/jobs/{job_id}/cancel")
    assert first and first["status"] == 503, first
    assert first["body"]["error"] == "outcome_unknown" and first["body"]["job_id"] == job_id
    assert "may have been done" in first["body"]["message"]
    # it was done: a second try is refused with the status that says so
    again = plain.request("POST", f"/jobs/{job_id}/cancel")
    assert again and again["status"] == 409 and again["body"]["status"] == "cancelled", again


def test_a_claim_whose_answer_is_late_runs_the_leases_it_took_without_recovery(
    chaos_db: str,
    own_redis: RedisServer,
    tmp_path: Path,
    api_factory: Callable[..., ApiSandbox],
    fleet_factory: Callable[..., Fleet],
) -> None:
    settings = settings_for(chaos_db, own_redis.url, tmp_path).model_copy(
        update={"lease_timeout_seconds": 600.0}  # recovery's lease expiry could not help here
    )
    api = api_factory(settings)
    ids = []
    for n in range(3):
        reply = api.request("POST", "/jobs", {"task": "echo", "payload": {"n": n}})
        assert reply and reply["status"] == 202, reply
        ids.append(reply["body"]["job_id"])
    fleet = fleet_factory(settings)
    worker = fleet.start(concurrency=4, env={"ASYNCZ_DELAY_AT": late("claim_jobs")})
    wait_terminal(chaos_db, len(ids), 30, "the claimed jobs to run (no recovery runs)")
    assert check_ledger(chaos_db, ids)["status"] == {"completed": len(ids)}
    attempts = rows(chaos_db, "SELECT outcome, count(*) AS n FROM job_attempt_history GROUP BY 1")
    assert attempts == [{"outcome": "completed", "n": len(ids)}], "an attempt was lost"
    assert "claim answer lost" in fleet.output(worker)[1], "the claim's answer was not late"
