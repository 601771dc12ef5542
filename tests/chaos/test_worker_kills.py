"""Scenario 1: random worker processes SIGKILLed, again and again, during a 1,000-job run."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.chaos import chaos_settings, mixed_jobs, submit_jobs
from tests.support.fleet import Fleet, RecoveryLoop
from tests.support.ledger import check_ledger, non_terminal, wait_terminal
from tests.support.private_servers import RedisServer

pytestmark = pytest.mark.chaos

JOBS = 1000
WORKERS = 3
CONCURRENCY = 4
CHAOS_SECONDS = 20.0


class Killer:
    """Every 0.5-1 s: SIGKILL one random live worker and start a replacement."""

    def __init__(self, fleet: Fleet, seed: int, until: Callable[[], bool]) -> None:
        self.fleet = fleet
        self.rand = random.Random(seed)
        self.until = until
        self.kills = 0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._main, name="chaos-killer", daemon=True)

    def _main(self) -> None:
        deadline = time.monotonic() + CHAOS_SECONDS
        while not self.stopped.wait(self.rand.uniform(0.5, 1.0)):
            if time.monotonic() > deadline or self.until():
                break
            alive = self.fleet.alive()
            if alive:
                victim = self.rand.choice(alive)
                os.killpg(victim.pid, signal.SIGKILL)
                victim.wait(10)
                self.kills += 1
            while len(self.fleet.alive()) < WORKERS:
                self.fleet.start(concurrency=CONCURRENCY)


def test_random_worker_sigkills_during_a_thousand_job_run(
    chaos_db: str,
    own_redis: RedisServer,
    tmp_path: Path,
    fleet_factory: Callable[..., Fleet],
    recovery_factory: Callable[..., RecoveryLoop],
) -> None:
    settings = chaos_settings(chaos_db, own_redis.url, tmp_path)
    ids = asyncio.run(submit_jobs(settings, mixed_jobs(JOBS, sleep_max=0.5)))
    fleet = fleet_factory(settings)
    for _ in range(WORKERS):
        fleet.start(concurrency=CONCURRENCY)
    recovery = recovery_factory(settings, interval=1.0)
    seed = int(os.environ.get("CHAOS_SEED", time.time_ns() % 10_000))
    # keep killing until the last job is done (or CHAOS_SECONDS have passed)
    killer = Killer(fleet, seed, until=lambda: non_terminal(chaos_db) == 0)
    killer.thread.start()
    try:
        killer.thread.join(CHAOS_SECONDS + 10)
        wait_terminal(chaos_db, JOBS, timeout=90)
    finally:
        killer.stopped.set()
        killer.thread.join(10)
        recovery.stop()
        fleet.stop_all()
    book = check_ledger(chaos_db, ids)
    print(f"seed={seed} kills={killer.kills} {book['status']} {book['outcomes']}")
    assert killer.kills >= 8, f"only {killer.kills} kills: the fault was barely injected"
    # the kills were felt, and each lost attempt is on the record
    assert book["outcomes"].get("lost", 0) >= 1, book["outcomes"]
    assert book["status"].get("completed", 0) >= JOBS * 0.9, book["status"]
    assert recovery.requeued + recovery.dead == book["outcomes"]["lost"]
