"""The migrate handler: after the migrations it turns the outbox's triggers on or off as
``ASYNCZ_OUTBOX`` says (the construct sets it from the stage's sinks). The database is
faked here; the switch itself is tested on PostgreSQL (tests/integration/test_outbox_switch.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from asyncz.migrate import handler as migrate_handler
from asyncz.settings import get_settings
from tests.support.apigw import FakeContext

pytestmark = pytest.mark.unit


@pytest.fixture
def switched(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, bool]]]:
    """The calls of ``set_outbox`` (conninfo, on) a run of the handler made, in order after
    the migrations."""
    calls: list[tuple[str, bool]] = []
    order: list[str] = []

    def apply(conninfo: str, *, wait_seconds: float = 0.0) -> list[str]:
        order.append("migrate")
        return []

    def switch(conninfo: str, on: bool) -> bool:
        assert order == ["migrate"], "the triggers exist only once the migrations ran"
        calls.append((conninfo, on))
        return False

    monkeypatch.setattr(migrate_handler, "apply_migrations", apply)
    monkeypatch.setattr(migrate_handler, "set_outbox", switch)
    for name in ("ASYNCZ_RUNTIME_DATABASE_SECRET_ARN", "ASYNCZ_RUNTIME_ROLE_IAM", "ASYNCZ_OUTBOX"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ASYNCZ_DATABASE_URL", "postgresql://owner@db.example/asyncz")
    get_settings.cache_clear()
    yield calls
    get_settings.cache_clear()


def _run() -> dict[str, object]:
    return migrate_handler.handler({}, FakeContext(function_name="asyncz-migrate"))


@pytest.mark.parametrize(("value", "on"), [("off", False), ("on", True)])
def test_the_handler_switches_the_outbox_as_the_setting_says(
    switched: list[tuple[str, bool]], monkeypatch: pytest.MonkeyPatch, value: str, on: bool
) -> None:
    monkeypatch.setenv("ASYNCZ_OUTBOX", value)
    assert _run() == {"applied": []}
    [(conninfo, got)] = switched
    assert got is on
    assert "db.example" in conninfo  # the database it migrated


def test_without_the_setting_the_outbox_stays_on(switched: list[tuple[str, bool]]) -> None:
    _run()
    assert [on for _, on in switched] == [True]


def test_a_bad_value_fails_before_anything_is_migrated(
    switched: list[tuple[str, bool]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASYNCZ_OUTBOX", "yes")
    with pytest.raises(ValueError, match="outbox"):
        _run()
    assert switched == []
