"""The DBOS side of ``bench_steps``: a no-op ``@DBOS.step`` called ``n`` times, one after the
other, inside one ``@DBOS.workflow``, run by the interpreter of a separate virtualenv that
has ``dbos`` (not a project dependency), its system database on the benchmark's server.

The parent holds the server's counters: around each measured window (the steps run, then
the same steps replayed by a fork of the workflow that copies every step's output) this
process prints ``@@ begin <window>`` and waits for a line on stdin, then runs the window
and prints ``@@ end <window> <seconds> <steps that ran>`` and waits again, so the
workflow's start and end and DBOS's launch stay outside. It ends with ``@@ done <json>``.

    python tests/perf/steps_peers.py dbos SYSTEM_DB_URL N sync|async
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from importlib.metadata import version
from typing import Any

RAN = [0]  # how often a step's function ran (a replayed step does not run it)
WINDOW = ["run"]


def _begin() -> None:
    print(f"@@ begin {WINDOW[0]}", flush=True)
    sys.stdin.readline()


def _end(seconds: float, ran: int) -> None:
    print(f"@@ end {WINDOW[0]} {seconds!r} {ran}", flush=True)
    sys.stdin.readline()


def dbos(url: str, n: int, mode: str) -> dict[str, Any]:
    from dbos import DBOS, SetWorkflowID

    DBOS(config={"name": "bench_steps", "system_database_url": url, "log_level": "WARNING"})

    @DBOS.step()
    def noop_sync() -> int:
        RAN[0] += 1
        return 1

    @DBOS.step()
    async def noop_async() -> int:
        RAN[0] += 1
        return 1

    @DBOS.workflow()
    def steps_sync(n: int) -> int:
        _begin()
        ran, started = RAN[0], time.perf_counter()
        for _ in range(n):
            noop_sync()
        _end(time.perf_counter() - started, RAN[0] - ran)
        return n

    @DBOS.workflow()
    async def steps_async(n: int) -> int:
        _begin()
        ran, started = RAN[0], time.perf_counter()
        for _ in range(n):
            await noop_async()
        _end(time.perf_counter() - started, RAN[0] - ran)
        return n

    workflow_id = str(uuid.uuid4())
    # a step's function_id counts from 1: a fork from step n + 1 copies every step's output
    if mode == "sync":
        DBOS.launch()
        with SetWorkflowID(workflow_id):
            steps_sync(n)
        WINDOW[0] = "replay"
        DBOS.fork_workflow(workflow_id, n + 1).get_result()
    else:

        async def main() -> None:
            DBOS.launch()
            with SetWorkflowID(workflow_id):
                await steps_async(n)
            WINDOW[0] = "replay"
            handle = await DBOS.fork_workflow_async(workflow_id, n + 1)
            await handle.get_result()

        asyncio.run(main())
    DBOS.destroy()
    return {
        "version": version("dbos"),
        "knobs": "defaults: DBOS(config={name, system_database_url}); a replay: "
        "DBOS.fork_workflow(id, n + 1), every step's output copied",
    }


def main() -> None:
    peer, url, n, mode = sys.argv[1:5]
    out = {"dbos": dbos}[peer](url, int(n), mode)
    print(f"@@ done {json.dumps(out)}", flush=True)


if __name__ == "__main__":
    main()
