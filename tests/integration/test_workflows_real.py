"""Job dependencies through the job service on PostgreSQL and Redis."""

from __future__ import annotations

from typing import Any

import pytest

from asyncz.settings import Settings
from tests.support.settings import open_service
from tests.support.workflows import *  # noqa: F403 - the suite's tests run here

pytestmark = pytest.mark.integration


@pytest.fixture
def services(settings: Settings) -> Any:
    return lambda: open_service(settings)
