"""Settings, the task registry, the built-in tasks' renderers, queries and guards."""

from __future__ import annotations

import email
import json
import threading
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from pydantic import ValidationError

from asyncz.api.guards import json_depth_exceeds
from asyncz.errors import UnknownTaskError
from asyncz.settings import Settings, SettingsError
from asyncz.store.migrations import available_migrations
from asyncz.store.queries import QUERIES
from asyncz.tasks.documents import render_email, render_pdf
from asyncz.tasks.loader import load_task_modules
from asyncz.tasks.registry import TaskContext, TaskRegistry, task

pytestmark = pytest.mark.unit


def test_settings_read_asyncz_env_and_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASYNCZ_BACKOFF_BASE_SECONDS", "2")
    monkeypatch.setenv("ASYNCZ_QUEUES", "high, default")
    s = Settings()
    assert s.backoff_base_seconds == 2.0 and s.backoff_max_seconds == 30.0
    assert s.heartbeat_seconds == 10 and s.lease_timeout_seconds == 60
    assert s.worker_concurrency == 10 and s.queue_list == ["high", "default"]


def test_settings_reject_inconsistent_values() -> None:
    with pytest.raises(ValidationError, match="BACKOFF_MAX"):
        Settings(backoff_base_seconds=10, backoff_max_seconds=1)
    with pytest.raises(ValidationError):
        Settings(worker_concurrency=0)


def test_require_for_names_what_each_function_lacks() -> None:
    with pytest.raises(SettingsError, match=r"ASYNCZ_DATABASE_URL.*ASYNCZ_REDIS_URL"):
        Settings().require_for("worker")
    base = Settings(database_url="postgresql://x/y", redis_url="redis://z")
    base.require_for("worker")
    base.require_for("recovery")
    Settings(database_url="postgresql://x/y").require_for("migrate")
    with pytest.raises(SettingsError, match="WORKER_FUNCTION_NAME"):
        base.require_for("fleet")
    with pytest.raises(SettingsError, match="API_KEY"):
        base.require_for("api")


def test_registry_defaults_context_and_unknown_tasks() -> None:
    reg = TaskRegistry()

    @task("plain", registry=reg, timeout_seconds=7)
    def plain(payload: dict[str, Any]) -> int:
        return 1

    @task("with_ctx", registry=reg, max_retries=0)
    def with_ctx(payload: dict[str, Any], ctx: TaskContext) -> int:
        return ctx.attempt

    @task("coro", registry=reg)
    async def coro(payload: dict[str, Any]) -> int:
        return 3

    ctx = TaskContext("j", 4, "default", "w", "/tmp")
    assert reg.get("plain").call({}, ctx) == 1
    assert reg.get("with_ctx").call({}, ctx) == 4
    assert reg.get("coro").is_async and not reg.get("plain").is_async
    assert reg.longest_timeout(default=300) == 300 and reg.longest_timeout(default=5) == 7
    with pytest.raises(UnknownTaskError):
        reg.get("nope")
    with pytest.raises(ValueError, match="twice"):
        reg.register("plain", lambda p: p)
    with pytest.raises(ValueError, match="max_retries is from 0 to 20"):
        reg.register("eager", lambda p: p, max_retries=21)
    with pytest.raises(ValueError, match="timeout_seconds is at least 1"):
        reg.register("hasty", lambda p: p, timeout_seconds=0)


def test_builtin_and_user_modules_load() -> None:
    reg = load_task_modules([])
    for name in ("echo", "sleep", "fail", "flaky", "email_send", "pdf_generate"):
        assert name in reg


def test_sleep_task_stops_when_cancelled() -> None:
    reg = load_task_modules([])
    ctx = TaskContext("j", 1, "default", "w", "/tmp")
    threading.Timer(0.05, ctx.cancelled.set).start()
    result = reg.get("sleep").call({"seconds": 30}, ctx)
    assert result["interrupted"] is True and result["slept"] < 5


def test_rendered_email_and_pdf_are_well_formed() -> None:
    raw = render_email(to="a@example.invalid", subject="Hi", body="Body", message_id="m1")
    msg = email.message_from_bytes(raw)
    assert msg["To"] == "a@example.invalid" and msg.get_payload().strip() == "Body"
    pdf, pages = render_pdf("Title (x)", [f"line {i}" for i in range(100)])
    assert pdf.startswith(b"%PDF-1.4") and pdf.rstrip().endswith(b"%%EOF") and pages == 3
    xref = int(pdf.rsplit(b"startxref\n", 1)[1].split(b"\n")[0])
    assert pdf[xref : xref + 4] == b"xref"
    assert b"Title \\(x\\)" in pdf


def test_named_queries_and_migrations_load_without_a_server() -> None:
    for name in (
        "insert_job",
        "claim_jobs",
        "heartbeat_jobs",
        "complete_job",
        "finish_failed_job",
        "recover_stale_leases",
        "scan_queued",
        "replay_job",
    ):
        assert (name in QUERIES and "%(" in QUERIES[name]) or name == "scan_queued"
    assert all("{" not in q for q in QUERIES.values())  # no str.format placeholders in SQL
    versions = [v for v, _ in available_migrations()]
    assert versions == sorted(versions) and versions[0] == "0001_initial"


def test_json_depth_guard_ignores_brackets_in_strings() -> None:
    assert not json_depth_exceeds(b'{"a": "[[[[[[[[[[[[[[[[[["}', limit=3)
    assert json_depth_exceeds(b"[[[[1]]]]", limit=3)
    assert not json_depth_exceeds(b'{"a": "\\"[[[[["}', limit=2)


def _depth_reference(body: bytes, limit: int) -> bool:
    """The byte-wise scan the guard replaced, kept as the oracle for valid JSON."""
    depth, in_string, escaped = 0, False, False
    for byte in body:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            if depth > limit:
                return True
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return False


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab\u00e9\n', max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=40,
)


@hypothesis_settings(max_examples=300, deadline=None)
@given(value=_json_values, limit=st.integers(min_value=0, max_value=6))
def test_json_depth_guard_agrees_with_a_byte_wise_scan(value: object, limit: int) -> None:
    body = json.dumps(value, ensure_ascii=False).encode()
    assert json_depth_exceeds(body, limit=limit) == _depth_reference(body, limit)


def test_builtin_tasks_keep_only_their_newest_artifacts(tmp_path: Any) -> None:
    from asyncz.tasks import builtin
    from asyncz.tasks.registry import TaskContext

    for i in range(builtin.MAX_ARTIFACTS_PER_FOLDER + 25):
        ctx = TaskContext(
            job_id=f"job-{i:04d}",
            attempt=1,
            queue="default",
            worker_id="w",
            artifact_dir=str(tmp_path),
        )
        builtin.email_send(builtin.EmailIn(user_id=i), ctx)
    kept = sorted(p.name for p in (tmp_path / "outbox").iterdir())
    assert len(kept) == builtin.MAX_ARTIFACTS_PER_FOLDER
    assert f"job-{builtin.MAX_ARTIFACTS_PER_FOLDER + 24:04d}.eml" in kept  # the newest stays
