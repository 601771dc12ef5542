"""asyncz.client and the CLI against a started ``asyncz dev``: the
echo result, JobFailed with the error text, submit_many of 1,000 (sync and async under
asyncio.gather), ``asyncz replay --all`` over 250 dead jobs, and ``asyncz keys`` with a
revoked key refused on every api sandbox within the bound."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from asyncz.access import KEY_RELOAD_SECONDS
from asyncz.client import AsyncClient, Client, Job, JobFailed
from tests.support.databases import empty_backends
from tests.support.devrun import API_KEY, DevRun, free_port, request

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300)]


def dev_environment(database_url: str, redis_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASYNCZ_")}
    env.update(
        {
            "ASYNCZ_DATABASE_URL": database_url,
            "ASYNCZ_REDIS_URL": redis_url,
            "ASYNCZ_DEV_API_KEY": API_KEY,
            "ASYNCZ_WORKER_POLL_SECONDS": "0.5",
            "ASYNCZ_DEV_SHUTDOWN_GRACE_SECONDS": "5",
            "ASYNCZ_DEV_API_SANDBOXES": "4",
        }
    )
    return env


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevRun]:
    """One ``asyncz dev`` with two workers for the module, on empty backends of its own."""
    database_url, redis_url = empty_backends("dev", 1)
    data_dir = tmp_path_factory.mktemp("client-dev") / "data"
    run = DevRun(
        data_dir,
        dev_environment(database_url, redis_url),
        API_KEY,
        port=free_port(),
        args=["--workers", "2"],
    )
    try:
        run.wait_healthy()
        yield run
    finally:
        if run.proc.poll() is None:
            os.killpg(run.pgid, signal.SIGKILL)
            run.proc.wait(10)


@pytest.fixture
def client(dev: DevRun) -> Iterator[Client]:
    with Client(dev.url, API_KEY) as c:
        yield c


def test_submit_then_result_returns_the_echo(client: Client) -> None:
    job = client.submit("echo", {"hello": "world"}, queue="default", priority=3)
    assert job.status == "queued" and job.idempotency_key  # generated: retries are safe
    assert client.result(job.id, timeout=30) == {"hello": "world"}
    done = client.get(job.id)
    assert done.status == "completed" and done.priority == 3 and done.finished_at is not None
    [attempt] = client.attempts(job.id)
    assert attempt.outcome == "completed"


def test_a_failing_job_raises_job_failed_with_its_error(client: Client) -> None:
    job = client.submit("fail", {"message": "no such invoice"}, max_retries=0)
    with pytest.raises(JobFailed) as info:
        client.result(job.id, timeout=30)
    assert info.value.job.status == "dead"
    assert "no such invoice" in (info.value.error or "")


def test_submit_many_of_1000_all_complete(client: Client) -> None:
    jobs = client.submit_many([{"task": "echo", "payload": {"i": i}} for i in range(1000)])
    assert len(jobs) == 1000 and len({j.id for j in jobs}) == 1000
    finished = [client.wait(j.id, timeout=120) for j in jobs]
    assert {j.status for j in finished} == {"completed"}
    assert finished[617].result == {"i": 617}


def test_the_async_client_under_gather(dev: DevRun) -> None:
    async def go() -> list[Job]:
        async with AsyncClient(dev.url, API_KEY) as c:
            groups = await asyncio.gather(
                *(c.submit_many([{"task": "echo", "payload": {"g": g, "i": i}}
                                 for i in range(250)]) for g in range(4))
            )  # fmt: skip
            jobs = [j for group in groups for j in group]
            assert len({j.id for j in jobs}) == 1000
            return list(await asyncio.gather(*(c.wait(j.id, timeout=120) for j in jobs)))

    finished = asyncio.run(go())
    assert {j.status for j in finished} == {"completed"}
    assert finished[260].result == {"g": 1, "i": 10}


def test_cli_replay_all_replays_250_dead_jobs(dev: DevRun, client: Client) -> None:
    task = "fail"
    jobs = client.submit_many(
        [{"task": task, "queue": "default", "max_retries": 0, "payload": {"n": i}}
         for i in range(250)]
    )  # fmt: skip
    ids = {j.id for j in jobs}
    for j in jobs:
        assert client.wait(j.id, timeout=120).status == "dead"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASYNCZ_")}
    env.update({"ASYNCZ_API_URL": dev.url, "ASYNCZ_API_KEY": API_KEY})
    out = subprocess.run(
        [sys.executable, "-m", "asyncz", "--json", "replay", "--all", "--task", task],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    replayed = json.loads(out.stdout)
    assert replayed["replayed"] >= 250 and ids <= set(replayed["job_ids"])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # each one ran again: a second attempt, dead again
        if all(client.get(i).attempts == 2 for i in list(ids)[:20]):
            break
        time.sleep(0.5)
    assert all(len(client.attempts(i)) == 2 for i in list(ids)[:20])


def test_cli_talks_to_dev_with_its_written_key(dev: DevRun, tmp_path: Path) -> None:
    (tmp_path / ".asyncz").mkdir()
    (tmp_path / ".asyncz" / "api-key").write_text(API_KEY + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASYNCZ_")}
    env["ASYNCZ_API_URL"] = dev.url
    out = subprocess.run(
        [sys.executable, "-m", "asyncz", "submit", "echo", '{"a": 1}', "--wait", "--json"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["result"] == {"a": 1}  # --json: the JSON alone


def cli(dev: DevRun, *args: str, key: str = API_KEY) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASYNCZ_")}
    env.update({"ASYNCZ_API_URL": dev.url, "ASYNCZ_API_KEY": key})
    return subprocess.run(
        [sys.executable, "-m", "asyncz", "--json", *args],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_cli_keys_create_list_revoke_and_the_revoked_key_is_refused_everywhere(
    dev: DevRun,
) -> None:
    made = cli(dev, "keys", "create", "--name", "billing-svc", "--scope", "submit")
    assert made.returncode == 0, made.stderr
    key = json.loads(made.stdout)["key"]
    listed = json.loads(cli(dev, "keys", "list").stdout)
    assert [(k["name"], k["scopes"], k["key"]) for k in listed] == [
        ("billing-svc", ["submit"], None)
    ]

    def answers(n: int) -> list[int]:  # concurrent: the gateway spreads them over sandboxes
        with ThreadPoolExecutor(16) as pool:
            body = {"task": "echo", "payload": {}}
            return [s for s, _ in pool.map(lambda _: request(dev.url, key, "POST", "/jobs", body),
                                           range(n))]  # fmt: skip

    assert answers(32) == [202] * 32
    refused = cli(dev, "dlq", key=key)
    assert refused.returncode == 1 and "lacks the 'read' scope" in refused.stderr
    assert cli(dev, "keys", "revoke", "billing-svc").returncode == 0
    time.sleep(KEY_RELOAD_SECONDS)
    assert answers(32) == [401] * 32
    audit = json.loads(cli(dev, "audit", "--key", "configured").stdout)
    assert [(a["action"], a["target"]) for a in audit][:2] == [
        ("key.revoke", "billing-svc"), ("key.create", "billing-svc")
    ]  # fmt: skip
