"""What the api tells a caller when something is wrong: health is a cached ping naming
each dependency, and error bodies carry no driver text."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from asyncz.errors import InvalidInputError
from asyncz.settings import Settings
from tests.support.settings import open_service

pytestmark = pytest.mark.integration


def test_health_is_a_cached_ping_without_error_text(settings: Settings) -> None:
    from asyncz import composition
    from asyncz.api.app import HEALTH_CACHE_SECONDS, ApiState

    broken = settings.model_copy(update={"redis_url": "redis://127.0.0.1:1/0"})
    state = ApiState(broken, None, None)

    async def scenario() -> list[dict[str, Any]]:
        svc = await state.service()
        pings = []
        real_ping = svc.store.ping

        async def counted_ping() -> None:
            pings.append(1)
            await real_ping()

        svc.store.ping = counted_ping  # type: ignore[method-assign]
        try:
            reports = [await state.health() for _ in range(5)]
            assert len(pings) == 1, "each /health call reached the database"
            state._health = (state._health[0] - HEALTH_CACHE_SECONDS, state._health[1])  # type: ignore[index]
            reports.append(await state.health())
            assert len(pings) == 2
            return reports
        finally:
            # Closed here, not left to asyncio.run's teardown: psycopg_pool swallows the
            # CancelledError of a connection attempt still under way (its pool workers catch
            # it to keep their count), and that worker then waits on its queue for ever.
            await composition.close_service(svc)

    reports = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert reports[-1] == {
        "status": "degraded",
        "dependencies": {"postgres": "ok", "redis": "down"},
    }


def test_error_bodies_carry_no_driver_text(settings: Settings) -> None:
    from asyncz.errors import StoreUnavailableError

    async def scenario() -> None:
        async with open_service(settings) as svc:
            with pytest.raises(InvalidInputError) as bad:
                await svc.list_jobs(queue="a\u0000b")
            assert "syntax" not in str(bad.value) and "0x00" not in str(bad.value)
        down = settings.model_copy(
            update={"database_url": "postgresql://postgres@127.0.0.1:1/none"}
        )
        async with open_service(down) as svc:
            with pytest.raises(StoreUnavailableError) as gone:
                await svc.get("00000000-0000-0000-0000-000000000000")
            assert str(gone.value) == "database unavailable: try again shortly"

    asyncio.run(scenario())
