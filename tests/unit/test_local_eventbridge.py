"""The local EventBridge's rules: each tick invokes the function's sandbox with the timeout
the deployed function has (the fleet: its rule's interval, so its wait for wakes ends
before the next tick)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from asyncz.local.eventbridge import RateRule, fleet_rule

pytestmark = pytest.mark.unit


class FakeSandbox:
    def __init__(self, stopping: threading.Event) -> None:
        self.stopping = stopping
        self.timeouts: list[float] = []

    def alive(self) -> bool:
        return True

    def wait_ready(self) -> float:
        return 0.0

    def invoke(self, event: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        self.timeouts.append(timeout_s)
        self.stopping.set()  # one tick is enough
        return {"ok": True, "result": {}}

    def stop(self, grace_s: float = 0) -> None:
        return None


def one_tick(make: Any) -> list[float]:
    stopping = threading.Event()
    sandbox = FakeSandbox(stopping)
    rule = make(lambda: sandbox, stopping)
    rule.start()
    rule.thread.join(10)
    assert not rule.thread.is_alive()
    return sandbox.timeouts


def test_each_fleet_tick_has_its_interval_as_timeout() -> None:
    assert one_tick(lambda make, stop: fleet_rule(60.0, make, stop)) == [60.0]
    assert one_tick(lambda make, stop: fleet_rule(5.0, make, stop)) == [5.0]


def test_a_rule_without_a_timeout_gives_the_lambda_maximum() -> None:
    assert one_tick(lambda make, stop: RateRule("recovery", 60.0, make, stop)) == [900.0]


def test_an_async_invoke_runs_the_rules_function_before_its_interval_is_up() -> None:
    stopping = threading.Event()
    runs: list[float] = []
    second = threading.Event()

    class Counting(FakeSandbox):
        def invoke(self, event: dict[str, Any], timeout_s: float) -> dict[str, Any]:
            runs.append(timeout_s)
            if len(runs) == 2:
                second.set()
            return {"ok": True, "result": {}}

    rule = RateRule("events", 3600.0, lambda: Counting(stopping), stopping, timeout_s=60.0)
    rule.start()
    rule.poke()  # the events function woken by a process that committed ends
    assert second.wait(10), "the poke did not run the function"
    stopping.set()
    rule.stop(grace_s=1)
    assert not rule.thread.is_alive() and runs[:2] == [60.0, 60.0]
