"""Submit over HTTP as a user measures it: ``wrk`` POSTing echo jobs to ``asyncz dev`` in its
DEFAULT configuration (access log, wake-on-submit and scale-out on, as ``scripts/dev`` starts
it), beside the TUNED variant ``bench_submit_http`` measures (``--quiet``,
``ASYNCZ_WAKE_WORKER=false``, ``POWERTOOLS_METRICS_DISABLED=true``) and the raw INSERT + ZADD
baseline (``bench_submit``'s: one client process per connection), all in the same run.

Two figures. *Workers held off* (every variant): ``ASYNCZ_FLEET_MAX_WORKERS=0``, so the api's
scale-out check and the fleet tick still run in the default (they read Redis and decide) but
start no worker: CPU spent draining jobs does not count against the front. *Workers on*: the
default configuration untouched, the fleet draining jobs during the run on the same cores.

Each round starts every variant afresh on an emptied database (measured only after all api
sandboxes are warm and a 2-s warm-up; with workers on, once they drained the warm-up's jobs),
runs ``wrk -t1 -c16`` for ``--seconds``, and stops it; the order rotates from round to round
(``--order abba``: forward, then backward).
Every reply must be a 202 (a Lua ``response`` hook counts them; wrk counts the non-2xx) and
the window's rows are counted in Postgres: the script exits 1 when a reply was not accepted.

    .venv/bin/python -m tests.perf.bench_submit_wrk --seconds 10 --rounds 3

Two variants against each other, in forward-then-backward order:

    .venv/bin/python -m tests.perf.bench_submit_wrk --variants default tuned \\
        --order abba --against tuned --rounds 4
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

import psycopg

from tests.perf import bench_submit
from tests.perf.bench_submit_http import BODY
from tests.perf.common import (
    API_KEY,
    DB,
    bench_env,
    command,
    launch_dev,
    load_line,
    machine,
    prepare,
    stop_dev,
)
from tests.support.devrun import free_port

WRK_SCRIPT = """
wrk.method = "POST"
wrk.body = %(body)s
wrk.headers["Content-Type"] = "application/json"
wrk.headers["x-api-key"] = %(key)s
accepted = 0
local threads = {}
function setup(thread) table.insert(threads, thread) end
function response(status, headers, body)
  if status == 202 then accepted = accepted + 1 end
end
function done(summary, latency, requests)
  local n = 0
  for _, t in ipairs(threads) do n = n + t:get("accepted") end
  io.write(string.format(
    'WRK-JSON {"requests": %%d, "duration_us": %%d, "accepted": %%d, "non2xx": %%d, '
    .. '"errors": %%d, "p50_us": %%d, "p99_us": %%d}\\n',
    summary.requests, summary.duration, n, summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write
      + summary.errors.timeout,
    latency:percentile(50), latency:percentile(99)))
end
"""

# What the tuned variant changes, and what holds the workers off in every held-off variant.
TUNED_ENV = {"ASYNCZ_WAKE_WORKER": "false", "POWERTOOLS_METRICS_DISABLED": "true"}
HELD_OFF_ENV = {"ASYNCZ_FLEET_MAX_WORKERS": "0"}
# bench_env's tuning, taken out again for the default (a user's shell sets none of it)
NOT_DEFAULT = (
    "ASYNCZ_WAKE_WORKER",
    "POWERTOOLS_METRICS_DISABLED",
    "POWERTOOLS_TRACE_DISABLED",
    "ASYNCZ_PUBLISH_GAUGES",
    "ASYNCZ_DB_POOL_MAX",
    "ASYNCZ_FLEET_MAX_WORKERS",
    "ASYNCZ_FLEET_INTERVAL_SECONDS",
    "ASYNCZ_RECOVERY_INTERVAL_SECONDS",
)


@dataclass(frozen=True)
class Variant:
    label: str
    env: dict[str, str] = field(default_factory=dict)
    args: tuple[str, ...] = ()


VARIANTS = {
    "default": Variant("asyncz dev default, workers held off", HELD_OFF_ENV),
    "tuned": Variant(
        "variant: tuned (--quiet, no wake, no metrics), workers held off",
        {**TUNED_ENV, **HELD_OFF_ENV},
        ("--quiet",),
    ),
    "workers_on": Variant("asyncz dev default, workers on (fleet draining)"),
    # asyncz dev turns Powertools metrics off unless told; in AWS they are on
    "metrics_on": Variant(
        "variant: default + metrics on (as in AWS), workers held off",
        {**HELD_OFF_ENV, "POWERTOOLS_METRICS_DISABLED": "false"},
    ),
}


def ensure_wrk() -> str:
    """The wrk binary; installed from the Debian package when missing (fails loudly)."""
    found = shutil.which("wrk")
    if found:
        return found
    print("# wrk missing: apt-get install -y wrk", file=sys.stderr, flush=True)
    for step in (["apt-get", "update"], ["apt-get", "install", "-y", "wrk"]):
        if subprocess.run(step, check=False).returncode != 0:
            raise SystemExit(f"could not install wrk ({' '.join(step)} failed)")
    found = shutil.which("wrk")
    if not found:
        raise SystemExit("apt-get installed wrk but it is not on PATH")
    return found


def dev_env(variant: Variant) -> dict[str, str]:
    env = bench_env(ASYNCZ_DEV_API_KEY=API_KEY)
    for key in NOT_DEFAULT:
        env.pop(key, None)
    env["ASYNCZ_DEV_DATA_DIR"] = tempfile.mkdtemp(prefix="asyncz-bench-wrk-")
    env["ASYNCZ_DEV_LOG_FORMAT"] = "json"  # the START lines are counted in the log
    env.update(variant.env)
    return env


def start(variant: Variant, port: int, log_path: str) -> subprocess.Popen[bytes]:
    """``asyncz dev`` as the variant says, once every api sandbox is warm."""
    return launch_dev(port, list(variant.args), dev_env(variant), log_path)


def run_wrk(wrk: str, script: str, port: int, seconds: float) -> dict[str, float]:
    out = subprocess.run(
        [wrk, "-t1", "-c16", f"-d{seconds:g}s", "-s", script, f"http://127.0.0.1:{port}/jobs"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    line = next(x for x in out.splitlines() if x.startswith("WRK-JSON "))
    got: dict[str, float] = json.loads(line.removeprefix("WRK-JSON "))
    got["rps"] = got["requests"] / (got["duration_us"] / 1e6)
    return got


def counts() -> tuple[int, int, int]:
    """(jobs in the table, queued, completed)."""
    with psycopg.connect(DB, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE status = 'queued'),"
            " count(*) FILTER (WHERE status = 'completed') FROM jobs"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def measure(wrk: str, script: str, variant: Variant, seconds: float, log: str) -> dict[str, float]:
    """One window of ``variant``: warm it up, let its workers (if any) drain the warm-up's
    jobs, then count the rows the window added and the jobs completed in it."""
    prepare()
    port = free_port()
    dev = start(variant, port, log)
    try:
        run_wrk(wrk, script, port, 2)  # every sandbox's pools connected, code paths warm
        if "ASYNCZ_FLEET_MAX_WORKERS" not in variant.env:  # workers on: start from idle
            end = time.monotonic() + 120
            while counts()[1] and time.monotonic() < end:
                time.sleep(0.5)
        rows, _, done = counts()
        got = run_wrk(wrk, script, port, seconds)
        rows_after, _, done_after = counts()
    finally:
        stop_dev(dev)
    got["rows"], got["completed"] = rows_after - rows, done_after - done
    with open(log) as f:
        got["workers"] = sum('"message": "START"' in line for line in f)
    return got


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--variants",
        nargs="+",
        choices=sorted(VARIANTS),
        default=list(VARIANTS),
    )
    ap.add_argument(
        "--order",
        choices=("rotate", "abba"),
        default="rotate",
        help="rotate the order per round, or run it forward then backward (A B, B A, ...)",
    )
    ap.add_argument(
        "--against",
        choices=sorted(VARIANTS),
        default="tuned",
        help="the variant the last ratio column divides by, when it is measured",
    )
    args = ap.parse_args()
    wrk = ensure_wrk()
    os.environ.update(bench_env())
    logs = tempfile.mkdtemp(prefix="asyncz-bench-wrk-logs-")
    script = os.path.join(logs, "post_job.lua")
    with open(script, "w") as f:
        f.write(WRK_SCRIPT % {"body": json.dumps(BODY.decode()), "key": json.dumps(API_KEY)})
    print(f"# submit over HTTP with wrk — {machine()}")
    print(f"# {load_line()} (shared machine: other test suites may be running)")
    print(f"# command: {command('tests.perf.bench_submit_wrk', sys.argv[1:])}")
    print(
        f"# wrk -t1 -c16 -d{args.seconds:g}s POST /jobs (echo) against asyncz dev (4 api "
        "sandboxes, system Postgres/Redis by URL), started afresh per variant and round; raw: "
        "16 client processes, psycopg INSERT + redis ZADD; workers held off: "
        "ASYNCZ_FLEET_MAX_WORKERS=0; order: " + args.order + "; logs in " + logs
    )
    print(
        "| round | path | req/s | p50 ms | p99 ms | 202s | non-2xx | socket errors | rows added "
        "| completed in the window | worker invocations | ratio to raw |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    order = ["raw", *args.variants]
    shown = [*args.variants, "raw"]  # the default first, the baseline last
    rps: dict[str, list[float]] = {name: [] for name in order}
    ratios: dict[str, list[float]] = {name: [] for name in order}
    refused: list[str] = []
    for rnd in range(args.rounds):
        shift = rnd % len(order)
        this_round = order[shift:] + order[:shift]
        if args.order == "abba":
            this_round = order if rnd % 2 == 0 else order[::-1]
        results: dict[str, dict[str, float]] = {}
        for name in this_round:
            if name == "raw":
                raw = bench_submit.run("raw", 16, args.seconds)
                results[name] = {**raw, "p50_us": raw["p50"] * 1000, "p99_us": raw["p99"] * 1000}
            else:
                log = os.path.join(logs, f"dev-{name}-{rnd + 1}.log")
                results[name] = measure(wrk, script, VARIANTS[name], args.seconds, log)
        for name in shown:
            r = results[name]
            if name != "raw" and (
                r["non2xx"] or r["errors"] or r["accepted"] != r["requests"]
                or r["rows"] < r["accepted"]
            ):  # fmt: skip
                refused.append(f"round {rnd + 1} {name}")
            ratio = r["rps"] / results["raw"]["rps"]
            rps[name].append(r["rps"])
            ratios[name].append(ratio)
            label = "raw INSERT + ZADD (16 processes)" if name == "raw" else VARIANTS[name].label
            extra = (
                "| — | — | — | — | — | —"
                if name == "raw"
                else f"| {r['accepted']:.0f} | {r['non2xx']:.0f} | {r['errors']:.0f} | "
                f"{r['rows']:.0f} | {r['completed']:.0f} | {r['workers']:.0f}"
            )
            print(
                f"| {rnd + 1} | {label} | {r['rps']:.0f} | {r['p50_us'] / 1000:.2f} | "
                f"{r['p99_us'] / 1000:.2f} {extra} | {ratio:.2f} |",
                flush=True,
            )
    print(f"# {load_line()} at the end")
    if refused:
        print(f"# NOT ACCEPTED: {', '.join(refused)}")
    print()
    against = args.against
    print(
        f"| path | req/s, median | to raw, per round | median | to {against}, per round | median |"
    )
    print("|---|---|---|---|---|---|")
    for name in shown:
        label = "raw INSERT + ZADD (16 processes)" if name == "raw" else VARIANTS[name].label
        to_tuned = (
            [a / b for a, b in zip(rps[name], rps[against], strict=True)] if against in rps else []
        )
        tuned_cells = (
            f"{', '.join(f'{v:.2f}' for v in to_tuned)} | **{statistics.median(to_tuned):.2f}**"
            if to_tuned
            else "— | —"
        )
        print(
            f"| {label} | {statistics.median(rps[name]):.0f} | "
            f"{', '.join(f'{v:.2f}' for v in ratios[name])} | "
            f"**{statistics.median(ratios[name]):.2f}** | {tuned_cells} |"
        )
    if refused:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
