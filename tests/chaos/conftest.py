"""Chaos-tier fixtures: private servers, a worker fleet, a recovery loop, the ledger check.

Every test gets its own database on the shared PostgreSQL (dropped afterwards) and its own
throwaway ``redis-server`` (``own_redis``, shared with the integration tier in
tests/conftest.py), so it may flush, stop or restart Redis without touching anyone else.
Every process a fixture starts is stopped in a ``finally``. The helpers themselves live in
``tests/support/`` (chaos, fleet, ledger, private_servers).
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from asyncz.settings import Settings
from tests.support.chaos import API_KEY, PrivatePostgres, chaos_env
from tests.support.databases import drop_database, fresh_database, sibling_url
from tests.support.fleet import ApiSandbox, Fleet, RecoveryLoop

# --------------------------------------------------------------------------- servers


@pytest.fixture
def own_postgres(tmp_path: Path) -> Iterator[PrivatePostgres]:
    pg = PrivatePostgres(tmp_path / "pg")
    pg.start()
    try:
        yield pg
    finally:
        pg.stop()


@pytest.fixture
def chaos_db() -> Iterator[str]:
    """A fresh, migrated database of our own on the shared server; dropped afterwards."""
    url = fresh_database(sibling_url(f"chaos_{uuid.uuid4().hex[:10]}"), migrate=True)
    try:
        yield url
    finally:
        drop_database(url)


# --------------------------------------------------------------------------- workers
@pytest.fixture
def fleet_factory(tmp_path: Path) -> Iterator[Callable[[Settings], Fleet]]:
    fleets: list[Fleet] = []

    def make(settings: Settings) -> Fleet:
        logdir = tmp_path / f"fleet-{len(fleets)}"
        logdir.mkdir()
        fleets.append(Fleet(settings, logdir))
        return fleets[-1]

    try:
        yield make
    finally:
        for f in fleets:
            f.stop_all()


# --------------------------------------------------------------------------- recovery loop


@pytest.fixture
def recovery_factory() -> Iterator[Callable[..., RecoveryLoop]]:
    loops: list[RecoveryLoop] = []

    def make(settings: Settings, interval: float = 1.0) -> RecoveryLoop:
        loops.append(RecoveryLoop(settings, interval).start())
        return loops[-1]

    try:
        yield make
    finally:
        for loop in loops:
            loop.stop()


# --------------------------------------------------------------------------- api sandbox


@pytest.fixture
def api_factory(tmp_path: Path) -> Iterator[Callable[..., ApiSandbox]]:
    from asyncz.connections import hash_api_key

    boxes: list[ApiSandbox] = []

    def make(settings: Settings, **extra_env: str) -> ApiSandbox:
        env = chaos_env(settings, ASYNCZ_API_KEY_HASHES=hash_api_key(API_KEY), **extra_env)
        env.pop("ASYNCZ_WORKER_FUNCTION_NAME", None)
        env["ASYNCZ_CHAOS_API_KEY"] = API_KEY
        boxes.append(ApiSandbox(env, tmp_path))
        return boxes[-1]

    try:
        yield make
    finally:
        for box in boxes:
            box.close()


# --------------------------------------------------------------------------- ledger


@pytest.fixture(autouse=True)
def _timing(request: pytest.FixtureRequest) -> Iterator[None]:
    started = time.monotonic()
    yield
    sys.stderr.write(f"\n[chaos] {request.node.name}: {time.monotonic() - started:.1f} s\n")
