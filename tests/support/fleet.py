"""Processes a chaos scenario runs and kills: worker fleets, a recovery loop on a thread, the
api Lambda handler in a sandbox process."""

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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from asyncz.settings import Settings
from tests.support.chaos import REPO, chaos_env
from tests.support.settings import open_service
from tests.support.workers import start_worker


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
