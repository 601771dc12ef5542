"""A job service on the in-memory store and broker (asyncz.testing), for unit tests: no
servers, retry timings fixed (``rand`` is 0.5) and its metrics recorded."""

from __future__ import annotations

from typing import Any

from asyncz.service import JobService
from asyncz.settings import Settings
from asyncz.tasks.loader import load_task_modules
from asyncz.tasks.registry import TaskRegistry
from asyncz.testing import MemoryBroker, MemoryStore


class Recorder:
    """A metrics sink that sums each metric by name (``seen``)."""

    def __init__(self) -> None:
        self.seen: dict[str, float] = {}

    def add_metric(self, name: str, unit: str, value: float) -> None:
        self.seen[name] = self.seen.get(name, 0) + value


def settings(**overrides: Any) -> Settings:
    """Settings that name no real server (nothing here connects), with ``overrides``."""
    return Settings(database_url="postgresql://unused", redis_url="redis://unused", **overrides)


def service(**overrides: Any) -> JobService:
    """A service over a fresh in-memory store and broker; ``overrides`` change its settings."""
    values: dict[str, Any] = {
        "backoff_base_seconds": 2.0,
        "backoff_max_seconds": 60.0,
        "lease_timeout_seconds": 0.01,
        **overrides,
    }
    return JobService(
        MemoryStore(),
        MemoryBroker(),
        load_task_modules([], TaskRegistry()),
        settings(**values),
        metrics=Recorder(),
        rand=lambda: 0.5,
    )
