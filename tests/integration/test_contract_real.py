"""The store and broker contract against PostgreSQL and Redis (the production adapters)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from asyncz.broker.redis import RedisBroker
from asyncz.store.postgres import PostgresStore
from tests.support.callbacks_contract import *  # noqa: F403 - and their callbacks
from tests.support.contract import *  # noqa: F403 - the suite's tests run here
from tests.support.contract_access import *  # noqa: F403
from tests.support.contract_activity import *  # noqa: F403
from tests.support.contract_wakes import *  # noqa: F403
from tests.support.events_contract import *  # noqa: F403 - and events
from tests.support.limits_contract import *  # noqa: F403 - and the flow-control contract
from tests.support.outbox_contract import *  # noqa: F403 - and the outbox of events
from tests.support.spawn_contract import *  # noqa: F403 - and spawned jobs
from tests.support.steps_contract import *  # noqa: F403 - and the durable steps' part
from tests.support.suspension_contract import *  # noqa: F403 - and suspended durable jobs
from tests.support.unique_contract import *  # noqa: F403 - and the unique jobs' part
from tests.support.waits_contract import *  # noqa: F403 - and durable tasks' waits
from tests.support.webhooks_contract import *  # noqa: F403 - and webhooks

pytestmark = pytest.mark.integration


@pytest.fixture
def ports(clean: None, pg_url: str, redis_server_url: str) -> Any:
    @asynccontextmanager
    async def open_ports() -> AsyncIterator[tuple[PostgresStore, RedisBroker]]:
        store = PostgresStore.create(pg_url)
        await store.open()
        broker = RedisBroker.from_url(redis_server_url, prefix="contract")
        try:
            yield store, broker
        finally:
            await store.close()
            await broker.close()

    return open_ports
