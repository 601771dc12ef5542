"""``asyncz dev`` as a user runs it, for tests that drive the whole system over HTTP: a
subprocess on a free port in its own process group, with the test servers' databases."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

TERMINAL = {"completed", "dead", "cancelled"}
API_KEY = "dev-test-key"  # the key a test run of ``asyncz dev`` is given


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def dev_env(database_url: str, redis_url: str, api_key: str) -> dict[str, str]:
    """The environment of a quick-cycling run: short leases, fast schedules."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASYNCZ_")}
    env.update(
        {
            "ASYNCZ_DATABASE_URL": database_url,
            "ASYNCZ_REDIS_URL": redis_url,
            "ASYNCZ_DEV_API_KEY": api_key,
            "ASYNCZ_LEASE_TIMEOUT_SECONDS": "3",
            "ASYNCZ_HEARTBEAT_SECONDS": "0.5",
            "ASYNCZ_RECOVERY_INTERVAL_SECONDS": "1",
            "ASYNCZ_FLEET_INTERVAL_SECONDS": "2",
            "ASYNCZ_WORKER_POLL_SECONDS": "0.5",
            "ASYNCZ_DEV_SHUTDOWN_GRACE_SECONDS": "5",
            "ASYNCZ_BACKOFF_BASE_SECONDS": "0.2",
            "ASYNCZ_BACKOFF_MAX_SECONDS": "0.5",
        }
    )
    return env


def request(base: str, api_key: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """(status, JSON body) of one API call; an HTTP error is an answer, not an exception."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method)
    req.add_header("x-api-key", api_key)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as err:
        raw = err.read()
        return err.code, json.loads(raw) if raw else None


def submit_many(base: str, api_key: str, bodies: list[dict[str, Any]]) -> list[str]:
    """The ids of ``bodies`` submitted by ``POST /jobs``, eight at a time; each must be 202."""
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda b: request(base, api_key, "POST", "/jobs", b), bodies))
    assert all(status == 202 for status, _ in results), results[:3]
    return [body["job_id"] for _, body in results]


def wait_terminal(
    base: str, api_key: str, ids: list[str], timeout: float
) -> dict[str, dict[str, Any]]:
    """Every job of ``ids`` as ``GET /jobs/{id}`` shows it once terminal; fails after
    ``timeout`` naming how many are not."""
    pending = set(ids)
    jobs: dict[str, dict[str, Any]] = {}
    deadline = time.monotonic() + timeout
    with ThreadPoolExecutor(8) as pool:
        while pending and time.monotonic() < deadline:
            for job_id, (status, job) in zip(
                list(pending),
                pool.map(lambda j: request(base, api_key, "GET", f"/jobs/{j}"), list(pending)),
                strict=True,
            ):
                assert status == 200, job
                if job["status"] in TERMINAL:
                    jobs[job_id] = job
                    pending.discard(job_id)
            if pending:
                time.sleep(0.3)
    assert not pending, f"{len(pending)} jobs not terminal after {timeout}s"
    return jobs


class DevRun:
    """One ``python -m asyncz dev`` run (or ``shell_command``, run by bash in ``cwd`` with
    the port in ``ASYNCZ_DEV_PORT``); :meth:`stop` kills its whole process group."""

    def __init__(
        self,
        data_dir: Path,
        env: dict[str, str],
        api_key: str,
        *,
        port: int | None = None,
        args: Sequence[str] = (),
        quiet: bool = True,
        shell_command: str | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.api_key = api_key
        self.log_path = data_dir.parent / f"dev-{time.monotonic_ns()}.log"
        argv = [sys.executable, "-m", "asyncz", "dev", "--port", str(self.port),
                "--data-dir", str(data_dir), *(["--quiet"] if quiet else []), *args]  # fmt: skip
        if shell_command is not None:
            argv, env = ["bash", "-c", shell_command], {**env, "ASYNCZ_DEV_PORT": str(self.port)}
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                argv, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        self.pgid = self.proc.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_healthy(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"asyncz dev exited:\n{self.log()[-4000:]}"
            try:
                if self.call("GET", "/health")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"asyncz dev not healthy in {timeout}s:\n{self.log()[-4000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return request(self.url, self.api_key, method, path, body)

    def live_group_members(self) -> list[int]:
        """Pids in the run's process group that are not zombies."""
        members = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == self.pgid and fields[0] != "Z":
                members.append(int(entry.name))
        return members

    def submit(self, body: dict[str, Any]) -> str:
        status, reply = self.call("POST", "/jobs", body)
        assert status == 202, reply
        return str(reply["job_id"])

    def wait_status(self, job_id: str, statuses: set[str], timeout: float = 60) -> dict[str, Any]:
        return self.wait_job(job_id, lambda job: job["status"] in statuses, timeout)

    def wait_job(
        self, job_id: str, until: Callable[[dict[str, Any]], bool], timeout: float = 60
    ) -> dict[str, Any]:
        """The job as ``GET /jobs/{id}`` shows it, once ``until(job)`` holds. A ``503``
        (``database_unavailable``: the api's answer when the database is slower than its
        bound, as on a CI box running three tiers at once) is asked again, as its message
        says; any other answer but ``200`` fails at once."""
        deadline = time.monotonic() + timeout
        while True:
            status, job = self.call("GET", f"/jobs/{job_id}")
            if status == 503 and job.get("error") == "database_unavailable":
                assert time.monotonic() < deadline, f"{job_id}: 503 until {timeout} s: {job}"
                time.sleep(0.5)
                continue
            assert status == 200, job
            if until(job):
                return dict(job)
            assert time.monotonic() < deadline, f"{job_id} after {timeout} s: {job}"
            time.sleep(0.2)


@contextmanager
def dev_importing(
    folder: Path, modules: str, api_key: str, *args: str, import_from: Path | None = None
) -> Iterator[DevRun]:
    """``asyncz dev`` importing the task ``modules`` (comma-separated) from ``import_from``
    (default ``folder``), on the dev tests' empty backends, its data and log in ``folder``;
    stopped at the end."""
    from tests.support.databases import empty_backends

    env = dev_env(*empty_backends("dev", 1), api_key)
    path = str(import_from or folder)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [path, env.get("PYTHONPATH")]))
    run = DevRun(folder / "data", env, api_key, args=["--tasks", modules, *args])
    try:
        run.wait_healthy()
        yield run
    finally:
        run.stop()
