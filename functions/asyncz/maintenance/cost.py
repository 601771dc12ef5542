"""What the queue cost in the last hour and day, estimated in dollars from the counts the
store keeps (jobs, submit requests, attempts and their run time) and the unit prices of
:mod:`asyncz.prices`. An estimate: fixed monthly costs (database, cache, endpoints) are not
in it, and Lambda's billed time is modelled, not read from AWS (docs/cost.md)."""

from __future__ import annotations

import platform
import time
from typing import Any

from asyncz import prices
from asyncz.ports import JobStore


def architecture() -> str:
    """The Lambda architecture this sandbox runs on (the workers run on the same)."""
    return "arm64" if platform.machine() in ("aarch64", "arm64") else "x86_64"


def dollars(counts: dict[str, Any], *, front: str, arch: str, concurrency: int) -> float:
    """One window's estimate: API Gateway and the api function per submit request (a batch
    is one request), the worker function for the attempts' run time shared by ``concurrency``
    attempts per invocation plus its measured overhead, and the log lines."""
    requests = float(counts["requests"])
    attempts = float(counts["attempts"])
    api_seconds = requests * prices.API_MS_PER_REQUEST / 1000
    worker_seconds = (
        float(counts["attempt_seconds"]) / max(concurrency, 1)
        + attempts * prices.WORKER_OVERHEAD_MS_PER_ATTEMPT / 1000
    )
    gb_seconds = (api_seconds + worker_seconds) * prices.FUNCTION_MEMORY_GB
    log_bytes = requests * prices.LOG_BYTES_PER_REQUEST + attempts * prices.LOG_BYTES_PER_ATTEMPT
    return (
        requests * (prices.GATEWAY_PER_REQUEST[front] + prices.LAMBDA_PER_REQUEST)
        + gb_seconds * prices.LAMBDA_PER_GB_SECOND[arch]
        + log_bytes * prices.LOGS_PER_BYTE
    )


class CostEstimate:
    """The ``cost`` part of ``GET /stats``, computed at most once a minute per sandbox."""

    def __init__(
        self, store: JobStore, *, front: str, concurrency: int, cache_seconds: float
    ) -> None:
        self.store = store
        self.front = front
        self.concurrency = concurrency
        self.cache_seconds = cache_seconds
        self._cached: tuple[float, dict[str, Any]] | None = None

    async def estimate(self) -> dict[str, Any]:
        if self._cached and time.monotonic() - self._cached[0] < self.cache_seconds:
            return self._cached[1]
        arch = architecture()
        windows = {}
        for row in await self.store.cost_counts():
            counts = {k: row[k] for k in ("jobs", "requests", "attempts", "attempt_seconds")}
            cost = dollars(counts, front=self.front, arch=arch, concurrency=self.concurrency)
            windows[row["label"]] = {"dollars": round(cost, 6), **counts}
        out = {
            "estimate": True,
            "last_hour": windows["hour"],
            "last_day": windows["day"],
            "api": self.front,
            "architecture": arch,
            "prices_of": prices.PRICED_ON,
            "source": prices.PRICE_SOURCE,
        }
        self._cached = (time.monotonic(), out)
        return out
