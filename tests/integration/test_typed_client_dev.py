"""The typed user module (tests/support/typed_app.py) against a started ``asyncz dev``: a
task submitted by its function with a model runs with the model, its result comes back as
the model (sync and async), and a misspelt field is refused before anything is stored."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from asyncz.client import AsyncClient, Client, InvalidInput
from tests.support import typed_app
from tests.support.devrun import API_KEY, DevRun, dev_importing

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevRun]:
    folder = tmp_path_factory.mktemp("typed-dev")  # its data and log, not in the checkout
    with dev_importing(folder, "tests.support.typed_app", API_KEY, import_from=ROOT) as run:
        yield run


def test_a_model_in_and_the_model_back(dev: DevRun) -> None:
    with Client(dev.url, API_KEY) as client:
        out = typed_app.shout_via(client, "hi", times=3)
        assert isinstance(out, typed_app.ShoutOut) and out.text == "HI HI HI"
        assert typed_app.area_via(client, 2, 2) == {"area": 4.0, "square": True}
        job = client.submit("shout", {"text": "stored"})
        client.wait(job.id, timeout=60)
        done = client.get(job.id)
        assert done.result == {"text": "STORED", "job_id": None}  # the JSON form
        assert done.result_as(typed_app.ShoutOut) == typed_app.ShoutOut(text="STORED")


def test_a_misspelt_field_is_refused_and_nothing_is_stored(dev: DevRun) -> None:
    with Client(dev.url, API_KEY) as client:
        before = len(list(client.jobs(task="shout")))
        with pytest.raises(InvalidInput) as caught:
            client.submit(typed_app.shout, {"txet": "hi"})
        assert caught.value.code == "invalid_payload" and "payload.text" in str(caught.value)
        assert len(list(client.jobs(task="shout"))) == before


def test_the_async_client_likewise_and_the_task_catalogue(dev: DevRun) -> None:
    async def go() -> None:
        async with AsyncClient(dev.url, API_KEY) as client:
            out, tasks = await typed_app.shout_async_via(client, "hey")
            assert isinstance(out, typed_app.ShoutOut) and out.text == "HEY"
            assert out.job_id  # it ran with the context
            by_name = {t.name: t for t in tasks}
            assert by_name["shout"].payload_schema["required"] == ["text"]
            assert by_name["echo"].typed is False and by_name["shout_async"].is_async

    asyncio.run(go())


def test_a_function_that_is_not_a_task_is_refused_by_the_client() -> None:
    with Client("http://127.0.0.1:9", API_KEY) as client, pytest.raises(TypeError):
        client.submit(print, {})
