"""``asyncz dev``'s worker fleet on this machine's cores: past one worker sandbox per core,
another starts only while the busy ones leave the cores time (slow I/O), never when they
keep the cores busy (each would add a cold start and contention, no throughput)."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest

from asyncz.local.config import DevOptions
from asyncz.local.lambda_ import workers
from asyncz.local.lambda_.workers import CpuWatch
from asyncz.local.procs import cpu_seconds
from tests.support.waiting import wait_until


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _watching(*pids: int) -> tuple[dict[int, float], _Clock, CpuWatch]:
    """A watch over stand-in processes ``pids`` (their CPU seconds in the dict, 0 now), each
    beginning an invocation now."""
    cpu = dict.fromkeys(pids, 0.0)
    clock = _Clock()
    watch = CpuWatch(read=cpu.get, clock=clock)
    for pid in pids:
        watch.began(pid)
    return cpu, clock, watch


def test_the_cpu_a_process_has_used_is_read_from_proc() -> None:
    spent = cpu_seconds(os.getpid())
    assert spent is not None and spent > 0
    sum(i * i for i in range(2_000_000))  # some CPU of this process's own
    assert (cpu_seconds(os.getpid()) or 0) > spent
    assert cpu_seconds(2**22 + 12345) is None  # no such process


def test_workers_using_a_fifth_of_a_core_each_are_cpu_bound() -> None:
    cpu, clock, watch = _watching(1, 2)
    clock.now += 1.0
    cpu[1] += 0.30  # 0.30 and 0.15 of a core: 0.225 on average
    cpu[2] += 0.15
    assert watch.cpu_bound([1, 2])
    clock.now += 1.0
    cpu[1] += 0.05  # waiting on I/O: 0.05 and 0.15
    cpu[2] += 0.15
    assert not watch.cpu_bound([1, 2])


def test_a_look_too_soon_after_the_last_keeps_its_answer() -> None:
    cpu, clock, watch = _watching(1)
    clock.now += 1.0
    cpu[1] += 0.9
    assert watch.cpu_bound([1])
    clock.now += 0.05  # a burst of decisions within the same instant
    assert watch.cpu_bound([1])
    clock.now += 1.0  # a full window later: idle
    assert not watch.cpu_bound([1])


def test_an_answer_is_not_kept_past_its_window() -> None:
    cpu, clock, watch = _watching(1)
    cpu[2] = 0.0
    clock.now += 1.0
    cpu[1] += 1.0
    assert watch.cpu_bound([1])
    clock.now += 60.0  # a minute later only a sandbox that has just begun is busy
    watch.began(2)
    assert not watch.cpu_bound([2])


def test_what_cannot_be_told_is_not_cpu_bound() -> None:
    assert not CpuWatch(read=lambda pid: None, clock=_Clock()).cpu_bound([1, 2])  # no /proc
    cpu, _, watch = _watching()
    cpu[1] = 0.0
    assert not watch.cpu_bound([1])  # first seen now: no window yet
    assert not watch.cpu_bound([])  # no sandbox busy


def test_a_sandbox_no_longer_busy_is_forgotten() -> None:
    cpu, clock, watch = _watching(1, 2)
    clock.now += 1.0
    cpu[1] += 1.0
    assert watch.cpu_bound([1, 2])  # 0.5 on average
    cpu[2] += 5.0  # sandbox 2 left the busy set and ran elsewhere
    clock.now += 1.0
    assert not watch.cpu_bound([1])
    clock.now += 1.0
    assert not watch.cpu_bound([2])  # seen afresh: no window yet


class _Process:
    def __init__(self, pid: int) -> None:
        self.pid = pid


class _BusySandbox:
    """A ready sandbox whose invocation runs until the test says stop."""

    ready = True

    def __init__(self, pid: int, release: threading.Event) -> None:
        self.process = _Process(pid)
        self.release = release

    def alive(self) -> bool:
        return True

    def stop(self, grace_s: float = 0) -> None:
        return None


@pytest.mark.parametrize(("share", "started"), [(0.9, False), (0.01, True)])
def test_past_a_sandbox_per_core_one_starts_only_while_the_cores_have_time(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], share: float, started: bool
) -> None:
    cpu: dict[int, float] = {}
    clock = _Clock()
    release = threading.Event()
    pids = iter(range(1, 100))
    spawned: list[_BusySandbox] = []

    def spawn() -> _BusySandbox:
        sandbox = _BusySandbox(next(pids), release)
        cpu[sandbox.process.pid] = 0.0
        spawned.append(sandbox)
        return sandbox

    def invoke_once(sandbox: Any, *, quiet: bool = False) -> bool:
        release.wait(10)
        return True

    monkeypatch.setattr(workers, "local_cores", lambda: 1)
    stopping = threading.Event()
    fleet = workers.WorkerFleet({}, DevOptions(max_worker_sandboxes=4), stopping)
    fleet._cpu = CpuWatch(read=cpu.get, clock=clock)
    monkeypatch.setattr(fleet, "_spawn", spawn)
    monkeypatch.setattr(fleet, "_invoke_once", invoke_once)
    try:
        assert fleet.invoke()  # the first sandbox: under one per core, no question asked
        wait_until(lambda: fleet.counts[0] == 1 and 1 in fleet._cpu._seen)
        clock.now += 1.0
        cpu[1] += share
        assert fleet.invoke() is started
        assert fleet.invoke() is started  # asked again at once: the same answer
        assert ("keep every core busy" in capsys.readouterr().out) is not started
        wait_until(lambda: len(spawned) == (3 if started else 1))
    finally:
        release.set()
        stopping.set()
        fleet.stop(grace_s=1)


def test_a_fixed_count_of_workers_is_never_held_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """``asyncz dev --workers N``: exactly N, whatever the cores."""
    release = threading.Event()
    pids = iter(range(1, 100))
    monkeypatch.setattr(workers, "local_cores", lambda: 1)
    stopping = threading.Event()
    fleet = workers.WorkerFleet({}, DevOptions(workers=3), stopping)
    fleet._cpu = CpuWatch(read=lambda pid: 1e9, clock=_Clock())  # as busy as can be
    monkeypatch.setattr(fleet, "_spawn", lambda: _BusySandbox(next(pids), release))
    monkeypatch.setattr(fleet, "_invoke_once", lambda s, quiet=False: release.wait(10))
    try:
        assert all(fleet.invoke(repeat=True) for _ in range(3))
        wait_until(lambda: fleet.counts[0] == 3)
    finally:
        release.set()
        stopping.set()
        fleet.stop(grace_s=1)


def test_invocations_still_starting_count_against_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two invokes a few milliseconds apart: the first one's sandbox is not busy yet (its
    process is still being started), and the cap must count it all the same."""
    spawning, release = threading.Event(), threading.Event()
    pids = iter(range(1, 100))

    def slow_spawn() -> _BusySandbox:
        spawning.wait(10)
        return _BusySandbox(next(pids), release)

    stopping = threading.Event()
    fleet = workers.WorkerFleet({}, DevOptions(max_worker_sandboxes=2), stopping)
    fleet._cpu = CpuWatch(read=lambda pid: None)  # the gate cannot tell: the cap alone
    monkeypatch.setattr(fleet, "_spawn", slow_spawn)
    monkeypatch.setattr(fleet, "_invoke_once", lambda s, quiet=False: release.wait(10))
    try:
        assert fleet.invoke() and fleet.invoke()
        assert not fleet.invoke()  # both still starting: at the cap
        spawning.set()
        wait_until(lambda: fleet.counts[0] == 2)
        assert not fleet.invoke()
    finally:
        spawning.set()
        release.set()
        stopping.set()
        fleet.stop(grace_s=1)
