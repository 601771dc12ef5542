"""``runtime.drive``: the submit lane runs the async submit logic without an event loop."""

from __future__ import annotations

import asyncio

import pytest

from asyncz.runtime import SuspendedError, drive

pytestmark = pytest.mark.unit


async def _inline(x: int) -> int:
    async def step(y: int) -> int:
        return y + 1

    return await step(x) * 2


async def _suspends() -> int:
    await asyncio.sleep(0)
    return 1


async def _raises() -> int:
    raise KeyError("boom")


def test_drive_returns_what_a_never_suspending_coroutine_returns() -> None:
    assert drive(_inline(1)) == 4


def test_drive_refuses_a_coroutine_that_suspends_and_closes_it() -> None:
    coro = _suspends()
    with pytest.raises(SuspendedError):
        drive(coro)
    assert coro.cr_frame is None  # closed: no "never awaited" warning, nothing left running


def test_drive_passes_exceptions_through() -> None:
    with pytest.raises(KeyError, match="boom"):
        drive(_raises())
