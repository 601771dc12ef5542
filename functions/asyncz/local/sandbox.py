"""Lambda-like sandboxes: a context object, and a process that imports a handler once and then
serves invocations one at a time over a pipe, warm, like a Lambda execution environment.

Messages (dicts) on the pipe: parent → sandbox ``{"type": "invoke", "event", "request_id",
"timeout_s"}``; sandbox → parent ``{"type": "ready"}`` once initialised, ``{"type": "result",
"ok", "result" | "error"}`` per invocation. Functions that invoke others (the api waking a
worker, the fleet starting workers) do it as in AWS, with boto3, through the runner's local
Lambda endpoint (:mod:`asyncz.local.lambda_endpoint`): one invoke path.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import pickle
import signal
import sys
import threading
import time
import traceback
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, NoReturn

from asyncz.local.context import LambdaContext

Handler = Callable[[dict[str, Any], Any], Any]


def load_handler(path: str) -> Handler:
    """Import ``package.module.attr`` (or ``package.module:attr``)."""
    module_name, _, attr = path.replace(":", ".").rpartition(".")
    handler: Handler = getattr(importlib.import_module(module_name), attr)
    return handler


@dataclass(frozen=True)
class SandboxSpec:
    """What a sandbox process runs: a handler by dotted path, its function name and env."""

    name: str  # e.g. "worker-3"
    function_name: str  # e.g. "asyncz-local-worker"
    handler: str  # dotted path of handler(event, context)
    env: dict[str, str] = field(default_factory=dict)
    memory_mb: int = 1024


def _watch_parent(parent_pid: int) -> None:
    # A sandbox never outlives its runner, even when the runner is SIGKILLed alone.
    while True:
        time.sleep(0.5)
        if os.getppid() != parent_pid:
            os._exit(1)


def _exit_now(code: int = 0) -> NoReturn:
    # Like a Lambda environment being reclaimed: no interpreter teardown (which would only
    # complain about the handler's still-open pools), just flushed output.
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def sandbox_main(conn: Connection, spec: SandboxSpec, parent_pid: int) -> None:
    """Entry point of a sandbox process (multiprocessing ``spawn`` target)."""
    # Ctrl-C reaches the whole process group; the runner decides the shutdown order.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True).start()
    os.environ.update(spec.env)
    # Powertools warns on every invocation that records no metric; that is normal here.
    warnings.filterwarnings("ignore", message="No application metrics to publish")
    current: list[LambdaContext] = []
    stopping = threading.Event()

    def on_term(_signum: int, _frame: Any) -> None:
        # Like Lambda's shutdown: the deadline comes forward and the handler should return.
        stopping.set()
        for ctx in current:
            ctx.expire()
        if not current:
            _exit_now()

    signal.signal(signal.SIGTERM, on_term)
    started = time.monotonic()
    try:
        handler = load_handler(spec.handler)
    except BaseException as exc:  # noqa: BLE001 - any init failure, as Runtime.ImportModuleError
        conn.send(
            {
                "type": "init_error",
                "error": f"{type(exc).__name__}: {exc}",
                "trace": traceback.format_exc(),
            }
        )
        return
    asyncio.set_event_loop(asyncio.new_event_loop())  # Mangum runs on this thread's loop
    conn.send({"type": "ready", "init_ms": round((time.monotonic() - started) * 1000, 1)})
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            _exit_now()
        if msg.get("type") != "invoke":
            _exit_now()
        ctx = LambdaContext(
            spec.function_name,
            float(msg["timeout_s"]),
            request_id=msg.get("request_id"),
            memory_limit_in_mb=spec.memory_mb,
            log_stream_name=spec.name,
        )
        current.append(ctx)
        try:
            result = handler(msg["event"], ctx)
            reply: dict[str, Any] = {"type": "result", "ok": True, "result": result}
        except Exception as exc:  # noqa: BLE001 - a handler error is the invocation's result
            reply = {
                "type": "result",
                "ok": False,
                "error": f"{type(exc).__name__}: {exc}",
                "trace": traceback.format_exc(),
            }
        finally:
            current.remove(ctx)
        try:
            conn.send_bytes(_pickled(reply))
        except (TypeError, ValueError, pickle.PicklingError) as exc:  # an unpicklable result
            conn.send({"type": "result", "ok": False, "error": f"unserialisable result: {exc}"})
        except OSError:
            _exit_now()
        if stopping.is_set():
            _exit_now()


def _pickled(msg: dict[str, Any]) -> bytes:
    """What ``Connection.send`` writes, without building a ForkingPickler per message."""
    return pickle.dumps(msg, pickle.HIGHEST_PROTOCOL)


class SandboxError(RuntimeError):
    """A sandbox failed to start, crashed, or timed out."""


class SandboxTimeoutError(SandboxError, TimeoutError):
    """An invocation outlived the time the caller would wait for it."""


def _wait_bound(timeout_s: float, wait_s: float | None) -> float:
    """How long a caller waits for a reply: ``wait_s``, else the invocation's timeout plus a
    margin for the sandbox to report it."""
    return wait_s if wait_s is not None else timeout_s + 5


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running on this thread, if any."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _no_reply(future: asyncio.Future[Any]) -> None:
    if not future.done():
        future.set_result(None)


class SandboxProcess:
    """Parent-side handle of one sandbox process; :meth:`invoke` runs one invocation in it."""

    def __init__(self, spec: SandboxSpec) -> None:
        import multiprocessing

        self.spec = spec
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self.process = ctx.Process(
            target=sandbox_main, args=(child, spec, os.getpid()), name=spec.name, daemon=False
        )
        self._lock = threading.Lock()
        self._watcher: asyncio.AbstractEventLoop | None = None  # the loop watching the pipe
        self._waiter: asyncio.Future[Any] | None = None  # an invocation awaiting its reply
        self.invocations = 0
        self.last_used = time.monotonic()
        self.broken = False
        self.ready = False
        self.process.start()
        child.close()

    def wait_ready(self, timeout: float = 60) -> float:
        """Wait for the sandbox's init phase; return its duration in ms."""
        msg = self._recv(timeout)
        if msg.get("type") != "ready":
            self.broken = True
            raise SandboxError(
                f"{self.spec.name} failed to initialise: {msg.get('error')}\n{msg.get('trace', '')}"
            )
        self.ready = True
        return float(msg.get("init_ms", 0.0))

    def _recv(self, timeout: float) -> dict[str, Any]:
        if not self._conn.poll(timeout):
            self.broken = True
            raise SandboxTimeoutError(f"{self.spec.name} timed out after {timeout:.0f}s")
        return self._read()

    def _read(self) -> dict[str, Any]:
        try:
            msg: dict[str, Any] = self._conn.recv()
        except (EOFError, OSError) as exc:
            self.broken = True
            raise SandboxError(
                f"{self.spec.name} died (exit code {self.process.exitcode})"
            ) from exc
        return msg

    def _begin(self, event: dict[str, Any], timeout_s: float, request_id: str | None) -> None:
        self.invocations += 1
        msg = {
            "type": "invoke",
            "event": event,
            "timeout_s": timeout_s,
            "request_id": request_id or str(uuid.uuid4()),
        }
        self._conn.send_bytes(_pickled(msg))

    def invoke(
        self,
        event: dict[str, Any],
        timeout_s: float,
        *,
        request_id: str | None = None,
        wait_s: float | None = None,
    ) -> dict[str, Any]:
        """Run one invocation and return the reply; ``wait_s`` bounds the wait."""
        with self._lock:
            self._begin(event, timeout_s, request_id)
            deadline = time.monotonic() + _wait_bound(timeout_s, wait_s)
            try:
                return self._recv(max(0.0, deadline - time.monotonic()))
            finally:
                self.last_used = time.monotonic()

    async def ainvoke(
        self,
        event: dict[str, Any],
        timeout_s: float,
        *,
        request_id: str | None = None,
        wait_s: float | None = None,
    ) -> dict[str, Any]:
        """:meth:`invoke` on an event loop: the loop watches the pipe, no thread waits.

        The first call registers the pipe with the running loop for good (one registration,
        not two system calls per invocation); :meth:`unwatch` ends it, on the same loop.
        """
        if not self._lock.acquire(blocking=False):
            raise SandboxError(f"{self.spec.name} is already serving an invocation")
        loop = asyncio.get_running_loop()
        try:
            self._watch(loop)
            self._begin(event, timeout_s, request_id)
            deadline = loop.time() + _wait_bound(timeout_s, wait_s)
            msg: dict[str, Any] = await self._next_message(loop, deadline)
            return msg
        except asyncio.CancelledError:
            self.broken = True  # its reply would answer the next invocation: retire it
            raise
        finally:
            self.last_used = time.monotonic()
            self._lock.release()

    def _watch(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._watcher is loop:
            return
        if self._watcher is not None and not self._watcher.is_closed():
            raise SandboxError(f"{self.spec.name} is watched by another event loop")
        loop.add_reader(self._conn.fileno(), self._on_readable)
        self._watcher = loop

    def unwatch(self) -> None:
        """Stop watching the pipe (call on the watching loop's thread, before :meth:`stop`)."""
        if self._watcher is not None:
            if not self._watcher.is_closed():
                self._watcher.remove_reader(self._conn.fileno())
            self._watcher = None

    def _on_readable(self) -> None:
        # Read here, in the loop's callback: a drained pipe cannot report a stale readiness.
        waiter = self._waiter
        try:
            msg = self._read()  # a whole message follows readiness (written in one go)
        except SandboxError as exc:  # EOF: the process is gone (``broken`` is set)
            self.unwatch()
            if waiter is not None and not waiter.done():
                waiter.set_exception(exc)
            return
        if waiter is None or waiter.done():
            # Spoke out of turn (a reply after its invocation gave up): it cannot serve the
            # next request; the pool sees it is not alive and replaces it.
            self.broken = True
            self.unwatch()
            return
        waiter.set_result(msg)

    async def _next_message(self, loop: asyncio.AbstractEventLoop, deadline: float) -> Any:
        self._waiter = waiting = loop.create_future()
        timer = loop.call_at(deadline, _no_reply, waiting)
        try:
            msg = await waiting
        finally:
            self._waiter = None
            timer.cancel()
        if msg is None:
            self.broken = True
            raise SandboxTimeoutError(f"{self.spec.name} did not answer in time")
        return msg

    def alive(self) -> bool:
        return self.process.is_alive() and not self.broken

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM (the handler's deadline comes forward), then SIGKILL after ``grace_s``."""
        watcher = self._watcher
        if watcher is not None and not watcher.is_closed():
            if running_loop() is watcher:
                self.unwatch()
            else:  # the closed pipe's registration must go on the loop's own thread
                with contextlib.suppress(RuntimeError):
                    watcher.call_soon_threadsafe(self.unwatch)
        if self.process.is_alive():
            if self.process.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.process.pid, signal.SIGTERM)
            self.process.join(grace_s)
            if self.process.is_alive():
                self.process.kill()
                self.process.join(5)
        with contextlib.suppress(OSError):
            self._conn.close()
