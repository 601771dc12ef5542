"""What the system is doing, read through ``asyncz dev``: each task's figures over the last
hour match the attempts table, and ``GET /workers`` / ``asyncz workers`` list the attempts
running now with their elapsed time."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tests.support.databases import empty_backends
from tests.support.devrun import API_KEY, DevRun, dev_env, free_port, submit_many, wait_terminal
from tests.support.ledger import rows

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DevRun, str]]:
    database_url, redis_url = empty_backends("activity", 1)
    env = {**dev_env(database_url, redis_url, API_KEY), "ASYNCZ_WORKER_CONCURRENCY": "8"}
    run = DevRun(tmp_path_factory.mktemp("activity") / "data", env, API_KEY, port=free_port(),
                 args=["--workers", "1"])  # fmt: skip
    try:
        run.wait_healthy()
        yield run, database_url
    finally:
        if run.proc.poll() is None:
            os.killpg(run.pgid, signal.SIGKILL)
            run.proc.wait(10)


def test_task_figures_match_the_attempts_table(dev: tuple[DevRun, str]) -> None:
    run, database_url = dev
    bodies = (
        [{"task": "echo", "payload": {"n": i}} for i in range(100)]
        + [{"task": "fail", "payload": {}, "max_retries": 0} for _ in range(20)]
        + [{"task": "sleep", "payload": {"seconds": 0.2}} for _ in range(20)]
    )
    ids = submit_many(run.url, API_KEY, bodies)
    wait_terminal(run.url, API_KEY, ids, timeout=120)
    status, figures = run.call("GET", "/stats/tasks")
    assert status == 200 and figures["minutes"] == 60
    by_task = {f["task"]: f for f in figures["items"]}
    expected = {
        r["task"]: r
        for r in rows(
            database_url,
            "SELECT j.task, count(*) AS runs,"
            " count(*) FILTER (WHERE a.outcome = 'completed') AS completed,"
            " count(*) FILTER (WHERE a.outcome IN ('failed', 'timed_out', 'lost')) AS failures,"
            " percentile_cont(0.5) WITHIN GROUP (ORDER BY a.duration_ms) AS p50,"
            " percentile_cont(0.95) WITHIN GROUP (ORDER BY a.duration_ms) AS p95"
            " FROM job_attempt_history a JOIN jobs j ON j.id = a.job_id GROUP BY j.task",
        )
    }
    assert set(by_task) == {"echo", "fail", "sleep"}
    assert (by_task["echo"]["runs"], by_task["echo"]["completed"]) == (100, 100)
    assert (by_task["fail"]["runs"], by_task["fail"]["failures"]) == (20, 20)
    assert by_task["sleep"]["runs"] == 20 and by_task["sleep"]["run_p50_ms"] >= 200
    for task, f in by_task.items():
        e = expected[task]
        assert (f["runs"], f["completed"], f["failures"], f["retries"]) == (
            e["runs"], e["completed"], e["failures"], 0
        )  # fmt: skip
        assert f["run_p50_ms"] == pytest.approx(e["p50"], abs=0.1)
        assert f["run_p95_ms"] == pytest.approx(e["p95"], abs=0.1)
        assert f["wait_p50_ms"] is not None and f["wait_p50_ms"] >= 0
    out = cli(run, "stats", "--tasks")
    assert {f["task"] for f in json.loads(out)} == {"echo", "fail", "sleep"}


def test_workers_lists_what_each_runs_now(dev: tuple[DevRun, str]) -> None:
    run, _ = dev
    sleepers = submit_many(
        run.url, API_KEY, [{"task": "sleep", "payload": {"seconds": 8}} for _ in range(4)]
    )
    deadline = time.monotonic() + 60
    running: list[dict[str, object]] = []
    while time.monotonic() < deadline:
        status, view = run.call("GET", "/workers")
        assert status == 200 and view["presence_available"]
        running = [j for w in view["workers"] for j in w["running"]]
        if {j["job_id"] for j in running} == set(sleepers):
            break
        time.sleep(0.3)
    assert {j["job_id"] for j in running} == set(sleepers), view
    assert all(j["task"] == "sleep" and j["elapsed_seconds"] >= 0 for j in running)
    busy = [w for w in view["workers"] if w["running"]]
    assert busy and all(w["since"] and w["presence_until"] for w in busy)
    assert view["unknown_workers"] == []
    table = cli(run, "workers", json_out=False)
    assert table.count("sleep") == 4 and "WORKER" in table
    data = json.loads(cli(run, "workers"))
    assert len([j for w in data["workers"] for j in w["running"]]) == 4


def cli(run: DevRun, *args: str, json_out: bool = True) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASYNCZ_")}
    env.update({"ASYNCZ_API_URL": run.url, "ASYNCZ_API_KEY": API_KEY, "COLUMNS": "200"})
    out = subprocess.run(
        [sys.executable, "-m", "asyncz", *(["--json"] if json_out else []), *args],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout
