"""Migrations: idempotent, safe concurrently, and the schema is what the code expects."""

from __future__ import annotations

import asyncio
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import psycopg
import pytest

from asyncz.jobs import NewJob
from asyncz.settings import Settings
from asyncz.store.migrations import apply_migrations, available_migrations
from tests.support.databases import fresh_database, sibling_url
from tests.support.ledger import rows
from tests.support.settings import open_service

pytestmark = pytest.mark.integration

EXPECTED_JOBS = {
    "id": "uuid",
    "task": "text",
    "payload": "jsonb",
    "queue": "text",
    "priority": "smallint",
    "status": "text",
    "attempts": "integer",
    "attempt_base": "integer",
    "max_retries": "integer",
    "timeout_seconds": "integer",
    "idempotency_key": "text",
    "run_at": "timestamp with time zone",
    "lease_token": "uuid",
    "worker_id": "text",
    "heartbeat_at": "timestamp with time zone",
    "cancel_requested": "boolean",
    "result": "jsonb",
    "last_error": "text",
    "created_at": "timestamp with time zone",
    "started_at": "timestamp with time zone",
    "finished_at": "timestamp with time zone",
    "updated_at": "timestamp with time zone",
    "progress": "real",
    "progress_message": "text",
    "open_parents": "integer",
    "depth": "smallint",
    "has_dependents": "boolean",
    "cascade_pending": "boolean",
    "concurrency_key": "text",
    "submitted_by": "text",
    "submitted_by_key_id": "text",  # 0015: what a job belongs to is its key's id
    "unique_key": "text",
    "unique_scope": "text",
    "unique_until": "timestamp with time zone",
    "traceparent": "text",
    "tracestate": "text",
    "suspensions": "integer",  # 0018: suspended durable jobs
    "first_started_at": "timestamp with time zone",
    "suspended_for": "text",
    "woken": "boolean",  # 0019: a wait resolved while its attempt ran
    "spawned_by": "uuid",  # 0021: spawned jobs
    "spawn_depth": "smallint",
}
EXPECTED_DEPENDENCIES = {
    "child_id": "uuid",
    "parent_id": "uuid",
    "on_parent_failure": "text",
    "parent_ref": "text",
    "settled": "boolean",
    "parent_ended": "text",
}
EXPECTED_PERIODIC_RUNS = {
    "task": "text",
    "slot": "timestamp with time zone",
    "job_id": "uuid",
    "created_at": "timestamp with time zone",
}
EXPECTED_JOB_COUNTS = {"queue": "text", "status": "text", "n": "bigint"}
EXPECTED_ATTEMPTS = {
    "job_id": "uuid",
    "attempt": "integer",
    "worker_id": "text",
    "started_at": "timestamp with time zone",
    "finished_at": "timestamp with time zone",
    "outcome": "text",
    "error": "text",
    "duration_ms": "integer",
    "task": "text",  # 0014: rate windows are rebuilt from one index range per task
}

EXPECTED_STEPS = {  # 0017: durable tasks' steps
    "job_id": "uuid",
    "seq": "integer",
    "name": "text",
    "kind": "text",
    "after_name": "text",
    "status": "text",
    "result": "jsonb",
    "result_bytes": "integer",
    "error": "text",
    "attempts": "integer",
    "job_attempt": "integer",
    "started_at": "timestamp with time zone",
    "finished_at": "timestamp with time zone",
    "wait_until": "timestamp with time zone",  # 0019: waits
    "wait_key": "text",
    "pending": "integer",  # 0021: a waiting gather's jobs not ended yet
}


@pytest.fixture
def fresh_db() -> str:
    return fresh_database(sibling_url("migrate"))


def columns(url: str, table: str) -> dict[str, str]:
    return {
        r["column_name"]: r["data_type"]
        for r in rows(
            url,
            "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = %s",
            (table,),
        )
    }


def test_concurrent_migrations_apply_once_and_rerun_is_a_no_op(fresh_db: str) -> None:
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: apply_migrations(fresh_db), range(4)))
    every = [version for version, _ in available_migrations()]
    assert every[:2] == ["0001_initial", "0002_runtime_role"]
    assert sorted(v for r in results for v in r) == every
    assert apply_migrations(fresh_db) == []
    assert rows(fresh_db, "SELECT version FROM schema_migrations ORDER BY version") == [
        {"version": v} for v in every
    ]


def test_migrated_schema_is_the_expected_one(fresh_db: str) -> None:
    apply_migrations(fresh_db)
    assert columns(fresh_db, "jobs") == EXPECTED_JOBS
    assert columns(fresh_db, "job_attempts") == EXPECTED_ATTEMPTS
    assert columns(fresh_db, "periodic_runs") == EXPECTED_PERIODIC_RUNS
    assert columns(fresh_db, "job_counts") == EXPECTED_JOB_COUNTS
    assert columns(fresh_db, "job_dependencies") == EXPECTED_DEPENDENCIES
    assert columns(fresh_db, "job_steps") == EXPECTED_STEPS
    indexes = rows(fresh_db, "SELECT indexname, indexdef FROM pg_indexes "
                             "WHERE tablename = 'job_steps' ORDER BY 1")  # fmt: skip
    # a step writes one index entry (its key); only waiting rows enter the waits' index, and
    # only callbacks the tokens' index
    assert [i["indexname"] for i in indexes] == [
        "job_steps_callback_idx", "job_steps_pkey", "job_steps_waiting_idx"]  # fmt: skip
    assert "WHERE (kind = 'callback'::text)" in indexes[0]["indexdef"]
    assert "WHERE (status = 'waiting'::text)" in indexes[2]["indexdef"]
    assert columns(fresh_db, "asyncz_secrets") == {
        "name": "text", "secret": "bytea", "created_at": "timestamp with time zone"}  # fmt: skip
    [secret] = rows(fresh_db, "SELECT length(secret) AS n, "
                              "has_table_privilege('asyncz_app', 'asyncz_secrets', 'UPDATE') AS w "
                              "FROM asyncz_secrets WHERE name = 'callback_tokens'")  # fmt: skip
    assert (secret["n"], secret["w"]) == (32, False)  # the runtime role reads it only
    assert set(columns(fresh_db, "events")) == {  # 0020: events, for the waits on them
        "id", "name", "key", "wait_key", "payload", "sent_by", "sent_by_key_id", "woke",
        "pending", "created_at"}  # fmt: skip
    event_indexes = rows(fresh_db, "SELECT indexdef FROM pg_indexes WHERE tablename = 'events'")
    assert {i["indexdef"].split(" USING btree ")[1] for i in event_indexes} == {
        "(id)", "(wait_key, created_at, id)", "(created_at, id)", "(id) WHERE pending"}  # fmt: skip
    assert columns(fresh_db, "queue_pauses") == {
        "queue": "text", "paused_at": "timestamp with time zone", "paused_by": "text"}  # fmt: skip
    assert columns(fresh_db, "job_counts_folded") == {
        "one": "boolean", "folded_to": "timestamp with time zone"}  # fmt: skip
    triggers = rows(
        fresh_db,
        "SELECT tgname FROM pg_trigger WHERE tgrelid = 'jobs'::regclass AND NOT tgisinternal "
        "ORDER BY 1",
    )
    assert [t["tgname"] for t in triggers] == [
        "jobs_count_deleted", "jobs_count_inserted", "jobs_count_updated",
        "jobs_outbox_inserted", "jobs_outbox_updated",
        "jobs_reset_counts", "jobs_reset_live_counts", "jobs_uncount_deleted"]  # fmt: skip
    # 0023: the outbox of lifecycle events, one index that grows at its right edge
    assert set(columns(fresh_db, "job_outbox")) == {
        "id", "type", "job_id", "task", "queue", "status", "attempts", "submitted_at",
        "started_at", "finished_at", "submitted_by", "traceparent", "tracestate",
        "created_at"}  # fmt: skip
    outbox_indexes = rows(
        fresh_db, "SELECT indexdef FROM pg_indexes WHERE tablename = 'job_outbox'"
    )
    assert [i["indexdef"].split(" USING ")[1] for i in outbox_indexes] == ["btree (created_at)"]
    # 0024: webhooks; a secret never in the clear; only pending deliveries are due
    assert set(columns(fresh_db, "webhooks")) == {
        "id", "url", "types", "queues", "tasks", "secret", "previous_secret", "previous_until",
        "created_by", "created_by_key_id", "created_at", "rotated_at", "deleted_at"}  # fmt: skip
    assert set(columns(fresh_db, "webhook_attempts")) == {
        "id", "delivery_id", "attempt", "at", "status_code", "error", "duration_ms"}  # fmt: skip
    due = rows(fresh_db, "SELECT indexdef FROM pg_indexes "
                         "WHERE indexname = 'webhook_deliveries_due_idx'")  # fmt: skip
    assert due[0]["indexdef"].endswith("(webhook_id, next_at) WHERE (status = 'pending'::text)")
    [key] = rows(fresh_db, "SELECT length(secret) AS n FROM asyncz_secrets "
                           "WHERE name = 'webhook_secrets'")  # fmt: skip
    assert key["n"] == 32
    assert columns(fresh_db, "job_live_counts") == EXPECTED_JOB_COUNTS
    assert columns(fresh_db, "job_count_changes") == EXPECTED_JOB_COUNTS
    indexes = {
        r["indexname"]: r["indexdef"]
        for r in rows(
            fresh_db, "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'jobs'"
        )
    }
    assert "WHERE (status = 'queued'::text)" in indexes["jobs_queued_run_at_idx"]
    assert "WHERE (status = 'processing'::text)" in indexes["jobs_processing_heartbeat_idx"]
    assert "WHERE (status = 'dead'::text)" in indexes["jobs_dead_finished_idx"]
    assert "'completed'::text, 'cancelled'::text" in indexes["jobs_finished_idx"]
    # the previous release's submits name no index predicate: the constraint stays
    assert "UNIQUE" in indexes["jobs_idempotency_key_key"]
    assert "(queue, created_at DESC, id DESC)" in indexes["jobs_queue_ended_idx"]
    # cascades read bounded pages along these (settle, heal, the sweep's flagged jobs)
    assert "WHERE cascade_pending" in indexes["jobs_cascade_pending_idx"]
    assert "'parent_failed: %'" in indexes["jobs_parent_failed_idx"]
    edge_indexes = rows(
        fresh_db, "SELECT indexdef FROM pg_indexes WHERE indexname = 'job_dependencies_parent_idx'"
    )
    assert "(parent_id, settled, child_id)" in edge_indexes[0]["indexdef"]
    assert "(task, created_at DESC, id DESC)" in indexes["jobs_task_ended_idx"]
    assert "'dead'::text" in indexes["jobs_task_ended_idx"]
    assert "WHERE (status = 'waiting'::text)" in indexes["jobs_waiting_idx"]
    for name, key in (("jobs_task_backlog_idx", "task"), ("jobs_queue_backlog_idx", "queue")):
        assert f"({key}, created_at DESC, id DESC)" in indexes[name]
        assert "'waiting'::text, 'queued'::text" in indexes[name]
    assert "WHERE (submitted_by IS NOT NULL)" in indexes["jobs_submitted_by_idx"]
    assert "(submitted_by_key_id, created_at DESC" in indexes["jobs_submitted_by_key_idx"]
    assert set(columns(fresh_db, "api_keys")) >= {"name", "key_hash", "scopes", "revoked_at"}
    assert set(columns(fresh_db, "audit_log")) >= {
        "key_id", "key_name", "action", "target", "outcome"}  # fmt: skip
    # 0018: a suspended job holds its key (0027 dropped 0008's narrower index); its own
    # partial indexes hold only suspended rows
    assert "jobs_unique_hold_idx" not in indexes
    assert "UNIQUE" in indexes["jobs_unique_live_hold_idx"]
    assert "(attempt_base = 0)" in indexes["jobs_unique_live_hold_idx"]
    assert "'suspended'::text" in indexes["jobs_unique_live_hold_idx"]
    for name in ("jobs_suspended_run_at_idx", "jobs_suspended_idx", "jobs_task_suspended_idx",
                 "jobs_queue_suspended_idx"):  # fmt: skip
        assert "WHERE (status = 'suspended'::text)" in indexes[name]
    # 0021: a spawner's jobs, and its live ones (a cancel's cascade); plain rows enter neither
    assert "WHERE (spawned_by IS NOT NULL)" in indexes["jobs_spawned_by_idx"]
    assert "'suspended'::text" in indexes["jobs_spawned_live_idx"]
    # 0021: a gather's edges (settled as their jobs end), the foreign key's index with them
    assert set(columns(fresh_db, "job_gathers")) == {
        "child_id", "job_id", "seq", "position", "settled"}  # fmt: skip
    with psycopg.connect(fresh_db, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute(
                "INSERT INTO jobs (id, task, status) VALUES (gen_random_uuid(), 'x', 'weird')"
            )
        with pytest.raises(psycopg.errors.CheckViolation):
            # the counters never go below zero (a job's input bounds are the service's: 0026)
            conn.execute(
                "INSERT INTO jobs (id, task, attempts) VALUES (gen_random_uuid(), 'x', -1)"
            )
        conn.execute(
            "INSERT INTO jobs (id, task, status) VALUES (gen_random_uuid(), 'x', 'waiting')"
        )
        with pytest.raises(psycopg.errors.CheckViolation):  # processing needs a lease
            conn.execute(
                "INSERT INTO jobs (id, task, status) VALUES (gen_random_uuid(), 'x', 'processing')"
            )


def test_rows_from_before_key_ids_belong_to_the_key_that_held_the_name(fresh_db: str) -> None:
    """0015 gives each job and audit entry the id of the key of its name made before it
    (names are unique among live keys); the configured keys' rows keep none."""
    with psycopg.connect(fresh_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE schema_migrations (version text PRIMARY KEY,"
                     " applied_at timestamptz NOT NULL DEFAULT now())")  # fmt: skip
        for version, sql in available_migrations():
            if version < "0015":
                conn.execute(sql)  # type: ignore[arg-type]  # our own migration file
                conn.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (version,))
        key = "INSERT INTO api_keys (name, key_hash, scopes, created_at, revoked_at) VALUES "
        conn.execute(key + "('alice', repeat('a', 64), '{submit}', now() - interval '3 h',"
                     " now() - interval '2 h')")  # fmt: skip
        conn.execute(key + "('alice', repeat('b', 64), '{submit}', now() - interval '1 h', NULL)")
        job = "INSERT INTO jobs (id, task, submitted_by, created_at) VALUES (%s, 'x', %s, {})"
        old, new, configured = (str(uuid.uuid4()) for _ in range(3))
        conn.execute(job.format("now() - interval '150 min'"), (old, "alice"))
        conn.execute(job.format("now()"), (new, "alice"))
        conn.execute(job.format("now()"), (configured, "configured"))
        conn.execute("INSERT INTO audit_log (at, key_name, action, outcome) VALUES"
                     " (now() - interval '150 min', 'alice', 'cancel', 'ok')")  # fmt: skip
    assert "0015_owner_key_ids" in apply_migrations(fresh_db)
    ids = {r["name"] + r["key_hash"][0]: r["id"]
           for r in rows(fresh_db, "SELECT id, name, key_hash FROM api_keys")}  # fmt: skip
    owners = {
        r["id"]: r["submitted_by_key_id"]
        for r in rows(fresh_db, "SELECT id::text, submitted_by_key_id FROM jobs")
    }
    assert owners == {old: f"key-{ids['alicea']}", new: f"key-{ids['aliceb']}", configured: None}
    audit = rows(fresh_db, "SELECT key_id FROM audit_log")
    assert audit == [{"key_id": f"key-{ids['alicea']}"}]


def test_the_runtime_role_runs_the_service_and_can_change_no_schema(
    settings: Settings, pg_url: str
) -> None:
    from asyncz.store.migrations import RUNTIME_ROLE, provision_runtime_role

    provision_runtime_role(pg_url, "runtime-secret-password")
    app_url = psycopg.conninfo.make_conninfo(
        pg_url, user=RUNTIME_ROLE, password="runtime-secret-password"
    )
    as_app = settings.model_copy(update={"database_url": app_url})

    async def lifecycle() -> None:
        async with open_service(as_app) as svc:
            job = await svc.submit(NewJob(task="echo", payload={"x": 1}))
            [lease] = await svc.claim_next("w", as_app.queue_list, 1, 2.0, 3600)
            assert await svc.save_progress([(lease, 0.5, "half")]) == {job.job_id}
            assert await svc.complete(lease, {"ok": True})
            assert (await svc.get(job.job_id)).status.value == "completed"
            assert await svc.attempts(job.job_id)
            await svc.recover()
            await svc.prune()  # retention and periodic slots: the role may read and delete
            slot = datetime.now(UTC)
            await svc.store.maintenance.mark_periodic_seen("echo", slot)
            done = NewJob(task="echo", payload={}, max_retries=0, timeout_seconds=5)
            assert (
                await svc.store.maintenance.insert_periodic_job(str(uuid.uuid4()), slot, done)
                is None
            )
            assert (await svc.store.maintenance.last_periodic_runs(["echo"]))["echo"][
                "slot"
            ] == slot

    asyncio.run(lifecycle())
    with psycopg.connect(app_url, autocommit=True) as conn:
        assert conn.execute("SELECT current_user").fetchone() == (RUNTIME_ROLE,)
        conn.execute("DELETE FROM jobs")  # DML: allowed
        for ddl in (
            "DROP TABLE job_attempts",
            "ALTER TABLE jobs ADD COLUMN x int",
            "CREATE TABLE intruder (id int)",
            "TRUNCATE jobs",
            "CREATE ROLE other",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(ddl)


def test_migrating_a_database_with_jobs_counts_its_live_jobs(fresh_db: str) -> None:
    """The live counts start from the rows already there (migration 0013), and from then on
    every insert, update and delete keeps them, whatever statement makes it."""
    with psycopg.connect(fresh_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE schema_migrations (version text PRIMARY KEY,"
                     " applied_at timestamptz NOT NULL DEFAULT now())")  # fmt: skip
        for version, sql in available_migrations():
            if version < "0013":
                conn.execute(sql)  # type: ignore[arg-type]  # our own migration file
                conn.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (version,))
        conn.execute(
            "INSERT INTO jobs (id, task, queue, status, lease_token, heartbeat_at, finished_at)"
            " SELECT gen_random_uuid(), 'x', q, s,"
            "        CASE WHEN s = 'processing' THEN gen_random_uuid() END, now(), now()"
            "   FROM unnest(ARRAY['default', 'other']) q,"
            "        unnest(ARRAY['waiting', 'queued', 'queued', 'processing', 'dead',"
            "                     'completed']) s"
        )
    assert "0013_live_counts_and_backlog_indexes" in apply_migrations(fresh_db)
    live = "SELECT queue, status, sum(n)::int AS n FROM (SELECT * FROM job_live_counts"
    live += " UNION ALL SELECT * FROM job_count_changes) c GROUP BY 1, 2 HAVING sum(n) <> 0"
    truth = "SELECT queue, status, count(*)::int AS n FROM jobs"
    truth += " WHERE status NOT IN ('completed', 'cancelled') GROUP BY 1, 2"

    def same() -> None:
        assert sorted(map(tuple, (r.values() for r in rows(fresh_db, live)))) == sorted(
            map(tuple, (r.values() for r in rows(fresh_db, truth))))  # fmt: skip

    same()
    assert rows(fresh_db, "SELECT count(*)::int AS n FROM job_count_changes") == [{"n": 0}]
    rows(fresh_db, "UPDATE jobs SET status = 'dead', lease_token = NULL, queue = 'third'"
                   " WHERE status = 'queued' AND queue = 'other'")  # fmt: skip
    rows(fresh_db, "UPDATE jobs SET heartbeat_at = now()")  # no status changes: no rows
    assert rows(fresh_db, "SELECT count(*)::int AS n FROM job_count_changes") == [{"n": 2}]
    rows(fresh_db, "DELETE FROM jobs WHERE status = 'waiting'")
    same()
    rows(fresh_db, "TRUNCATE jobs CASCADE")
    assert rows(fresh_db, live) == []
