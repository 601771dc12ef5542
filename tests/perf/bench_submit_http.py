"""Submit over HTTP: ``POST /jobs`` through the local API Gateway front of ``asyncz dev``
(HTTP → REST v1 proxy event → an api Lambda sandbox process → the real handler), beside the
raw baseline (psycopg INSERT + Redis ZADD, one process per client) measured in the same run.

``asyncz dev`` is started on a free port with the system Postgres and Redis given by URL
(nothing embedded starts), no fixed workers, and the fleet and recovery schedules pushed out
to an hour so nothing drains the queue or competes for the CPU while we measure.
Clients: ``--client-procs`` processes, each with clients/procs threads, each thread one
keep-alive HTTP connection doing one request at a time.

    .venv/bin/python -m tests.perf.bench_submit_http --concurrency 16 64 --seconds 10

The api handler called in-process, without HTTP, is ``bench_submit``'s subject.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from typing import Any

from tests.perf import bench_submit
from tests.perf.common import (
    API_KEY,
    NOTHING_DRAINS,
    bench_env,
    command,
    load_line,
    machine,
    prepare,
    start_dev,
    stop_dev,
    summary,
)
from tests.support.devrun import free_port

BODY = json.dumps({"task": "echo", "payload": {"user_id": 42, "note": "benchmark"}}).encode()
REQUEST = (
    b"POST /jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    + f"x-api-key: {API_KEY}\r\nContent-Length: {len(BODY)}\r\n\r\n".encode()
    + BODY
)


class _KeepAliveClient:
    """One keep-alive connection sending a prebuilt request and reading just enough of the
    reply (status line, Content-Length, body). The load generator shares the two cores with
    the system under test, so it must cost little: ``http.client`` parses every reply's
    headers with the email package, which costs far more CPU per request than this."""

    def __init__(self, port: int) -> None:
        self._port = port
        self._sock: socket.socket | None = None
        self._buf = b""

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self._port), timeout=60)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock, self._buf = sock, b""
        return sock

    def post(self) -> int:
        """The reply's status; raises OSError on a broken connection."""
        sock = self._sock or self._connect()
        sock.sendall(REQUEST)
        while b"\r\n\r\n" not in self._buf:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionResetError("the front closed the connection")
            self._buf += chunk
        head, _, rest = self._buf.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in lines[1:]
            if line[:15].lower() == b"content-length:"
        )
        while len(rest) < length:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionResetError("the front closed the connection")
            rest += chunk
        self._buf = rest[length:]
        return int(lines[0].split()[1])

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def _client_proc(port: int, threads: int, seconds: float, start_at: float, out: Any) -> None:
    lat: list[float] = []
    errors: list[int] = []
    lock = threading.Lock()

    def one() -> None:
        client = _KeepAliveClient(port)
        mine: list[float] = []
        bad = 0
        while time.time() < start_at:
            time.sleep(0.001)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t = time.perf_counter()
            try:
                ok = client.post() == 202
            except (OSError, ValueError, StopIteration):
                client.close()
                ok = False
            if ok:
                mine.append((time.perf_counter() - t) * 1000)
            else:
                bad += 1
        client.close()
        with lock:
            lat.extend(mine)
            errors.append(bad)

    ts = [threading.Thread(target=one) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    out.put((lat, sum(errors)))


def run_http(port: int, clients: int, procs: int, seconds: float) -> tuple[dict[str, float], int]:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = min(procs, clients)
    per = [clients // procs + (1 if i < clients % procs else 0) for i in range(procs)]
    start_at = time.time() + 2.0  # every client starts together, after the spawns
    ps = [ctx.Process(target=_client_proc, args=(port, n, seconds, start_at, q)) for n in per]
    for p in ps:
        p.start()
    lat: list[float] = []
    errors = 0
    for _ in ps:
        got, bad = q.get(timeout=seconds + 120)
        lat.extend(got)
        errors += bad
    for p in ps:
        p.join(30)
    return summary(lat, seconds), errors


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--concurrency", type=int, nargs="+", default=[16, 64])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="raw then HTTP, back to back, this many times: the machine is shared and noisy",
    )
    ap.add_argument(
        "--api-sandboxes",
        type=int,
        nargs="+",
        default=[4, 16],
        help="api sandbox processes behind the front (Lambda concurrency)",
    )
    ap.add_argument("--client-procs", type=int, default=4)
    args = ap.parse_args()
    os.environ.update(bench_env())
    print(f"# submit over HTTP — {machine()}")
    print(f"# {load_line()} (shared machine: other test suites may be running)")
    print(f"# command: {command('tests.perf.bench_submit_http', sys.argv[1:])}")
    print(
        f"# front: asyncz dev with N api sandboxes (processes), system Postgres/Redis by "
        f"URL; HTTP clients: {args.client_procs} processes × threads, keep-alive; "
        "clients, front, sandboxes and servers share the same 2 cores; each round measures "
        "raw and then HTTP, so a ratio compares two runs a few seconds apart"
    )
    print("| round | path | clients | req/s | p50 ms | p95 ms | p99 ms | errors | ratio to raw |")
    print("|---|---|---|---|---|---|---|---|---|")
    port = free_port()
    log_dir = tempfile.mkdtemp(prefix="asyncz-bench-http-")
    ratios: dict[tuple[int, int], list[float]] = {}
    for c in args.concurrency:
        for n in args.api_sandboxes:
            prepare()
            dev = start_dev(
                port,
                os.path.join(log_dir, f"dev-{c}-{n}.log"),
                args=("--api-sandboxes", str(n), "--quiet"),
                **NOTHING_DRAINS,
            )
            try:
                run_http(port, n * 2, args.client_procs, 2.0)  # warm every sandbox's pools
                for rnd in range(1, args.rounds + 1):
                    prepare()
                    raw = bench_submit.run("raw", c, args.seconds)
                    prepare()
                    s, err = run_http(port, c, args.client_procs, args.seconds)
                    ratio = s["rps"] / raw["rps"]
                    ratios.setdefault((c, n), []).append(ratio)
                    for path, row, errors, r in (
                        ("raw INSERT + ZADD", raw, 0, 1.0),
                        (f"HTTP → asyncz dev front → {n} api sandboxes", s, err, ratio),
                    ):
                        print(
                            f"| {rnd} | {path} | {c} | {row['rps']:.0f} | {row['p50']:.2f} | "
                            f"{row['p95']:.2f} | {row['p99']:.2f} | {errors} | {r:.2f} |",
                            flush=True,
                        )
            finally:
                stop_dev(dev)
    print(f"# {load_line()} at the end")
    print()
    print("| path | clients | ratio to raw, per round | median |")
    print("|---|---|---|---|")
    for (c, n), values in ratios.items():
        rounds = ", ".join(f"{v:.2f}" for v in values)
        print(
            f"| HTTP → asyncz dev front → {n} api sandboxes | {c} | {rounds} | "
            f"**{statistics.median(values):.2f}** |"
        )


if __name__ == "__main__":
    main()
