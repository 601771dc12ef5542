"""The peers' side of ``bench_pg_cost``: PgQueuer and Procrastinate, run by the interpreter of
a separate virtualenv that has them (they are not project dependencies), and graphile-worker
by Node. Each installs its schema, enqueues ``n`` no-op jobs one call per job (``single``) or
100 per call (``batch``), drains them with one worker process (its documented defaults, or
at most CONCURRENCY jobs in flight, as ours), or does the work its worker defers (PgQueuer
folds its log into its statistics every 30 s; the others defer none), then prints one JSON
line.

    python tests/perf/pg_cost_peers.py pgqueuer|procrastinate \
        install|enqueue|drain|maintain DSN N SHAPE [CONCURRENCY, 0 = the defaults]
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from importlib.metadata import version
from typing import Any

BATCH = 100


async def pgqueuer(action: str, dsn: str, n: int, shape: str, concurrency: int) -> dict[str, Any]:
    import asyncpg
    from pgqueuer import AsyncpgDriver, PgQueuer, Queries
    from pgqueuer.types import QueueExecutionMode

    conn = await asyncpg.connect(dsn)
    driver = AsyncpgDriver(conn)
    queries = Queries(driver)
    # a cap on the jobs in flight needs batches of at most half of it (PgQueuer's rule)
    batch = min(10, concurrency // 2) if concurrency else 10
    knobs = (f"PgQueuer.run(mode=drain): batch_size={batch}, max_concurrent_tasks="
             f"{concurrency or 'None (no cap on jobs in flight)'}, dequeue_timeout=30 s, asyncpg; "
             "its log folded into its statistics once (aggregate_logs, as its worker does every "
             "30 s)")  # fmt: skip
    if action == "install":
        await queries.install()
    elif action == "enqueue" and shape == "single":
        for _ in range(n):
            await queries.enqueue("noop", None)
    elif action == "enqueue":
        for i in range(0, n, BATCH):
            k = min(BATCH, n - i)
            await queries.enqueue(["noop"] * k, [None] * k, [0] * k)
    elif action == "maintain":
        await queries.aggregate_logs()
    else:
        pgq = PgQueuer(driver)

        @pgq.entrypoint("noop")
        async def noop(job: Any) -> None:
            return None

        await pgq.run(mode=QueueExecutionMode.drain, batch_size=batch,
                      max_concurrent_tasks=concurrency or None)  # fmt: skip
    await conn.close()
    return {"version": version("pgqueuer"), "knobs": knobs}


async def procrastinate(action: str, dsn: str, n: int, shape: str, concurrency: int
                        ) -> dict[str, Any]:  # fmt: skip
    from procrastinate import App, PsycopgConnector

    app = App(connector=PsycopgConnector(conninfo=dsn))

    @app.task(name="noop")
    async def noop() -> None:
        return None

    knobs = (f"run_worker_async(wait=False): concurrency={concurrency or 1}, polling 5 s, "
             "LISTEN/NOTIFY on")  # fmt: skip
    async with app.open_async():
        if action == "install":
            await app.schema_manager.apply_schema_async()
        elif action == "enqueue" and shape == "single":
            for _ in range(n):
                await noop.defer_async()
        elif action == "enqueue":
            for i in range(0, n, BATCH):
                await noop.batch_defer_async(*[{} for _ in range(min(BATCH, n - i))])
        elif action == "drain":
            await app.run_worker_async(wait=False, concurrency=concurrency or 1)
    return {"version": version("procrastinate"), "knobs": knobs}


# graphile-worker, run by node from its own folder (``--graphile DIR``): the same three acts.
GRAPHILE = r"""
const { runMigrations, makeWorkerUtils, runOnce } = require("graphile-worker");
const [action, connectionString, n, shape, inFlight] = process.argv.slice(2);
const concurrency = +inFlight || 1;
(async () => {
  if (action === "install") await runMigrations({ connectionString });
  else if (action === "enqueue") {
    const utils = await makeWorkerUtils({ connectionString });
    if (shape === "single") for (let i = 0; i < +n; i++) await utils.addJob("noop", {});
    else for (let i = 0; i < +n; i += 100) {
      const k = Math.min(100, +n - i);
      await utils.addJobs(Array.from({ length: k }, () => ({ identifier: "noop", payload: {} })));
    }
    await utils.release();
  } else if (action === "drain")
    await runOnce({ connectionString, concurrency, taskList: { noop: async () => {} } });
  const fs = require("fs");
  const version = JSON.parse(fs.readFileSync("node_modules/graphile-worker/package.json")).version;
  const knobs = `runOnce: concurrency ${concurrency}, pg pool 10`;
  console.log(JSON.stringify({ version, knobs }));
})().catch((e) => { console.error(e); process.exit(1); });
"""


def main() -> None:
    peer, action, dsn, n, shape = sys.argv[1:6]
    concurrency = int(sys.argv[6]) if len(sys.argv) > 6 else 0
    began = time.perf_counter()
    run = {"pgqueuer": pgqueuer, "procrastinate": procrastinate}[peer]
    out = asyncio.run(run(action, dsn, int(n), shape, concurrency))
    out["seconds"] = time.perf_counter() - began
    print(json.dumps(out))


if __name__ == "__main__":
    main()
