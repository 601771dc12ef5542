"""Lambda-like sandboxes: a process that imports a handler once and then serves invocations one
at a time, warm, like a Lambda execution environment.

The process runs :mod:`asyncz.local.lambda_.bootstrap`, the runtime loop the LocalStack
executor runs too: one protocol (JSON lines over two pipes). Functions that invoke others
(the api waking a worker, the fleet starting workers) do it as in AWS, with boto3, through
the runner's local Lambda endpoint (:mod:`asyncz.local.lambda_.endpoint`): one invoke path.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

BOOTSTRAP_MODULE = "asyncz.local.lambda_.bootstrap"
# Powertools warns on every invocation that records no metric; that is normal here.
QUIET_WARNINGS = "ignore:No application metrics to publish"


@dataclass(frozen=True)
class SandboxSpec:
    """What a sandbox process runs: a handler by dotted path, its function name and env."""

    name: str  # e.g. "worker-3"
    function_name: str  # e.g. "asyncz-local-worker"
    handler: str  # dotted path of handler(event, context)
    env: dict[str, str] = field(default_factory=dict)
    memory_mb: int = 1024

    def environment(self) -> dict[str, str]:
        return {
            **os.environ,
            "PYTHONWARNINGS": QUIET_WARNINGS,
            **self.env,
            "_HANDLER": self.handler,
            "AWS_LAMBDA_FUNCTION_NAME": self.function_name,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(self.memory_mb),
            "AWS_LAMBDA_LOG_STREAM_NAME": self.name,
        }


def _reply(message: dict[str, Any]) -> dict[str, Any]:
    """The runtime's message as the runner reads it: ``result`` (the handler's return value) or
    ``error`` (``Type: message``) and ``trace``."""
    kind = message.get("type")
    if kind == "init_error":
        return {"type": kind, **_error_fields(message["error"])}
    if kind != "result":
        return message
    if "result" in message:  # an event sent as an object is answered with one
        return {"type": kind, "ok": True, "result": message["result"]}
    body = json.loads(message["payload"])
    if message.get("ok"):
        return {"type": kind, "ok": True, "result": body}
    return {"type": kind, "ok": False, **_error_fields(body)}


def _error_fields(error: dict[str, Any]) -> dict[str, Any]:
    return {
        "error": f"{error.get('errorType')}: {error.get('errorMessage')}",
        "trace": "".join(error.get("stackTrace") or []),
    }


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
        self.spec = spec
        cmd_r, cmd_w = os.pipe()
        res_r, res_w = os.pipe()
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", BOOTSTRAP_MODULE, str(cmd_r), str(res_w), spec.name],
                env=spec.environment(),
                stdin=subprocess.DEVNULL,
                pass_fds=(cmd_r, res_w),
            )
        finally:
            os.close(cmd_r)
            os.close(res_w)
        self._cmd, self._res = cmd_w, res_r
        self._buffer = b""
        self._lock = threading.Lock()
        self._watcher: asyncio.AbstractEventLoop | None = None  # the loop watching the pipe
        self._waiter: asyncio.Future[Any] | None = None  # an invocation awaiting its reply
        self.invocations = 0
        self.last_used = time.monotonic()
        self.broken = False
        self.ready = False

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
        deadline = time.monotonic() + timeout
        while (msg := self._take()) is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self._res], [], [], remaining)[0]:
                self.broken = True
                raise SandboxTimeoutError(f"{self.spec.name} timed out after {timeout:.0f}s")
            self._fill()
        return msg

    def _fill(self) -> None:
        """Read what the pipe holds (it is readable); end of file means the process is gone."""
        try:
            chunk = os.read(self._res, 1 << 16)
        except OSError:
            chunk = b""
        if not chunk:
            self.broken = True
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(1)
            raise SandboxError(f"{self.spec.name} died (exit code {self.process.returncode})")
        self._buffer += chunk

    def _take(self) -> dict[str, Any] | None:
        """The next whole message read, if any."""
        line, newline, rest = self._buffer.partition(b"\n")
        if not newline:
            return None
        self._buffer = rest
        return _reply(json.loads(line))

    def _begin(self, event: dict[str, Any], timeout_s: float, request_id: str | None) -> None:
        self.invocations += 1
        msg = {
            "type": "invoke",
            "request_id": request_id or str(uuid.uuid4()),
            "event": event,  # one encoding (and one decoding) of the event, not two
            "deadline_ms": int((time.time() + timeout_s) * 1000),
        }
        try:
            os.write(self._cmd, json.dumps(msg).encode() + b"\n")
        except BrokenPipeError as exc:  # its process ended since it was last looked at
            self.broken = True
            raise SandboxError(f"{self.spec.name} died before the invocation") from exc

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
        loop.add_reader(self._res, self._on_readable)
        self._watcher = loop

    def unwatch(self) -> None:
        """Stop watching the pipe (call on the watching loop's thread, before :meth:`stop`)."""
        if self._watcher is not None:
            if not self._watcher.is_closed():
                self._watcher.remove_reader(self._res)
            self._watcher = None

    def _on_readable(self) -> None:
        # Read here, in the loop's callback: a drained pipe cannot report a stale readiness.
        waiter = self._waiter
        try:
            self._fill()
            msg = self._take()
        except SandboxError as exc:  # EOF: the process is gone (``broken`` is set)
            self.unwatch()
            if waiter is not None and not waiter.done():
                waiter.set_exception(exc)
            return
        if msg is None:
            return  # a part of a line: the rest follows
        if waiter is None or waiter.done() or self._buffer:
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
        return self.process.poll() is None and not self.broken

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM (the handler's deadline comes forward), then SIGKILL after ``grace_s``."""
        watcher = self._watcher
        if watcher is not None and not watcher.is_closed():
            if running_loop() is watcher:
                self.unwatch()
            else:  # the closed pipe's registration must go on the loop's own thread
                with contextlib.suppress(RuntimeError):
                    watcher.call_soon_threadsafe(self.unwatch)
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(grace_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        for fd in (self._cmd, self._res):
            with contextlib.suppress(OSError):
                os.close(fd)
