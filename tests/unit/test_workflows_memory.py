"""Job dependencies through the job service on the in-memory store and broker."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from asyncz.service import JobService
from asyncz.settings import Settings
from asyncz.tasks.loader import load_task_modules
from asyncz.tasks.registry import TaskRegistry
from asyncz.testing import MemoryBroker, MemoryStore
from tests.support.workflows import *  # noqa: F403 - the suite's tests run here

pytestmark = pytest.mark.unit


@pytest.fixture
def services() -> Any:
    @asynccontextmanager
    async def open_service() -> AsyncIterator[JobService]:
        settings = Settings(database_url="postgresql://unused", redis_url="redis://unused")
        registry = load_task_modules([], TaskRegistry())
        yield JobService(MemoryStore(), MemoryBroker(), registry, settings)

    return open_service
