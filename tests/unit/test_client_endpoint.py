"""Where a client sends its requests and with which key, when it is given neither: the
environment, else the local stack and the key ``asyncz dev`` wrote (as the CLI does)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from asyncz.client import AsyncClient, Client

pytestmark = pytest.mark.unit


@pytest.fixture
def dev_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A project folder where ``asyncz dev`` wrote its key, the current folder, and an
    environment with no ASYNCZ_* variable."""
    for name in ("ASYNCZ_API_URL", "ASYNCZ_API_KEY", "ASYNCZ_DEV_API_KEY", "ASYNCZ_DEV_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / ".asyncz").mkdir()
    (tmp_path / ".asyncz" / "api-key").write_text("az_written_by_dev\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def sent_key(client: Client) -> str | None:
    return client._http.headers.get("x-api-key")


def test_a_client_given_nothing_uses_the_local_url_and_the_key_asyncz_dev_wrote(
    dev_folder: Path,
) -> None:
    with Client() as client:
        assert client.base_url == "http://127.0.0.1:8000"
        assert sent_key(client) == "az_written_by_dev"
    with Client("http://localhost:8123/") as client:
        assert sent_key(client) == "az_written_by_dev"


def test_the_async_client_finds_the_same_key(dev_folder: Path) -> None:
    client = AsyncClient()
    try:
        assert client._http.headers.get("x-api-key") == "az_written_by_dev"
    finally:
        asyncio.run(client.close())


def test_the_local_key_is_never_sent_to_another_host(dev_folder: Path) -> None:
    with Client("https://api.example.com/v1") as client:
        assert sent_key(client) is None


def test_a_key_given_or_in_the_environment_wins_over_the_local_one(
    dev_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Client(api_key="given") as client:
        assert sent_key(client) == "given"
    monkeypatch.setenv("ASYNCZ_API_KEY", "from-env")
    with Client() as client:
        assert sent_key(client) == "from-env"
    monkeypatch.delenv("ASYNCZ_API_KEY")
    monkeypatch.setenv("ASYNCZ_DEV_API_KEY", "dev-env-key")
    with Client() as client:
        assert sent_key(client) == "dev-env-key"


def test_without_a_local_key_a_local_client_sends_none(
    dev_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASYNCZ_DEV_DATA_DIR", str(dev_folder / "elsewhere"))
    with Client() as client:
        assert sent_key(client) is None
