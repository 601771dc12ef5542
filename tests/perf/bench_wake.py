"""Wake benchmark: how late after its due time a delayed job (a retry's backoff, a durable
sleep, ``delay_seconds``) gets going when no worker is busy, over real PostgreSQL and Redis.

- fleet: no worker alive; the fleet's wait (``asyncz.fleet.wakes.wait_for_wakes``) promotes
  the id and invokes a worker. Lag = the invoke's time − the id's due time (one clock). The
  worker's start comes on top (docs/cost.md: ~50–100 ms warm, ~1.2 s cold).
- worker stays: an idle worker whose idle window (1 s) runs out with the wake due within
  one more window. Lag = the attempt's ``started_at`` − the job's ``run_at`` (both
  PostgreSQL's clock).
- worker polls: an idle worker (window 5 s, poll 5 s) whose poll ends at the wake.

    .venv/bin/python -m tests.perf.bench_wake --repeat 10
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable

import psycopg

from asyncz.broker.redis import RedisBroker
from asyncz.fleet.wakes import wait_for_wakes
from asyncz.jobs import NewJob
from asyncz.port_types import Dispatch, epoch_ms
from asyncz.settings import Settings
from asyncz.worker.loop import WorkerLoop
from tests.perf.common import DB, PREFIX, REDIS, load_line, machine, prepare
from tests.support.settings import open_service

SETTINGS = Settings(database_url=DB, redis_url=REDIS, redis_prefix=PREFIX)


def invoked_at(times: list[float]) -> Callable[[], None]:
    return lambda: times.append(time.time() * 1000)


async def fleet_lags(repeat: int) -> list[float]:
    broker = RedisBroker.from_url(REDIS, prefix=PREFIX)
    lags: list[float] = []
    try:
        for i in range(repeat):
            due = epoch_ms() + 1500 + (i * 97) % 700  # a spread of sub-second phases
            await broker.enqueue([Dispatch(f"wake-{i}", "default", 0, due, False)])
            invoked: list[float] = []
            until = time.monotonic() + 10
            await wait_for_wakes(broker, SETTINGS, until, invoked_at(invoked))
            lags.append(invoked[0] - due)
            await broker.pop(["default"], 10, 0.01)  # the worker took it
            while await broker.starting_workers():  # and registered
                await broker.worker_started()
    finally:
        await broker.close()
    return lags


async def worker_lag(delay: float, idle_exit: float) -> float:
    async with open_service(SETTINGS) as svc:
        job = await svc.submit(NewJob(task="echo", payload={}, delay_seconds=delay))
        out = await WorkerLoop(
            svc, remaining_seconds=lambda: 3600, idle_exit_seconds=idle_exit
        ).run()
    assert out["completed"] == 1, out
    with psycopg.connect(DB) as conn:
        row = conn.execute(
            "SELECT extract(epoch FROM started_at - run_at) * 1000 FROM jobs WHERE id = %s",
            (job.job_id,),
        ).fetchone()
    assert row is not None
    return float(row[0])


def line(name: str, lags: list[float]) -> str:
    return (
        f"{name}: n={len(lags)} median {statistics.median(lags):.1f} ms, "
        f"max {max(lags):.1f} ms, min {min(lags):.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    prepare()
    print(machine())
    print(load_line())
    print(line("fleet (due → worker invoked)", asyncio.run(fleet_lags(args.repeat))))
    stays = [asyncio.run(worker_lag(1.6 + i * 0.037, 1.0)) for i in range(args.repeat)]
    print(line("worker stays (due → attempt started)", stays))
    polls = [asyncio.run(worker_lag(2.3 + i * 0.037, 5.0)) for i in range(args.repeat)]
    print(line("worker polls (due → attempt started)", polls))


if __name__ == "__main__":
    main()
