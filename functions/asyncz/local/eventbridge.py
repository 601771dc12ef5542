"""The local EventBridge: rate rules that invoke the fleet, recovery and events functions
every interval, as the stack's minute rules do in AWS."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from asyncz.local.context import log_line
from asyncz.local.lambda_.sandbox import SandboxError, SandboxProcess


class RateRule:
    """An EventBridge-like rate rule: invokes a function sandbox now, then every interval."""

    def __init__(
        self,
        name: str,
        interval_s: float,
        make_sandbox: Callable[[], SandboxProcess],
        stopping: threading.Event,
        timeout_s: float = 900.0,
    ) -> None:
        self.name = name
        self.timeout_s = timeout_s  # each invocation's, as its Lambda's timeout
        self.interval_s = interval_s
        self.make_sandbox = make_sandbox
        self.stopping = stopping
        self.sandbox: SandboxProcess | None = None
        self.woken = threading.Event()  # an async invoke between two of the rule's runs
        self.thread = threading.Thread(target=self._loop, name=f"rule-{name}", daemon=True)

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
                reply = self.sandbox.invoke({}, self.timeout_s)
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
            if self.stopping.is_set():
                break
            self.woken.wait(max(0.0, self.interval_s - (time.monotonic() - started)))
            self.woken.clear()

    def poke(self) -> None:
        """An async invoke of the function: run it now (invokes during a run fold into one
        run after it), then go on with the interval."""
        self.woken.set()

    def stop(self, grace_s: float) -> None:
        self.woken.set()
        if self.sandbox is not None:
            self.sandbox.stop(grace_s)
        self.thread.join(grace_s + 5)


def fleet_rule(
    interval_s: float, make_sandbox: Callable[[], SandboxProcess], stopping: threading.Event
) -> RateRule:
    """The fleet's rule. Each tick's timeout is the interval, as the stack gives the fleet
    the rule's minute: the fleet waits for the wakes due before its timeout (less a margin),
    so one tick ends before the next is due."""
    return RateRule("fleet", interval_s, make_sandbox, stopping, timeout_s=interval_s)
