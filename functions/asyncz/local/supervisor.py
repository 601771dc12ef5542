"""``asyncz dev``: the whole system on one machine, through the real Lambda handlers.

Starts (or reuses) Postgres and Redis, applies migrations, runs api sandboxes behind the
local API Gateway front, worker sandboxes as separate processes, and the fleet and recovery
functions on their schedules. SIGINT/SIGTERM stop it in order: front, schedules, workers
(deadline brought forward, then killed after a grace period), api sandboxes, servers.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import itertools
import logging
import os
import secrets
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from asyncz.local.embedded import ServerError, ServerUrls
from asyncz.local.gateway import Gateway, SandboxPool
from asyncz.local.lambda_endpoint import LambdaEndpoint
from asyncz.local.sandbox import (
    SandboxError,
    SandboxProcess,
    SandboxSpec,
    log_line,
)
from asyncz.local.servers import LocalServers

# Overridable for tests that run the runner around stand-in handlers.
API_HANDLER = os.environ.get("ASYNCZ_DEV_API_HANDLER") or "asyncz.api.handler.handler"
WORKER_HANDLER = os.environ.get("ASYNCZ_DEV_WORKER_HANDLER") or "asyncz.worker.handler.handler"
RECOVERY_HANDLER = (
    os.environ.get("ASYNCZ_DEV_RECOVERY_HANDLER") or "asyncz.recovery.handler.handler"
)
FLEET_SCALE = os.environ.get("ASYNCZ_DEV_FLEET_SCALE") or "asyncz.fleet.handler.scale"
FUNCTION_PREFIX = "asyncz-local"


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    return float(raw) if raw else default


def env_int(name: str, default: int | None) -> int | None:
    raw = os.environ.get(name, "").strip()
    return int(raw) if raw else default


@dataclass
class DevOptions:
    """Everything ``asyncz dev`` can be told (flags override ``ASYNCZ_DEV_*`` variables)."""

    host: str = "127.0.0.1"
    port: int = 8000
    data_dir: Path = field(default_factory=lambda: default_data_dir())
    workers: int | None = None  # fixed worker sandboxes; None = the fleet controller decides
    api_sandboxes: int = 4
    worker_timeout_s: float = 900.0  # Lambda's maximum
    fleet_interval_s: float = 60.0
    recovery_interval_s: float = 60.0
    shutdown_grace_s: float = 10.0
    max_worker_sandboxes: int = 10
    pg_port: int | None = None
    redis_port: int | None = None
    access_log: bool = True

    @classmethod
    def from_env(cls, **overrides: Any) -> DevOptions:
        opts = cls(
            port=env_int("ASYNCZ_DEV_PORT", 8000) or 8000,
            data_dir=Path(os.environ.get("ASYNCZ_DEV_DATA_DIR") or default_data_dir()),
            workers=env_int("ASYNCZ_DEV_WORKERS", None),
            api_sandboxes=env_int("ASYNCZ_DEV_API_SANDBOXES", 4) or 4,
            worker_timeout_s=env_float("ASYNCZ_DEV_WORKER_TIMEOUT_SECONDS", 900.0),
            fleet_interval_s=env_float("ASYNCZ_FLEET_INTERVAL_SECONDS", 60.0),
            recovery_interval_s=env_float("ASYNCZ_RECOVERY_INTERVAL_SECONDS", 60.0),
            shutdown_grace_s=env_float("ASYNCZ_DEV_SHUTDOWN_GRACE_SECONDS", 10.0),
            max_worker_sandboxes=env_int("ASYNCZ_FLEET_MAX_WORKERS", 10) or 10,
        )
        for key, value in overrides.items():
            if value is not None:
                setattr(opts, key, value)
        return opts


def default_data_dir(start: Path | None = None) -> Path:
    """``.asyncz`` in the project root (the nearest folder up with a pyproject.toml or .git),
    else in the current folder."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "pyproject.toml").is_file() or (folder / ".git").exists():
            return folder / ".asyncz"
    return here / ".asyncz"


def resolve_api_key(data_dir: Path) -> tuple[str, str]:
    """The key the local stack accepts: ``ASYNCZ_DEV_API_KEY``, else one kept in the data dir."""
    given = os.environ.get("ASYNCZ_DEV_API_KEY", "").strip()
    if given:
        return given, "ASYNCZ_DEV_API_KEY"
    path = data_dir / "api-key"
    with contextlib.suppress(OSError):
        kept = path.read_text().strip()
        if kept:
            return kept, str(path)
    key = "az_" + secrets.token_urlsafe(24)
    data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(key + "\n")
    return key, f"{path} (generated)"


def sandbox_env(urls: ServerUrls, api_key: str, lambda_url: str) -> dict[str, str]:
    """What every local sandbox sees: ``ASYNCZ_*`` settings plus a Lambda-ish AWS environment."""
    env = {
        "ASYNCZ_DATABASE_URL": urls.database_url,
        "ASYNCZ_REDIS_URL": urls.redis_url,
        "ASYNCZ_API_KEY_HASHES": hashlib.sha256(api_key.encode()).hexdigest(),
        "ASYNCZ_WORKER_FUNCTION_NAME": f"{FUNCTION_PREFIX}-worker",
        # Lambda invokes (the api waking a worker, the real fleet handler) come back to us.
        "AWS_ENDPOINT_URL_LAMBDA": lambda_url,
    }
    defaults = {
        "ASYNCZ_STAGE": "local",
        "ASYNCZ_PUBLISH_GAUGES": "false",  # no CloudWatch without a cloud
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "AWS_EC2_METADATA_DISABLED": "true",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_METRICS_DISABLED": "true",
        "POWERTOOLS_DEV": "false",
    }
    for key, value in defaults.items():
        env[key] = os.environ.get(key, value)
    return env


class WorkerFleet:
    """Worker sandboxes (processes); each :meth:`invoke` runs one worker invocation in one."""

    def __init__(self, env: dict[str, str], opts: DevOptions, stopping: threading.Event) -> None:
        self.env = env
        self.opts = opts
        self.stopping = stopping
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._idle: list[SandboxProcess] = []
        self._busy: set[SandboxProcess] = set()
        self._threads: list[threading.Thread] = []

    def _spawn(self) -> SandboxProcess:
        name = f"worker-{next(self._ids)}"
        spec = SandboxSpec(
            name=name,
            function_name=f"{FUNCTION_PREFIX}-worker",
            handler=WORKER_HANDLER,
            env={**self.env, "AWS_LAMBDA_FUNCTION_NAME": f"{FUNCTION_PREFIX}-worker"},
        )
        return SandboxProcess(spec)

    def invoke(self, *, repeat: bool = False) -> bool:
        """Start one worker invocation (async, like ``InvocationType=Event``); False if at cap."""
        with self._lock:
            if self.stopping.is_set():
                return False
            if len(self._busy) >= max(self.opts.max_worker_sandboxes, self.opts.workers or 0):
                log_line("fleet", "worker invocation throttled: all sandboxes busy", "WARNING")
                return False
            sandbox = self._idle.pop() if self._idle else None
            thread = threading.Thread(
                target=self._run, args=(sandbox, repeat), name="worker-invoker", daemon=True
            )
            self._threads.append(thread)
        thread.start()
        return True

    def _run(self, sandbox: SandboxProcess | None, repeat: bool) -> None:
        try:
            if sandbox is None:
                sandbox = self._spawn()
            with self._lock:
                self._busy.add(sandbox)
            if not sandbox.ready:
                init_ms = sandbox.wait_ready()
                log_line("sandbox", "INIT", sandbox=sandbox.spec.name, init_ms=init_ms)
            while not self.stopping.is_set():
                self._invoke_once(sandbox)
                if not sandbox.alive():
                    sandbox.stop(grace_s=0)
                    if not repeat or self.stopping.is_set():
                        return
                    sandbox = self._replace(sandbox)
                if not repeat:
                    break
        except SandboxError as exc:
            if not self.stopping.is_set():  # during shutdown a killed sandbox is expected
                log_line("sandbox", f"worker sandbox failed: {exc}", "ERROR")
            if sandbox is not None:
                sandbox.stop(grace_s=0)
                with self._lock:
                    self._busy.discard(sandbox)
            if repeat and not self.stopping.wait(1.0):
                self.invoke(repeat=True)  # keep the fixed count
            sandbox = None
        finally:
            with self._lock:
                if sandbox is not None:
                    self._busy.discard(sandbox)
                    if sandbox.alive() and not self.stopping.is_set():
                        self._idle.append(sandbox)  # warm for the next invocation

    def prewarm(self) -> None:
        """Start one worker sandbox's init before the first invocation (a dev convenience);
        the invocation that takes it waits for the rest of its init."""
        with self._lock:
            if self.stopping.is_set() or self._idle or self._busy:
                return
            self._idle.append(self._spawn())

    def _replace(self, dead: SandboxProcess) -> SandboxProcess:
        with self._lock:
            self._busy.discard(dead)
        sandbox = self._spawn()
        with self._lock:
            self._busy.add(sandbox)
        sandbox.wait_ready()
        return sandbox

    def _invoke_once(self, sandbox: SandboxProcess) -> None:
        request_id = str(uuid.uuid4())
        started = time.monotonic()
        log_line("sandbox", "START", sandbox=sandbox.spec.name, request_id=request_id)
        try:
            reply = sandbox.invoke({}, self.opts.worker_timeout_s, request_id=request_id)
        except SandboxError as exc:
            if not self.stopping.is_set():  # during shutdown a killed sandbox is expected
                log_line(
                    "sandbox",
                    f"worker invocation failed: {exc}",
                    "ERROR",
                    sandbox=sandbox.spec.name,
                    request_id=request_id,
                )
            return
        level = "INFO" if reply.get("ok") else "ERROR"
        log_line(
            "sandbox",
            "REPORT",
            level,
            sandbox=sandbox.spec.name,
            request_id=request_id,
            duration_ms=round((time.monotonic() - started) * 1000, 1),
            result=reply.get("result"),
            error=reply.get("error"),
        )

    def stop(self, grace_s: float) -> None:
        with self._lock:
            sandboxes = [*self._busy, *self._idle]
            self._idle.clear()
        stoppers = [
            threading.Thread(target=s.stop, args=(grace_s,), daemon=True) for s in sandboxes
        ]
        for t in stoppers:
            t.start()
        for t in stoppers:
            t.join(grace_s + 10)

    @property
    def counts(self) -> tuple[int, int]:
        with self._lock:
            return len(self._busy), len(self._idle)


class Schedule:
    """An EventBridge-like rate rule: invokes a function sandbox now, then every interval."""

    def __init__(
        self,
        name: str,
        interval_s: float,
        make_sandbox: Callable[[], SandboxProcess],
        stopping: threading.Event,
    ) -> None:
        self.name = name
        self.interval_s = interval_s
        self.make_sandbox = make_sandbox
        self.stopping = stopping
        self.sandbox: SandboxProcess | None = None
        self.thread = threading.Thread(target=self._loop, name=f"schedule-{name}", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _loop(self) -> None:
        while not self.stopping.is_set():
            started = time.monotonic()
            try:
                if self.sandbox is None or not self.sandbox.alive():
                    if self.sandbox is not None:
                        self.sandbox.stop(grace_s=0)
                    self.sandbox = self.make_sandbox()
                    self.sandbox.wait_ready()
                reply = self.sandbox.invoke({}, 900.0)
                log_line(
                    self.name,
                    "REPORT",
                    "INFO" if reply.get("ok") else "ERROR",
                    duration_ms=round((time.monotonic() - started) * 1000, 1),
                    result=reply.get("result"),
                    error=reply.get("error"),
                    trace=reply.get("trace"),
                )
            except SandboxError as exc:
                if not self.stopping.is_set():
                    log_line(self.name, f"invocation failed: {exc}", "ERROR")
            self.stopping.wait(max(0.0, self.interval_s - (time.monotonic() - started)))

    def stop(self, grace_s: float) -> None:
        if self.sandbox is not None:
            self.sandbox.stop(grace_s)
        self.thread.join(grace_s + 5)


class _StreamHandler(logging.Handler):
    """Routes the runner's stdlib log records (server provisioning) into the JSON stream."""

    def emit(self, record: logging.LogRecord) -> None:
        component = record.name.rsplit(".", 1)[-1]
        log_line(component, record.getMessage(), record.levelname)


class DevRunner:
    """Owns every local component; :meth:`run` blocks until SIGINT/SIGTERM."""

    def __init__(self, opts: DevOptions) -> None:
        self.opts = opts
        self.stopping = threading.Event()
        self.servers = LocalServers(
            opts.data_dir,
            database_url=os.environ.get("ASYNCZ_DATABASE_URL") or None,
            redis_url=os.environ.get("ASYNCZ_REDIS_URL") or None,
            pg_port=opts.pg_port,
            redis_port=opts.redis_port,
        )
        self._cleanups: list[Callable[[], object]] = []
        self._gateway: Gateway | None = None
        self._signalled_at = 0.0

    def _on_signal(self, signum: int, _frame: Any) -> None:
        now = time.monotonic()
        if self.stopping.is_set():
            # A repeated Ctrl-C (not the same signal sent to the pid and its group at once).
            if now - self._signalled_at > 1.0:
                log_line("supervisor", "second signal: killing everything now", "WARNING")
                self._kill_everything()
                os._exit(130)
            return
        self._signalled_at = now
        log_line("supervisor", f"received {signal.Signals(signum).name}: stopping")
        self.stopping.set()

    def _kill_everything(self) -> None:
        import multiprocessing

        for child in multiprocessing.active_children():
            child.kill()
        self.servers.close()

    def run(self) -> int:
        local_log = logging.getLogger("asyncz.local")
        local_log.setLevel(logging.INFO)
        local_log.addHandler(_StreamHandler())
        local_log.propagate = False
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self._on_signal)
        try:
            self._start()
        except (OSError, SandboxError, ServerError) as exc:
            log_line("supervisor", f"could not start: {exc}", "ERROR")
            self._stop()
            if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
                print(
                    f"error: {self.opts.host}:{self.opts.port} is in use (try --port)",
                    file=sys.stderr,
                )
            else:
                print(f"error: {exc}", file=sys.stderr)
            return 1
        try:
            self.stopping.wait()
        finally:
            self._stop()
        return 0

    def _start(self) -> None:
        opts = self.opts
        # Bind the front first (a busy port fails before anything starts); 503 until ready.
        self._gateway = Gateway(
            _LazyBackend(), host=opts.host, port=opts.port, access_log=opts.access_log
        )
        self._gateway.start()
        gateway = self._gateway
        urls = self.servers.start()
        self._cleanups.append(self.servers.close)
        log_line(
            "supervisor",
            "servers ready",
            database_url=urls.database_url,
            redis_url=urls.redis_url,
            embedded_postgres=urls.embedded_postgres,
            embedded_redis=urls.embedded_redis,
        )
        from asyncz.store.migrations import apply_migrations

        applied = apply_migrations(urls.database_url)
        log_line("supervisor", "migrations applied", applied=applied)
        api_key, key_source = resolve_api_key(opts.data_dir)

        fleet = WorkerFleet({}, opts, self.stopping)
        endpoint = LambdaEndpoint({f"{FUNCTION_PREFIX}-worker": fleet.invoke})
        endpoint.start()
        self._cleanups.append(endpoint.close)
        env = sandbox_env(urls, api_key, endpoint.url)
        fleet.env = env

        backend = self._api_backend(env)
        gateway.server.backend = backend
        if opts.workers:
            for _ in range(opts.workers):
                fleet.invoke(repeat=True)
        else:
            threading.Thread(target=fleet.prewarm, name="prewarm", daemon=True).start()
        self._cleanups.append(lambda: fleet.stop(opts.shutdown_grace_s))

        def sandbox(name: str, handler: str, kind: str = "plain") -> Callable[[], SandboxProcess]:
            fn = f"{FUNCTION_PREFIX}-{name}"
            spec = SandboxSpec(
                name=f"{name}-1",
                function_name=fn,
                handler=handler,
                kind=kind,
                env={**env, "AWS_LAMBDA_FUNCTION_NAME": fn},
            )
            hook = fleet.invoke if kind == "fleet" else None
            return lambda: SandboxProcess(spec, on_invoke_worker=hook)

        schedules = [
            Schedule(
                "recovery",
                opts.recovery_interval_s,
                sandbox("recovery", RECOVERY_HANDLER),
                self.stopping,
            )
        ]
        if not opts.workers:
            schedules.append(
                Schedule(
                    "fleet",
                    opts.fleet_interval_s,
                    sandbox("fleet", FLEET_SCALE, "fleet"),
                    self.stopping,
                )
            )
        for schedule in schedules:
            schedule.start()
            self._cleanups.append(lambda s=schedule: s.stop(opts.shutdown_grace_s))  # type: ignore[misc]
        self._banner(gateway.url, urls, api_key, key_source)

    def _api_backend(self, env: dict[str, str]) -> SandboxPool:
        opts = self.opts
        ids = itertools.count(1)

        def spec() -> SandboxSpec:
            return SandboxSpec(
                name=f"api-{next(ids)}",
                function_name=f"{FUNCTION_PREFIX}-api",
                handler=API_HANDLER,
                env={**env, "AWS_LAMBDA_FUNCTION_NAME": f"{FUNCTION_PREFIX}-api"},
            )

        def make() -> SandboxProcess:
            # Processes, not threads: the api handler keeps one event loop per process (its
            # pools are bound to it), exactly one Lambda sandbox per process.
            return SandboxProcess(spec())

        started = time.monotonic()
        # Serve as soon as one sandbox is initialised (cold imports take ~2 s of CPU each; on
        # a small machine starting them together delays the first); the rest join later.
        first = make()
        first.wait_ready()

        def respawn(dead: Any) -> Any:
            log_line("gateway", f"api sandbox {dead.spec.name} died: starting another", "WARNING")
            dead.stop(grace_s=0)
            fresh = make()
            fresh.wait_ready()
            return fresh

        pool = SandboxPool([first], respawn)

        def join_rest() -> None:
            for _ in range(max(1, opts.api_sandboxes) - 1):
                if self.stopping.is_set():
                    return
                sb = make()
                try:
                    sb.wait_ready()
                    pool.add(sb)
                except SandboxError as exc:
                    log_line("supervisor", f"api sandbox failed: {exc}", "ERROR")
                    sb.stop(grace_s=0)
            log_line(
                "supervisor",
                "api sandboxes ready",
                count=pool.size,
                ms=round((time.monotonic() - started) * 1000),
            )

        threading.Thread(target=join_rest, name="api-sandboxes", daemon=True).start()
        self._cleanups.append(pool.close)
        return pool

    def _banner(self, url: str, urls: ServerUrls, api_key: str, key_source: str) -> None:
        opts = self.opts
        pg = "embedded" if urls.embedded_postgres else "given by ASYNCZ_DATABASE_URL"
        rd = "embedded" if urls.embedded_redis else "given by ASYNCZ_REDIS_URL"
        workers = (
            f"{opts.workers} fixed"
            if opts.workers
            else (f"fleet controller every {opts.fleet_interval_s:g}s")
        )
        lines = [
            "",
            "AsyncZ local stack is up (Ctrl-C stops everything)",
            f"  API            {url}   (API Gateway REST proxy -> api Lambda handler)",
            f"  API key        {api_key}   [{key_source}]",
            f"  Postgres       {urls.database_url}   [{pg}]",
            f"  Redis          {urls.redis_url}   [{rd}]",
            f"  Data folder    {opts.data_dir.resolve()}",
            f"  Workers        {workers}; recovery every {opts.recovery_interval_s:g}s",
            "",
            "  Try:",
            f"    curl -s -X POST {url}/jobs -H 'x-api-key: {api_key}' "
            "-H 'content-type: application/json' "
            '-d \'{"task": "email_send", "payload": {"user_id": 42}}\'',
            f"    export ASYNCZ_API_URL={url} ASYNCZ_API_KEY={api_key}",
            '    asyncz submit echo \'{"hello": "world"}\' --wait',
            "",
        ]
        sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()
        log_line("supervisor", "ready", api_url=url, data_dir=str(opts.data_dir.resolve()))

    def _stop(self) -> None:
        self.stopping.set()
        with contextlib.suppress(Exception):
            self.servers.begin_stop()
        if self._gateway is not None:
            self._gateway.close()  # no new requests while the rest winds down
        for cleanup in reversed(self._cleanups):
            try:
                cleanup()
            except Exception as exc:  # noqa: BLE001 - keep stopping the rest
                log_line("supervisor", f"error while stopping: {exc}", "ERROR")
        self._cleanups.clear()
        import multiprocessing

        for child in multiprocessing.active_children():  # a sandbox still initialising
            child.kill()
            child.join(2)
        log_line("supervisor", "stopped")


class _LazyBackend:
    """Placeholder until the api sandboxes are up: the front answers 503 meanwhile."""

    def invoke(self, event: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        body = '{"error": "starting", "message": "the local stack is starting"}'
        return {
            "ok": True,
            "result": {
                "statusCode": 503,
                "body": body,
                "headers": {"Content-Type": "application/json"},
            },
        }

    def close(self) -> None:
        pass


def run_dev(opts: DevOptions) -> int:
    """Run the local stack until interrupted."""
    return DevRunner(opts).run()
