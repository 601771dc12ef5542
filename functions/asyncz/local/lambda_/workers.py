"""The worker fleet: async invocations of the worker function, each run in a worker sandbox
(started as needed, up to the runner's limit, reused while warm)."""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Callable, Iterable

from asyncz.local.config import FUNCTION_PREFIX, WORKER_HANDLER, DevOptions, local_cores
from asyncz.local.context import log_line
from asyncz.local.lambda_.sandbox import SandboxError, SandboxProcess, SandboxSpec
from asyncz.local.procs import cpu_seconds

FAILURE_BACKOFF_S = 1.0
FAILURE_BACKOFF_MAX_S = 30.0
# Past one worker sandbox per core, another starts only while the busy ones use less than
# this share of a core each (on average, since each began its invocation or was last looked
# at): workers that spend their time waiting (slow I/O) still get every sandbox the cap
# allows, and workers that keep the cores busy get no cold start that adds no throughput.
CPU_BOUND_SHARE = 0.2
MIN_WINDOW_S = 0.25  # a shorter look says too little about a sandbox's CPU


class CpuWatch:
    """How much of a core each busy worker sandbox has used lately."""

    def __init__(
        self,
        read: Callable[[int], float | None] = cpu_seconds,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read, self._clock = read, clock
        self._seen: dict[int, tuple[float, float]] = {}  # pid: (when, CPU seconds)
        self._bound, self._told_at = False, float("-inf")  # the last answer told, and when

    def began(self, pid: int) -> None:
        """``pid`` began an invocation: its share counts from here (not its init's imports)."""
        cpu = self._read(pid)
        if cpu is not None:
            self._seen[pid] = (self._clock(), cpu)

    def cpu_bound(self, pids: Iterable[int]) -> bool:
        """Whether the sandboxes ``pids`` used at least ``CPU_BOUND_SHARE`` of a core each, on
        average, since they were last looked at; a look within ``MIN_WINDOW_S`` of the last answer
        keeps it. False when it cannot be told (no ``/proc``, no sandbox seen long enough)."""
        now, shares, seen = self._clock(), [], {}
        for pid in pids:
            cpu, last = self._read(pid), self._seen.get(pid)
            if cpu is None:
                continue
            if last is None or now - last[0] < MIN_WINDOW_S:
                seen[pid] = last or (now, cpu)
                continue
            shares.append((cpu - last[1]) / (now - last[0]))
            seen[pid] = (now, cpu)
        self._seen = seen  # sandboxes no longer busy are forgotten
        if shares:
            self._bound, self._told_at = sum(shares) / len(shares) >= CPU_BOUND_SHARE, now
        elif now - self._told_at >= MIN_WINDOW_S:
            self._bound = False  # nothing measured lately
        return self._bound


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
        self._cpu = CpuWatch()
        self._deferred = False  # said once that a start waits for the cores
        self._handed = 0  # invocations handed to a thread, their sandbox not yet busy

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
            running = len(self._busy) + self._handed
            if running >= max(self.opts.max_worker_sandboxes, self.opts.workers or 0):
                log_line("fleet", "worker invocation throttled: all sandboxes busy", "WARNING")
                return False
            sandbox = self._take_idle()
            if sandbox is None and not repeat and self._cores_taken(running):
                return False
            self._handed += 1
            thread = threading.Thread(
                target=self._run, args=(sandbox, repeat), name="worker-invoker", daemon=True
            )
            self._threads.append(thread)
        thread.start()
        return True

    def _take_idle(self) -> SandboxProcess | None:
        """A warm sandbox for the next invocation. One that died while idle (killed, out of
        memory) is put away: Lambda never hands an invocation to an environment that is gone."""
        while self._idle:
            sandbox = self._idle.pop()
            if sandbox.alive():
                return sandbox
            sandbox.stop(grace_s=0)
        return None

    def _cores_taken(self, running: int) -> bool:
        """A new sandbox would add a cold start, not throughput: there is one per core, and
        they keep the cores busy (``CPU_BOUND_SHARE``). Said once until a sandbox starts."""
        busy = running >= local_cores() and self._cpu.cpu_bound(
            s.process.pid
            for s in self._busy
            if s.ready  # an init's imports say nothing
        )
        if busy and not self._deferred:
            log_line("fleet", "no worker sandbox started: the workers keep every core busy")
        self._deferred = busy
        return busy

    def _run(self, sandbox: SandboxProcess | None, repeat: bool) -> None:
        try:
            try:
                if sandbox is None:
                    sandbox = self._spawn()
            finally:
                with self._lock:
                    self._handed -= 1
                    if sandbox is not None:
                        self._busy.add(sandbox)
            if not sandbox.ready:
                init_ms = sandbox.wait_ready()
                log_line("sandbox", "INIT", sandbox=sandbox.spec.name, init_ms=init_ms)
            failures = 0
            while not self.stopping.is_set():
                with self._lock:
                    self._cpu.began(sandbox.process.pid)
                if self._invoke_once(sandbox, quiet=failures > 0):
                    failures = 0
                elif repeat:
                    # A worker that cannot start (a task module that does not import, a
                    # dependency down) must not spin: back off, and say why only once.
                    failures += 1
                    delay = min(FAILURE_BACKOFF_MAX_S, FAILURE_BACKOFF_S * 2 ** (failures - 1))
                    if failures == 1:
                        log_line("fleet", "worker keeps failing: backing off", "WARNING")
                    if self.stopping.wait(delay):
                        break
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

    def _invoke_once(self, sandbox: SandboxProcess, *, quiet: bool = False) -> bool:
        """One invocation; True when it succeeded. ``quiet``: a failure is not logged (the
        loop already said why once and is backing off)."""
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
            return False
        ok = bool(reply.get("ok"))
        if quiet and not ok:
            return False
        level = "INFO" if ok else "ERROR"
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
        return ok

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
