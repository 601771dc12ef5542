"""The ``asyncz`` ops commands against a stand-in API (stdlib HTTP server, no database)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from asyncz import cli
from tests.support.fake_api import FakeApi

pytestmark = pytest.mark.unit

JOB = {
    "job_id": "5d1c2f7e-0b7a-4a43-9f5e-7d1f0c1e2a3b",
    "task": "echo",
    "queue": "default",
    "status": "completed",
    "attempts": 1,
    "created_at": "2026-12-02T11:59:56.123456Z",
    "finished_at": "2026-12-02T11:59:57.000000Z",
    "result": {"hello": "world"},
}


def test_submit_posts_the_job_with_the_key(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    api.routes[("POST", "/jobs")] = (202, {"job_id": JOB["job_id"], "status": "queued"})
    code = cli.main(
        [
            "submit",
            "echo",
            '{"a": 1}',
            "--queue",
            "q1",
            "--max-retries",
            "2",
            "--idempotency-key",
            "idem-1",
        ]
    )
    assert code == 0
    sent = api.requests[-1]
    assert sent["key"] == "k-123"
    assert sent["body"] == {
        "task": "echo",
        "payload": {"a": 1},
        "queue": "q1",
        "max_retries": 2,
        "idempotency_key": "idem-1",
    }
    assert capsys.readouterr().out.split() == [JOB["job_id"], "queued"]


def test_submit_with_a_unique_key_says_which_job_holds_it(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    held = {"job_id": JOB["job_id"], "status": "queued", "duplicate": True, "debounced": True}
    api.routes[("POST", "/jobs")] = (200, held)
    code = cli.main(["submit", "echo", "--unique-key", "digest:7", "--debounce",
                     "--delay-seconds", "60", "--unique-scope", "queued"])  # fmt: skip
    assert code == 0
    body = api.requests[-1]["body"]
    assert (body["unique_key"], body["unique_scope"], body["debounce"]) == (
        "digest:7", "queued", True)  # fmt: skip
    assert capsys.readouterr().out.split() == [
        JOB["job_id"], "queued", "(debounced:", "unique", "key", "digest:7", "held)"]  # fmt: skip
    assert cli.main(["submit", "echo", "--unique-key", "k", "--unique-for", "60", "--json"]) == 0
    assert api.requests[-1]["body"]["unique_for"] == 60
    assert json.loads(capsys.readouterr().out)["duplicate"] is True


def test_status_wait_polls_until_terminal(api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    path = f"/jobs/{JOB['job_id']}"
    api.routes[("GET", path)] = [
        (200, {**JOB, "status": "queued", "attempts": 0}),
        (200, {**JOB, "status": "processing"}),
        (200, JOB),
    ]
    code = cli.main(["status", JOB["job_id"], "--wait", "--interval", "0.01"])
    out = capsys.readouterr()
    assert code == 0
    assert [r["path"] for r in api.requests] == [path] * 3
    assert "queued" in out.err and "processing" in out.err  # progress on stderr
    assert "completed" in out.out and '{"hello":"world"}' in out.out


def test_status_wait_exits_non_zero_for_dead_jobs(api: FakeApi) -> None:
    api.routes[("GET", f"/jobs/{JOB['job_id']}")] = (200, {**JOB, "status": "dead"})
    assert cli.main(["status", JOB["job_id"], "--wait", "--json"]) == 1


def test_list_prints_a_table_and_follows_pages(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    second = {**JOB, "job_id": "00000000-0000-0000-0000-000000000002", "status": "queued"}
    api.routes[("GET", "/jobs")] = [
        (200, {"items": [JOB], "next_cursor": "c2"}),
        (200, {"items": [second], "next_cursor": None}),
    ]
    assert cli.main(["list", "--status", "completed", "--limit", "1", "--all"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["JOB", "ID", "TASK", "QUEUE"]
    assert JOB["job_id"] in lines[1] and "2026-12-02 11:59:56" in lines[1]
    assert second["job_id"] in lines[2]
    assert api.requests[0]["query"] == "status=completed&limit=1"
    assert api.requests[1]["query"] == "status=completed&limit=1&cursor=c2"


def test_json_output_is_the_api_payload(api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    stats = {
        "queues": {
            "default": {
                "counts": {"queued": 2, "dead": 1},
                "ready": 2,
                "delayed": 0,
                "oldest_queued_age_seconds": 1.5,
                "paused": False,
            }
        },
        "live_workers": 3,
        "limits": [],
        "cost": {"estimate": True, "last_hour": {"dollars": 0.0012}, "prices_of": "2026-12-04"},
    }
    api.routes[("GET", "/stats")] = (200, stats)
    assert cli.main(["stats", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == stats
    assert cli.main(["--json", "stats"]) == 0  # a global flag before the command too
    assert json.loads(capsys.readouterr().out) == stats
    assert cli.main(["stats"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["QUEUE", "DEAD", "QUEUED", "READY", "DELAYED", "OLDEST", "QUEUED"]
    assert table[1].split() == ["default", "1", "2", "2", "0", "1.5s"]
    assert table[2] == "live workers: 3"
    assert table[3] == (
        "est. cost: $0.0012 last hour (prices of 2026-12-04, without fixed monthly costs)"
    )


def test_replay_cancel_and_purge_hit_their_endpoints(api: FakeApi) -> None:
    jid = JOB["job_id"]
    api.routes[("POST", f"/dlq/{jid}/replay")] = (200, {"job_id": jid, "status": "queued"})
    api.routes[("POST", "/dlq/replay")] = (200, {"replayed": 1, "job_ids": [jid]})
    api.routes[("POST", f"/jobs/{jid}/cancel")] = (200, {"job_id": jid, "status": "cancelled"})
    api.routes[("DELETE", f"/dlq/{jid}")] = (204, None)
    assert cli.main(["replay", jid]) == 0
    assert cli.main(["replay", "--all"]) == 0
    assert cli.main(["cancel", jid]) == 0
    assert cli.main(["purge", jid]) == 0
    assert [(r["method"], r["path"]) for r in api.requests] == [
        ("POST", f"/dlq/{jid}/replay"),
        ("POST", "/dlq/replay"),
        ("POST", f"/jobs/{jid}/cancel"),
        ("DELETE", f"/dlq/{jid}"),
    ]


def test_api_errors_are_reported_with_their_code(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    api.routes[("POST", "/jobs")] = (422, {"error": "unknown_task", "message": "no task 'nope'"})
    assert cli.main(["submit", "nope"]) == 1
    assert capsys.readouterr().err.strip() == "error: HTTP 422 unknown_task: no task 'nope'"


def test_unreachable_api_says_what_to_do(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ASYNCZ_API_URL", "http://127.0.0.1:9")
    assert cli.main(["stats"]) == 1
    assert "is `asyncz dev` running?" in capsys.readouterr().err


def test_bad_payload_is_a_usage_error(api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["submit", "echo", "{not json"]) == 2
    assert "PAYLOAD is not JSON" in capsys.readouterr().err
    assert api.requests == []


@pytest.fixture
def migrations(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, Any]]]:
    """What ``asyncz migrate`` did to the database: ("apply", conninfo), ("outbox", on)."""
    from asyncz.settings import get_settings

    seen: list[tuple[str, Any]] = []

    def fake_apply(conninfo: str) -> list[str]:
        seen.append(("apply", conninfo))
        return ["0001_initial"]

    def fake_switch(conninfo: str, on: bool) -> bool:
        seen.append(("outbox", on))
        return not on  # a database migrated with its outbox on

    monkeypatch.setattr("asyncz.store.migrations.apply_migrations", fake_apply)
    monkeypatch.setattr("asyncz.store.migrations.set_outbox", fake_switch)
    monkeypatch.delenv("ASYNCZ_OUTBOX", raising=False)
    get_settings.cache_clear()
    yield seen
    get_settings.cache_clear()


def test_migrate_applies_migrations_to_the_given_url(
    migrations: list[tuple[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["migrate", "--database-url", "postgresql://x@h/db"]) == 0
    assert migrations == [("apply", "postgresql://x@h/db"), ("outbox", True)]
    assert capsys.readouterr().out.strip() == "applied: 0001_initial"


def test_migrate_turns_the_outbox_off_as_asyncz_outbox_says(
    migrations: list[tuple[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("ASYNCZ_OUTBOX", "off")
    assert cli.main(["migrate", "--database-url", "postgresql://x@h/db"]) == 0
    assert migrations == [("apply", "postgresql://x@h/db"), ("outbox", False)]
    assert capsys.readouterr().out.strip() == "applied: 0001_initial; outbox turned off"


def test_migrate_with_a_bad_asyncz_outbox_is_a_usage_error(
    migrations: list[tuple[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("ASYNCZ_OUTBOX", "false")
    assert cli.main(["migrate", "--database-url", "postgresql://x@h/db"]) == 2
    assert "outbox" in capsys.readouterr().err
    assert migrations == []


def test_version_and_global_flags_on_either_side(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    from asyncz import __version__

    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"asyncz {__version__}"
    api.routes[("GET", f"/jobs/{JOB['job_id']}")] = (200, JOB)
    assert cli.main(["--api-key", "before", "status", JOB["job_id"]]) == 0
    assert cli.main(["status", JOB["job_id"], "--api-key", "after"]) == 0
    capsys.readouterr()
    assert cli.main(["--api-key", "x", "--json", "status", JOB["job_id"], "--api-key", "y"]) == 0
    assert [r["key"] for r in api.requests] == ["before", "after", "y"]
    assert json.loads(capsys.readouterr().out)["job_id"] == JOB["job_id"]


def test_a_local_url_without_a_key_uses_the_key_asyncz_dev_wrote(
    api: FakeApi, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.delenv("ASYNCZ_API_KEY")
    monkeypatch.delenv("ASYNCZ_DEV_API_KEY", raising=False)
    monkeypatch.setenv("ASYNCZ_DEV_DATA_DIR", str(tmp_path))
    (tmp_path / "api-key").write_text("az_from_dev\n")
    api.routes[("GET", "/stats")] = (200, {"queues": {}, "live_workers": 0})
    assert cli.main(["stats"]) == 0
    assert api.requests[-1]["key"] == "az_from_dev"
    from asyncz.cli.client import api_key_for

    assert api_key_for("https://api.example.com", None) is None  # never sent elsewhere


def test_submit_file_sends_batches_and_reports_duplicates(
    api: FakeApi, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [json.dumps({"task": "echo", "payload": {"i": i}}) for i in range(7)]
    (tmp_path / "jobs.jsonl").write_text("\n".join(lines) + "\n\n")
    answers = [
        (202, {"jobs": [{"job_id": f"j{i}", "status": "queued", "duplicate": False}
                        for i in range(n)], "accepted": n, "duplicates": 0})
        for n in (3, 3, 1)
    ]  # fmt: skip
    api.routes[("POST", "/jobs/batch")] = answers
    path = str(tmp_path / "jobs.jsonl")
    assert cli.main(["submit", "--file", path, "--batch-size", "3"]) == 0
    assert [len(r["body"]["jobs"]) for r in api.requests] == [3, 3, 1]
    assert all(j["idempotency_key"] for r in api.requests for j in r["body"]["jobs"])
    assert capsys.readouterr().out.strip() == "submitted 7 jobs"
    (tmp_path / "bad.jsonl").write_text('{"task": "echo"}\n[1]\n')
    assert cli.main(["submit", "--file", str(tmp_path / "bad.jsonl")]) == 2
    assert "bad.jsonl:2" in capsys.readouterr().err


def test_replay_all_follows_until_the_dead_letter_queue_is_empty(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = [f"d{i}" for i in range(1500)]
    api.routes[("POST", "/dlq/replay")] = [
        (200, {"replayed": 1000, "job_ids": ids[:1000]}),
        (200, {"replayed": 500, "job_ids": ids[1000:]}),
    ]
    assert cli.main(["replay", "--all", "--task", "fail"]) == 0
    assert capsys.readouterr().out.strip() == "replayed 1500 dead jobs"
    assert [r["body"] for r in api.requests] == [{"task": "fail", "limit": 1000}] * 2


@pytest.mark.parametrize(("command", "extra"), [("dev", "local"), ("migrate", "server")])
def test_a_server_command_on_a_client_only_install_names_the_extra(
    command: str, extra: str
) -> None:
    """The base install is the client alone: without psycopg (and the rest of the server
    side), ``asyncz dev`` says which extra to install instead of a traceback."""
    code = (
        "import sys\n"
        "for name in ('psycopg', 'psycopg_pool', 'redis', 'fastapi', 'uvicorn'):\n"
        "    sys.modules[name] = None  # an import of it fails as if not installed\n"
        "from asyncz.cli import main\n"
        f"sys.exit(main([{command!r}, '--database-url', 'postgresql://x/y']"
        f" if {command!r} == 'migrate' else [{command!r}]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 1, out.stderr
    assert f"pip install 'asyncz-serverless[{extra}]'" in out.stderr
    assert "Traceback" not in out.stderr


def test_audit_with_a_filter_that_matches_nothing_says_so_not_that_nothing_happened(
    api: FakeApi, capsys: pytest.CaptureFixture[str]
) -> None:
    api.routes[("GET", "/audit")] = (200, {"items": [], "next_cursor": None})
    assert cli.main(["audit", "--key", "nobody", "--action", "purge"]) == 0
    assert (
        capsys.readouterr().out.strip() == "no operator action matches --key nobody --action purge"
    )
    assert cli.main(["audit"]) == 0
    assert capsys.readouterr().out.strip() == "no operator actions yet"
