"""Soak: ``asyncz dev`` defaults (retention shortened so that it deletes during the run) at a
steady submit rate for a long time, a fault every few minutes, on PRIVATE servers it starts
itself (a PostgreSQL of Debian's binaries and a ``redis-server`` on free ports), so that it
may kill, restart and freeze them. Faults, in turn: SIGKILL a worker sandbox, restart Redis
(everything it held is gone), freeze every PostgreSQL process (SIGSTOP) for some seconds.

Per window: submits and their p99 (``POST /jobs`` over HTTP), completions, ready-to-start
(``started_at − created_at``) p50/p99, the ``jobs``/``job_attempts`` heap and index sizes,
dead tuples, autovacuum runs, and the resident memory of every process. It passes when every
accepted job (a ``202``) was seen ended, the last window's p99s and sizes are within 1.5×
of the second window's (a size also within 64 kB of it), and no process grew (last ≤ 1.1 ×
second + 5 MB).

    .venv/bin/python -m tests.perf.bench_soak                     # 30 min, 5-min windows
    .venv/bin/python -m tests.perf.bench_soak --short             # 72 s, 12-s windows
    .venv/bin/python -m tests.perf.bench_soak --rate 250 --minutes 60

``--rate 0`` (the default of the long run) first measures what the box sustains for 20 s
(submits and completions together) and takes 70% of it. The short mode compresses the
clocks (recovery every 3 s, 10-s leases, 9-s retention) so that all of it happens in 72 s.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg

from tests.perf.common import API_KEY, command, launch_dev, load_line, machine, stop_dev
from tests.perf.soak_report import Ledger, report
from tests.perf.soak_stats import box_cpu, index_sizes, rss_by_role, table_stats, worker_sandboxes
from tests.support.devrun import free_port
from tests.support.private_servers import DebianPostgres, RedisServer

TERMINAL = ("completed", "dead", "cancelled")
FAULTS = ("kill a worker", "restart Redis", "freeze PostgreSQL")


@dataclass
class SoakConfig:
    minutes: float = 30.0
    window_s: float = 300.0
    rate: float = 0.0  # jobs/s; 0 = 70% of what a 20-s probe sustains
    fault_every_s: float = 100.0  # 0 = no faults
    freeze_s: float = 5.0
    retain_s: int = 60  # ASYNCZ_RETAIN_FINISHED_SECONDS
    sample_s: float = 5.0
    overlap_s: float = 20.0  # how far back each sample reads (a commit can land late)
    clients: int = 4
    env: dict[str, str] = field(default_factory=dict)  # more asyncz settings
    server: dict[str, str] = field(default_factory=dict)  # PostgreSQL settings (-c)


SHORT = SoakConfig(
    minutes=1.2,
    window_s=12.0,
    rate=100.0,
    fault_every_s=12.0,
    freeze_s=3.0,
    retain_s=9,
    sample_s=2.0,
    overlap_s=8.0,
    clients=2,
    env={
        "ASYNCZ_RECOVERY_INTERVAL_SECONDS": "3",
        "ASYNCZ_LEASE_TIMEOUT_SECONDS": "10",
        "ASYNCZ_HEARTBEAT_SECONDS": "2",
        "ASYNCZ_FLEET_INTERVAL_SECONDS": "6",
    },
    server={"autovacuum_naptime": "6s"},  # PostgreSQL's 1 min would not visit in 72 s
)


def submitter(port: int, rate: float, stop: threading.Event, ledger: Ledger, start: float) -> None:
    """One client at ``rate`` submits/s on a keep-alive connection; a client that falls more
    than a second behind its schedule drops the missed submits instead of bursting."""
    body = json.dumps({"task": "echo", "payload": {"n": 1}})
    headers = {"x-api-key": API_KEY, "Content-Type": "application/json"}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    due = time.monotonic() + random.random() / rate
    while not stop.is_set():
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        elif now - due > 1.0:
            due = now
        due += 1.0 / rate
        began = time.monotonic()
        try:
            conn.request("POST", "/jobs", body, headers)
            reply = conn.getresponse()
            raw, status = reply.read(), reply.status
        except (OSError, http.client.HTTPException):
            conn.close()
            raw, status = b"", 0
        ms = (time.monotonic() - began) * 1000
        with ledger.lock:
            ledger.submits.append((began - start, ms, status))
            if status == 202:
                ledger.accepted.add(json.loads(raw)["job_id"])


ENDED_SINCE = """
SELECT id::text, status, extract(epoch FROM started_at - created_at) * 1000, finished_at
  FROM jobs WHERE status = ANY(%s) AND finished_at >= %s
"""


class Sampler(threading.Thread):
    """Every ``sample_s``: the jobs that ended since the last look (before retention deletes
    them), and every process's RSS (the largest per role and window)."""

    def __init__(self, db: str, cfg: SoakConfig, ledger: Ledger, procs: dict[str, Any]) -> None:
        super().__init__(name="soak-sampler", daemon=True)
        self.db, self.cfg, self.ledger, self.procs = db, cfg, ledger, procs
        self.stop = threading.Event()
        self.rss: dict[int, dict[str, float]] = {}
        self.start_t = 0.0

    def run(self) -> None:
        conn = psycopg.connect(self.db, autocommit=True)
        cursor = conn.execute("SELECT now() - interval '1 minute'").fetchone()[0]  # type: ignore[index]
        while not self.stop.wait(self.cfg.sample_s):
            try:
                since = cursor
                cursor = conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
                rows = conn.execute(ENDED_SINCE, (list(TERMINAL), since)).fetchall()
            except psycopg.Error:
                conn = psycopg.connect(self.db, autocommit=True, connect_timeout=10)
                continue
            cursor = cursor - timedelta(seconds=self.cfg.overlap_s)
            t = time.monotonic() - self.start_t
            with self.ledger.lock:
                for job_id, status, ready_ms, _ in rows:
                    if job_id not in self.ledger.ended:
                        self.ledger.ended[job_id] = (t, float(ready_ms or 0.0), status)
            w = int(t // self.cfg.window_s)
            roles = rss_by_role(
                self.procs["dev"].pid,
                self.procs["pg"].pids(),
                self.procs["redis"].proc.pid if self.procs["redis"].proc else None,
            )
            top = self.rss.setdefault(w, {})
            for role, mb in roles.items():
                top[role] = max(top.get(role, 0.0), mb)
        conn.close()


def inject(kind: str, procs: dict[str, Any], cfg: SoakConfig) -> str:
    """One fault; what was done."""
    if kind == "kill a worker":
        pids = worker_sandboxes(procs["dev"].pid)
        if not pids:
            return "no worker sandbox was alive"
        victim = random.choice(pids)
        os.kill(victim, signal.SIGKILL)
        return f"SIGKILL worker sandbox {victim} (of {len(pids)})"
    if kind == "restart Redis":
        procs["redis"].restart()
        return "redis-server killed and started empty"
    procs["pg"].signal_all(signal.SIGSTOP)
    try:
        time.sleep(cfg.freeze_s)
    finally:
        procs["pg"].signal_all(signal.SIGCONT)
    return f"every PostgreSQL process stopped for {cfg.freeze_s:g} s"


def dev_environment(db: str, redis_url: str, cfg: SoakConfig) -> dict[str, str]:
    """``asyncz dev``'s defaults (no ``ASYNCZ_``/``POWERTOOLS_`` variable of ours passed on)
    on the private servers, retention shortened, plus the config's settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASYNCZ_", "POWERTOOLS_"))}
    env.update(
        ASYNCZ_DATABASE_URL=db,
        ASYNCZ_REDIS_URL=redis_url,
        ASYNCZ_DEV_API_KEY=API_KEY,
        ASYNCZ_DEV_DATA_DIR=tempfile.mkdtemp(prefix="asyncz-soak-dev-"),
        ASYNCZ_RETAIN_FINISHED_SECONDS=str(cfg.retain_s),
        **cfg.env,
    )
    return env


def load(port: int, rate: float, clients: int, ledger: Ledger, start: float) -> threading.Event:
    stop = threading.Event()
    for _ in range(clients):
        threading.Thread(
            target=submitter, args=(port, rate / clients, stop, ledger, start), daemon=True
        ).start()
    return stop


def probe(port: int, db: str, seconds: float = 20.0) -> float:
    """Jobs/s the box sustains: 8 clients submitting as fast as they can while the workers
    drain; the smaller of submits/s and completions/s. Waits for the backlog to drain."""
    ledger = Ledger()
    stop = load(port, 10_000.0, 8, ledger, time.monotonic())
    with psycopg.connect(db, autocommit=True) as conn:
        began = conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
        time.sleep(seconds)
        stop.set()
        done = conn.execute(
            "SELECT count(*) FROM jobs WHERE status = 'completed' AND finished_at >= %s "
            "AND finished_at < %s + make_interval(secs => %s)",
            (began, began, seconds),
        ).fetchone()[0]  # type: ignore[index]
        for _ in range(300):
            if not conn.execute(
                "SELECT 1 FROM jobs WHERE status IN ('queued', 'processing') LIMIT 1"
            ).fetchone():
                break
            time.sleep(1)
    return min(len(ledger.accepted), done) / seconds


def run_soak(cfg: SoakConfig, say: Any = print) -> dict[str, Any]:
    """Runs the soak; returns its windows, what did not end and the verdicts."""
    workdir = Path(tempfile.mkdtemp(prefix="asyncz-soak-"))
    pg, redis_server = DebianPostgres(cfg.server), RedisServer(workdir)
    procs: dict[str, Any] = {"pg": pg, "redis": redis_server}
    pg.start()
    try:
        with psycopg.connect(pg.server_url, autocommit=True) as conn:
            conn.execute("CREATE DATABASE asyncz_soak")
        db = pg.url("asyncz_soak")
        redis_server.start()
        port = free_port()
        env = dev_environment(db, redis_server.url, cfg)
        procs["dev"] = launch_dev(port, [], env, str(workdir / "dev.log"))
        say(
            f"# asyncz dev log: {workdir / 'dev.log'}; PostgreSQL :{pg.port}, "
            f"Redis :{redis_server.port}"
        )
        try:
            return soak(cfg, port, db, procs, say)
        finally:
            stop_dev(procs["dev"])
    finally:
        redis_server.stop()
        pg.stop()


def soak(cfg: SoakConfig, port: int, db: str, procs: dict[str, Any], say: Any) -> dict[str, Any]:
    rate = cfg.rate
    if not rate:
        capacity = probe(port, db)
        rate = round(0.7 * capacity)
        say(f"# probe: the box sustained {capacity:.0f} jobs/s; the soak submits {rate}/s (70%)")
    ledger, conn = Ledger(), psycopg.connect(db, autocommit=True)
    sampler = Sampler(db, cfg, ledger, procs)
    start = sampler.start_t = time.monotonic()
    sampler.start()
    snaps, indexes = [table_stats(conn) | {"box": box_cpu()}], [index_sizes(conn)]
    stop_load = load(port, rate, cfg.clients, ledger, start)
    faults: list[tuple[float, str, str]] = []

    def fault_loop() -> None:
        n = 0
        while cfg.fault_every_s and not stop_load.is_set():
            due = start + cfg.fault_every_s * (n + 0.5)
            if stop_load.wait(max(0.0, due - time.monotonic())):
                return
            kind = FAULTS[n % len(FAULTS)]
            faults.append((time.monotonic() - start, kind, inject(kind, procs, cfg)))
            n += 1

    threading.Thread(target=fault_loop, name="soak-faults", daemon=True).start()
    windows = round(cfg.minutes * 60 / cfg.window_s)
    for w in range(windows):
        time.sleep(max(0.0, start + (w + 1) * cfg.window_s - time.monotonic()))
        snaps.append(table_stats(conn) | {"box": box_cpu()})
        indexes.append(index_sizes(conn))
        say(f"# window {w + 1}/{windows} done at {time.monotonic() - start:.0f} s")
    stop_load.set()
    recovery = float(cfg.env.get("ASYNCZ_RECOVERY_INTERVAL_SECONDS", 60))
    lease = float(cfg.env.get("ASYNCZ_LEASE_TIMEOUT_SECONDS", 60))
    deadline = time.monotonic() + lease + 3 * recovery + 60
    while time.monotonic() < deadline and ledger.accepted - ledger.ended.keys():
        time.sleep(cfg.sample_s)
    sampler.stop.set()
    sampler.join(30)
    missing = sorted(ledger.accepted - ledger.ended.keys())
    states = dict(
        conn.execute(
            "SELECT id::text, status FROM jobs WHERE id = ANY(%s::uuid[])", (missing,)
        ).fetchall()
    )
    conn.close()
    say(
        "\n| index MB at the end of each window | "
        + " | ".join(f"w{w}" for w in range(1, len(indexes)))
        + " |"
    )
    say("|---|" + "---|" * (len(indexes) - 1))
    for name in sorted(indexes[-1]):
        say(
            f"| {name} | " + " | ".join(f"{i.get(name, 0) / 2**20:.1f}" for i in indexes[1:]) + " |"
        )
    return report(cfg.window_s, rate, ledger, snaps, sampler.rss, faults, missing, states, say)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--short", action="store_true", help="72 s, 12-s windows (a test runs it)")
    ap.add_argument("--minutes", type=float)
    ap.add_argument("--window", type=float, help="seconds per window")
    ap.add_argument("--rate", type=float, help="submits/s; 0 = 70%% of a probe")
    ap.add_argument("--fault-every", type=float, help="seconds between faults; 0 = none")
    ap.add_argument("--retain", type=int, help="ASYNCZ_RETAIN_FINISHED_SECONDS")
    args = ap.parse_args()
    cfg = replace(SHORT) if args.short else SoakConfig()
    for name, value in (
        ("minutes", args.minutes),
        ("window_s", args.window),
        ("rate", args.rate),
        ("fault_every_s", args.fault_every),
        ("retain_s", args.retain),
    ):
        if value is not None:
            setattr(cfg, name, value)
    print(f"# soak — {machine()}")
    print(f"# {load_line()} (shared machine: other test suites may be running)")
    print(f"# command: {command('tests.perf.bench_soak', sys.argv[1:])}")
    print(f"# {cfg}", flush=True)
    result = run_soak(cfg, print)
    print(f"# {load_line()}")
    v = result["verdicts"]
    ok = (
        v["every accepted job ended"]
        and all(val for key, val in v.items() if key.endswith("within 1.5x"))
        and not v.get("processes that grew")
    )
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
