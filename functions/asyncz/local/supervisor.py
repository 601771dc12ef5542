"""``asyncz dev``: the whole system on one machine, through the real Lambda handlers.

Starts (or reuses) Postgres and Redis, applies migrations, runs api sandboxes behind the
local API Gateway front, worker sandboxes as separate processes, and the fleet and recovery
functions on their rate rules. SIGINT/SIGTERM stop it in order: front, rules, workers
(deadline brought forward, then killed after a grace period), api sandboxes, servers.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from asyncz.local.apigateway.gateway import Gateway
from asyncz.local.banner import banner
from asyncz.local.config import (
    API_HANDLER,
    EVENTS_HANDLER,
    FLEET_HANDLER,
    FUNCTION_PREFIX,
    RECOVERY_HANDLER,
    DevOptions,
    check_task_modules,
    resolve_api_key,
    sandbox_env,
)
from asyncz.local.console import rendering
from asyncz.local.context import log_line
from asyncz.local.eventbridge import RateRule, fleet_rule
from asyncz.local.lambda_.endpoint import LambdaEndpoint
from asyncz.local.lambda_.pool import SandboxPool
from asyncz.local.lambda_.sandbox import SandboxError, SandboxProcess, SandboxSpec
from asyncz.local.lambda_.workers import WorkerFleet
from asyncz.local.servers.embedded import ServerError, ServerUrls
from asyncz.local.servers.provision import LocalServers

__all__ = ["DevOptions", "DevRunner", "run_dev"]


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
                if self._gateway is not None:
                    self._gateway.access_lines.flush()
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
            _LazyBackend(), host=opts.host, port=opts.port, access_log=opts.access_log,
            events=opts.api_events,
        )  # fmt: skip
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
        from asyncz.store.migrations import apply_migrations, set_outbox

        applied = apply_migrations(urls.database_url)
        log_line("supervisor", "migrations applied", applied=applied)
        # the events have a sink here (the console, or a bus): the outbox's triggers are on,
        # even on a database an `asyncz migrate` with ASYNCZ_OUTBOX=off turned them off in
        if set_outbox(urls.database_url, on=True):
            log_line("supervisor", "outbox turned on")
        api_key, key_source = resolve_api_key(opts.data_dir)

        fleet = WorkerFleet({}, opts, self.stopping)
        endpoint = LambdaEndpoint({f"{FUNCTION_PREFIX}-worker": fleet.invoke})
        endpoint.start()
        self._cleanups.append(endpoint.close)
        env = sandbox_env(urls, api_key, endpoint.url, opts.max_worker_sandboxes, gateway.url)
        fleet.env = env

        backend = self._api_backend(env)
        gateway.backend = backend
        if opts.workers:
            for _ in range(opts.workers):
                fleet.invoke(repeat=True)
        else:
            threading.Thread(target=fleet.prewarm, name="prewarm", daemon=True).start()
        self._cleanups.append(lambda: fleet.stop(opts.shutdown_grace_s))

        def sandbox(name: str, handler: str) -> Callable[[], SandboxProcess]:
            fn = f"{FUNCTION_PREFIX}-{name}"
            spec = SandboxSpec(
                name=f"{name}-1",
                function_name=fn,
                handler=handler,
                env={**env, "AWS_LAMBDA_FUNCTION_NAME": fn},
            )
            return lambda: SandboxProcess(spec)

        rules = [
            RateRule(
                "recovery",
                opts.recovery_interval_s,
                sandbox("recovery", RECOVERY_HANDLER),
                self.stopping,
            )
        ]
        if not opts.workers:
            rules.append(
                fleet_rule(opts.fleet_interval_s, sandbox("fleet", FLEET_HANDLER), self.stopping)
            )
        # the outbox's publisher: its minute's sweep, and at once when a process that
        # committed ends invokes it (docs/events.md)
        events = RateRule("events", opts.recovery_interval_s, sandbox("events", EVENTS_HANDLER),
                          self.stopping, timeout_s=60.0)  # fmt: skip
        endpoint.server.functions[f"{FUNCTION_PREFIX}-events"] = events.poke
        rules.append(events)
        for rule in rules:
            rule.start()
            self._cleanups.append(lambda s=rule: s.stop(opts.shutdown_grace_s))  # type: ignore[misc]
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
        sys.stdout.write(banner(self.opts, url, urls, api_key, key_source))
        sys.stdout.flush()
        log_line("supervisor", "ready", api_url=url, data_dir=str(self.opts.data_dir.resolve()))

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

    async def invoke(self, event: dict[str, Any], timeout_s: float) -> dict[str, Any]:
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
    """Run the local stack until interrupted; the user's task modules are imported from the
    current folder (as ``rq worker`` does), and one that does not import stops the start."""
    here = os.getcwd()
    if here not in sys.path:
        sys.path.insert(0, here)  # spawned sandboxes inherit the parent's sys.path
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (here, os.environ.get("PYTHONPATH", "")) if p
    )
    problem = check_task_modules(os.environ.get("ASYNCZ_TASK_MODULES", ""))
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    with rendering(opts.log_format):
        return DevRunner(opts).run()
