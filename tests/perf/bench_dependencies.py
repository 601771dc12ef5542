"""The cost of job dependencies, as ratios measured in the same run (alternated rounds):

- **edge**: ``--jobs`` single submits through the job service, each naming one live parent
  (it waits), ÷ the same submits without ``depends_on``; and one submit naming 1,000 parents.
- **fan-in**: a graph of 1 → 500 → 1 in one ``submit_many``, drained by ``--workers`` worker
  processes (first submit → the merge's ``finished_at``) ÷ 502 independent jobs (two
  ``submit_many``: a plain batch holds 500) drained by the same workers (first submit → last
  ``finished_at``).

    .venv/bin/python -m tests.perf.bench_dependencies --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from typing import Any

import psycopg

from asyncz.jobs import Dependency, NewJob
from asyncz.service import JobService
from tests.perf.common import DB, PREFIX, REDIS, bench_env, command, load_line, machine, prepare

WIDTH = 500


def settings() -> Any:
    from asyncz.settings import Settings

    return Settings(
        database_url=DB, redis_url=REDIS, redis_prefix=PREFIX, wake_worker=False,
        publish_gauges=False, task_modules="tests.support.workflow_tasks",
    )  # fmt: skip


async def edge_round(svc: JobService, n: int, with_parent: bool) -> float:
    """Seconds per submit."""
    parent = (await svc.submit(NewJob(task="wf_part", payload={}, delay_seconds=3600))).job_id
    deps = (Dependency(parent),) if with_parent else ()
    started = time.perf_counter()
    for i in range(n):
        await svc.submit(NewJob(task="wf_part", payload={"n": i}, depends_on=deps))
    return (time.perf_counter() - started) / n


async def wide_submit(svc: JobService, parents: int) -> float:
    ids = []
    for _ in range(0, parents, 500):
        batch = [NewJob(task="wf_part", payload={}, delay_seconds=3600)] * min(500, parents)
        ids += [it.job_id for it in await svc.submit_many(batch)]
    started = time.perf_counter()
    await svc.submit(NewJob(task="wf_merge", payload={}, depends_on=tuple(map(Dependency, ids))))
    return time.perf_counter() - started


def graph() -> list[NewJob]:
    parts = [
        NewJob(task="wf_part", payload={"n": i}, ref=f"p{i}", depends_on=(Dependency("root"),))
        for i in range(WIDTH)
    ]
    merge = NewJob(task="wf_merge", payload={}, ref="merge",
                   depends_on=tuple(Dependency(f"p{i}") for i in range(WIDTH)))  # fmt: skip
    return [NewJob(task="wf_part", payload={}, ref="root"), *parts, merge]


def flat() -> list[NewJob]:
    return [NewJob(task="wf_part", payload={"n": i}) for i in range(WIDTH + 2)]


def finished_at_max() -> float:
    with psycopg.connect(DB, autocommit=True) as conn:
        while True:
            row = conn.execute(
                "SELECT count(*) FILTER (WHERE status <> 'completed'),"
                " extract(epoch FROM max(finished_at)) FROM jobs"
            ).fetchone()
            assert row is not None
            if row[0] == 0:
                return float(row[1])
            time.sleep(0.02)


async def drain_round(svc: JobService, shape: str) -> tuple[float, float]:
    """(submit seconds, first submit → last finish seconds)."""
    with psycopg.connect(DB, autocommit=True) as conn:
        conn.execute("TRUNCATE jobs, job_steps, job_gathers, job_attempts, job_dependencies")
    started = time.time()
    if shape == "graph":
        await svc.submit_many(graph())
    else:  # a plain batch holds 500
        jobs = flat()
        await svc.submit_many(jobs[:500])
        await svc.submit_many(jobs[500:])
    submitted = time.time() - started
    drained = await asyncio.to_thread(finished_at_max) - started
    if shape == "graph":
        PHASES.append(phases(started))
    return submitted, drained


PHASES: list[dict[str, float]] = []


def phases(t0: float) -> dict[str, float]:
    """Where a graph round's time went: seconds from the submit to each milestone."""
    with psycopg.connect(DB, autocommit=True) as conn:
        row = conn.execute(
            """SELECT extract(epoch FROM max(finished_at) FILTER (WHERE depth = 0)),
                      extract(epoch FROM min(started_at) FILTER (WHERE depth = 1)),
                      extract(epoch FROM max(finished_at) FILTER (WHERE depth = 1)),
                      extract(epoch FROM max(started_at) FILTER (WHERE depth = 2)),
                      extract(epoch FROM max(finished_at) FILTER (WHERE depth = 2))
                 FROM jobs"""
        ).fetchone()
    assert row is not None
    names = ("root done", "first part starts", "last part done", "merge starts", "merge done")
    return {n: float(v) - t0 for n, v in zip(names, row, strict=True)}


async def run(args: argparse.Namespace) -> dict[str, list[float]]:
    from tests.support.settings import open_service

    out: dict[str, list[float]] = {}
    env = bench_env(ASYNCZ_TASK_MODULES="tests.support.workflow_tasks", ASYNCZ_DB_POOL_MAX="3")
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "asyncz.worker.standalone",
                "--seconds",
                "3600",
                "--idle-exit",
                "0",
                "--concurrency",
                "8",
            ],
            env=env,
        )
        for _ in range(args.workers)
    ]
    try:
        async with open_service(settings()) as svc:
            await asyncio.sleep(2)  # the workers are up
            for rnd in range(args.rounds):
                order = ("graph", "flat") if rnd % 2 == 0 else ("flat", "graph")
                for shape in order:
                    sub, drain = await drain_round(svc, shape)
                    out.setdefault(f"{shape}_submit", []).append(sub)
                    out.setdefault(f"{shape}_drain", []).append(drain)
                with psycopg.connect(DB, autocommit=True) as conn:
                    conn.execute(
                        "TRUNCATE jobs, job_steps, job_gathers, job_attempts, job_dependencies"
                    )
                for with_parent in (rnd % 2 == 0, rnd % 2 == 1):
                    key = "edge" if with_parent else "plain"
                    out.setdefault(key, []).append(await edge_round(svc, args.jobs, with_parent))
                out.setdefault("wide", []).append(await wide_submit(svc, 1000))
    finally:
        for w in workers:
            w.terminate()
        for w in workers:
            w.wait(30)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=1000, help="single submits per edge round")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    print(f"# job dependencies — {machine()}")
    print(f"# {load_line()}")
    print(f"# command: {command('tests.perf.bench_dependencies', sys.argv[1:])}")
    prepare()
    out = asyncio.run(run(args))
    med = {k: statistics.median(v) for k, v in out.items()}
    print("| measure | median | ratio | rounds |")
    print("|---|---|---|---|")
    print(f"| submit, no parent | {med['plain'] * 1e6:.0f} µs | 1.00 | "
          f"{', '.join(f'{v * 1e6:.0f}' for v in out['plain'])} |")  # fmt: skip
    print(f"| submit, one live parent (waits) | {med['edge'] * 1e6:.0f} µs | "
          f"**{med['edge'] / med['plain']:.2f}×** | "
          f"{', '.join(f'{v * 1e6:.0f}' for v in out['edge'])} |")  # fmt: skip
    print(f"| submit, 1,000 parents | {med['wide'] * 1e3:.1f} ms | "
          f"{med['wide'] / med['plain']:.0f}× one submit | "
          f"{', '.join(f'{v * 1e3:.1f}' for v in out['wide'])} |")  # fmt: skip
    last = PHASES[-1]
    print("# the last graph round, ms after the submit: " + ", ".join(
        f"{k} {v * 1e3:.0f}" for k, v in last.items()))  # fmt: skip
    for shape, what in (("flat", "502 independent"), ("graph", "1 → 500 → 1")):
        print(f"| {what}: submit_many | {med[shape + '_submit'] * 1e3:.1f} ms | "
              f"{med[shape + '_submit'] / med['flat_submit']:.2f} | "
              f"{', '.join(f'{v * 1e3:.1f}' for v in out[shape + '_submit'])} |")  # fmt: skip
        print(f"| {what}: submit → last finish, {args.workers} workers | "
              f"{med[shape + '_drain'] * 1e3:.0f} ms | "
              f"**{med[shape + '_drain'] / med['flat_drain']:.2f}** | "
              f"{', '.join(f'{v * 1e3:.0f}' for v in out[shape + '_drain'])} |")  # fmt: skip


if __name__ == "__main__":
    main()
