"""A dead webhook does not slow the others: 10,000 job-end events published to the webhook
sink (pages of 100, as the event pump hands them) and delivered to a healthy receiver (a
separate process, HTTP/1.1 keep-alive), timed from the first page to the last delivery
(read from PostgreSQL); alternated rounds without and with a dead endpoint registered too
(a socket that accepts connections and never answers: each of its requests waits the whole
``ASYNCZ_WEBHOOK_TIMEOUT_SECONDS``). Prints both and their ratio.

    flock /tmp/asyncz-bench.lock .venv/bin/python -m tests.perf.bench_webhooks --events 10000 \\
        --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
import uuid

import psycopg

from asyncz.outbox.sink import Envelope
from asyncz.settings import Settings
from asyncz.store.migrations import apply_migrations
from asyncz.store.postgres import PostgresStore
from asyncz.webhooks.cipher import LocalCipher
from asyncz.webhooks.sink import WebhookSink
from tests.perf.common import command, load_line, machine

DB = os.environ.get(
    "ASYNCZ_BENCH_WEBHOOKS_DATABASE_URL",
    "postgresql://postgres@127.0.0.1:5432/asyncz_bench_webhooks",
)
RECEIVER = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
s = ThreadingHTTPServer(("127.0.0.1", 0), H)
s.daemon_threads = True
print(s.server_address[1], flush=True)
s.serve_forever()
"""


def prepare() -> None:
    admin = psycopg.conninfo.make_conninfo(DB, dbname="postgres")
    name = psycopg.conninfo.conninfo_to_dict(DB)["dbname"]
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname=%s", (name,)).fetchone():
            conn.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(
                psycopg.sql.Identifier(str(name))))  # fmt: skip
    apply_migrations(DB)


def empty() -> None:
    with psycopg.connect(DB, autocommit=True) as conn:
        conn.execute("TRUNCATE webhooks, webhook_deliveries, webhook_attempts")
        conn.execute("VACUUM ANALYZE webhook_deliveries")


def envelopes(n: int) -> list[Envelope]:
    return [
        Envelope(id=str(uuid.uuid4()), type="asyncz.job.completed",
                 time="2026-12-06T14:00:00+00:00",
                 data={"job_id": str(uuid.uuid4()), "task": "echo", "queue": "default",
                       "status": "completed", "attempts": 1})
        for _ in range(n)
    ]  # fmt: skip


async def one_round(settings: Settings, healthy: str, dead: str | None, n: int) -> float:
    store = PostgresStore.create(DB, max_size=4)
    await store.open()
    cipher = LocalCipher(store.webhooks.cipher_key)
    secret = await cipher.encrypt(b"whsec_bench")
    urls = [healthy] + ([dead] if dead else [])
    ids = []
    for url in urls:
        row = await store.webhooks.insert(
            url=url, types=[], queues=[], tasks=[], secret=secret, created_by="bench",
            created_by_key_id="bench",
        )  # fmt: skip
        ids.append(row["id"])
    sink = WebhookSink(store.webhooks, cipher, settings)
    events = envelopes(n)
    started = time.perf_counter()
    for i in range(0, n, 100):
        await sink.publish(events[i : i + 100])
    query = ("SELECT count(*) FROM webhook_deliveries "
             "WHERE webhook_id = %s AND status = 'delivered'")  # fmt: skip
    finished: list[float] = []

    async def watch() -> None:  # the healthy endpoint's last delivery, seen within 20 ms
        async with await psycopg.AsyncConnection.connect(DB, autocommit=True) as conn:
            while True:
                row = await (await conn.execute(query, (ids[0],))).fetchone()
                if row and row[0] >= n:
                    finished.append(time.perf_counter())
                    return
                await asyncio.sleep(0.02)

    watching = asyncio.create_task(watch())
    while not watching.done():  # as the pump does: tick, again and again
        await sink.tick(time.monotonic() + 30)  # about one invocation of the pump
    await watching
    seconds = finished[0] - started
    await sink.aclose()
    await store.close()
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=3, help="of each kind, alternated")
    args = ap.parse_args()
    prepare()
    settings = Settings(
        database_url=DB, redis_url="redis://unused", webhook_allow_http=True,
        webhook_allow_networks="127.0.0.0/8",
    )  # fmt: skip
    receiver = subprocess.Popen([sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE)
    assert receiver.stdout is not None
    healthy = f"http://127.0.0.1:{int(receiver.stdout.readline())}/hook"
    dead_socket = socket.create_server(("127.0.0.1", 0), backlog=64)  # never accepts
    dead = f"http://127.0.0.1:{dead_socket.getsockname()[1]}/hook"
    print(f"# webhooks: a dead endpoint beside a healthy one — {machine()}")
    print(f"# {load_line()} (shared machine: other test suites may be running)")
    print(f"# command: {command('tests.perf.bench_webhooks', sys.argv[1:])}")
    print(f"# {args.events} events in pages of 100, then ticks until all are delivered; "
          f"timeout {settings.webhook_timeout_seconds:g} s, "
          f"{settings.webhook_per_endpoint_in_flight} in flight per endpoint")  # fmt: skip
    print("| round | dead endpoint | seconds | deliveries/s |")
    print("|---|---|---|---|")
    times: dict[bool, list[float]] = {False: [], True: []}
    try:
        for rnd in range(1, args.rounds + 1):
            for with_dead in (False, True):
                empty()
                seconds = asyncio.run(
                    one_round(settings, healthy, dead if with_dead else None, args.events)
                )
                times[with_dead].append(seconds)
                kind = "yes" if with_dead else "no"
                print(f"| {rnd} | {kind} | {seconds:.2f} | {args.events / seconds:,.0f} |",
                      flush=True)  # fmt: skip
    finally:
        receiver.terminate()
        dead_socket.close()
    without, with_ = statistics.median(times[False]), statistics.median(times[True])
    print(f"\nmedian without {without:.2f} s, with a dead endpoint {with_:.2f} s: "
          f"ratio {with_ / without:.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
