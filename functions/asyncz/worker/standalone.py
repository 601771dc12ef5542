"""Run the worker loop outside Lambda: ``python -m asyncz.worker.standalone``.

Configured by the same ``ASYNCZ_*`` variables; SIGTERM/SIGINT finish running jobs, then exit.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
import time

from asyncz import composition
from asyncz.attempt_logs import ATTEMPT_FIELDS
from asyncz.eventloop import new_event_loop
from asyncz.settings import get_settings
from asyncz.worker.loop import WorkerLoop
from asyncz.worker.stats import new_worker_id


async def work(
    seconds: float, idle_exit: float | None, concurrency: int | None
) -> dict[str, object]:
    settings = get_settings().require_for("worker")
    service = await composition.build_service(settings, pool_max=max(settings.db_pool_max, 3))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    deadline = time.monotonic() + seconds
    try:
        worker = WorkerLoop(
            service,
            remaining_seconds=lambda: deadline - time.monotonic(),
            worker_id=new_worker_id("standalone"),
            idle_exit_seconds=idle_exit,
            concurrency=concurrency,
            stop=stop,
        )
        return await worker.run()
    finally:
        await composition.close_service(service)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="asyncz-worker", description=__doc__)
    parser.add_argument("--seconds", type=float, default=3600.0, help="run at most this long")
    parser.add_argument(
        "--idle-exit",
        type=float,
        default=None,
        help="leave after this many seconds with no job (0 = never)",
    )
    parser.add_argument("--concurrency", type=int, default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    for handler in logging.getLogger().handlers:  # task lines carry the attempt's fields
        handler.addFilter(ATTEMPT_FIELDS)
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        summary = runner.run(work(args.seconds, args.idle_exit, args.concurrency))
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
