"""Cascades in bounded pages through the job service on the in-memory store and broker."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from asyncz.service import JobService
from tests.support import memory
from tests.support.cascades import *  # noqa: F403 - the suite's tests run here

pytestmark = pytest.mark.unit


@pytest.fixture
def cascade_services() -> Any:
    @asynccontextmanager
    async def open_service(**overrides: Any) -> AsyncIterator[JobService]:
        yield memory.service(lease_timeout_seconds=60.0, **overrides)

    return open_service
