"""CPU seconds spent by each part of an ``asyncz dev`` run between two snapshots of ``/proc``:
its sandboxes by function (``worker``, ``api``, ``events``...; those started between the
snapshots named apart, as their import is in the window), the PostgreSQL backends of one
database, Redis, the runner itself and the calling process (the load generator).

    before = snapshot("asyncz_bench")
    ...  # the measured window
    print(spent(before, snapshot("asyncz_bench")))
"""

from __future__ import annotations

import os
import re
from collections import Counter

from tests.perf.proc_reader import cpu_seconds
from tests.perf.soak_stats import cmdline

_SANDBOX = re.compile(r"lambda_\.bootstrap \d+ \d+ (\w+)-\d+")
Snapshot = dict[tuple[int, str], float]


def _part(cmdline: str, database: str) -> str | None:
    if m := _SANDBOX.search(cmdline):
        return m.group(1)
    if cmdline.startswith("postgres: ") and f" {database} " in cmdline:
        return "postgres"
    if "redis-server" in cmdline:
        return "redis"
    if " -m asyncz dev " in cmdline:
        return "dev"
    return None


def snapshot(database: str) -> Snapshot:
    """``{(pid, part): CPU seconds so far}`` of every process that is part of the run (and
    this process, as ``client``)."""
    seen: dict[tuple[int, str], float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        part = "client" if pid == os.getpid() else _part(" ".join(cmdline(pid)), database)
        if part is not None and (cpu := cpu_seconds(pid)) is not None:
            seen[(pid, part)] = cpu
    return seen


def spent(before: Snapshot, after: Snapshot) -> Counter[str]:
    """CPU seconds by part between the snapshots; a sandbox (or backend) that started in
    between counts under ``<part> (started)``. A process that ended in between is missed."""
    parts: Counter[str] = Counter()
    for (pid, part), cpu in after.items():
        started = (pid, part) not in before
        parts[f"{part} (started)" if started else part] += cpu - before.get((pid, part), 0.0)
    return parts
