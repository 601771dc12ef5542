"""The client with typed tasks, without a server (httpx MockTransport): a task given as its
function, a payload as a model, dataclass or dict, results parsed into models, the task
catalogue; and what it refuses."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from asyncz.client import AsyncClient, Client, Job, TaskInfo
from asyncz.client.typed import payload_json, task_name
from tests.support import typed_app

pytestmark = pytest.mark.unit

DONE = {"job_id": "j1", "status": "completed", "result": {"text": "HI"}}
CATALOGUE = {
    "items": [
        {"name": "shout", "description": "d", "typed": True, "is_async": False,
         "takes_context": False, "queue": "default", "max_retries": 3, "timeout_seconds": 300,
         "schedule": None, "payload_schema": {"type": "object"}, "result_schema": {}},
    ]
}  # fmt: skip


def handler(sent: list[dict[str, Any]]) -> Any:
    def answer(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            sent.append(json.loads(request.content))
            return httpx.Response(202, json={"job_id": "j1", "status": "queued"})
        if request.url.path == "/tasks":
            return httpx.Response(200, json=CATALOGUE)
        return httpx.Response(200, json=DONE)

    return answer


def test_submit_takes_the_task_function_and_a_model_dataclass_or_dict() -> None:
    sent: list[dict[str, Any]] = []
    with Client("http://api.test", "k", transport=httpx.MockTransport(handler(sent))) as c:
        c.submit(typed_app.shout, typed_app.ShoutIn(text="hi"))
        c.submit("area", typed_app.Rectangle(width=1, height=2.5))
        c.submit(typed_app.shout_async, {"text": "x"})
        c.submit("echo")
    assert [(b["task"], b["payload"]) for b in sent] == [
        ("shout", {"text": "hi", "times": 1}),
        ("area", {"width": 1, "height": 2.5}),
        ("shout_async", {"text": "x"}),
        ("echo", {}),
    ]


def test_result_parses_into_the_model_and_tasks_lists_the_catalogue() -> None:
    with Client("http://api.test", "k", transport=httpx.MockTransport(handler([]))) as c:
        assert c.result("j1", typed_app.ShoutOut) == typed_app.ShoutOut(text="HI")
        assert c.result("j1") == {"text": "HI"}
        [info] = c.tasks()
    assert isinstance(info, TaskInfo) and info.name == "shout" and info.max_retries == 3


def test_the_async_client_likewise() -> None:
    async def go() -> tuple[Any, list[TaskInfo]]:
        transport = httpx.MockTransport(handler([]))
        async with AsyncClient("http://api.test", "k", transport=transport) as c:
            await c.submit(typed_app.shout, typed_app.ShoutIn(text="hi"))
            return await c.result("j1", typed_app.ShoutOut), await c.tasks()

    out, tasks = asyncio.run(go())
    assert out == typed_app.ShoutOut(text="HI") and tasks[0].name == "shout"


def test_result_as_parses_and_a_mismatch_is_a_validation_error() -> None:
    job = Job.from_api(DONE)
    assert job.result_as(typed_app.ShoutOut).text == "HI"
    with pytest.raises(ValidationError):
        job.result_as(typed_app.Rectangle)


def test_what_the_client_refuses() -> None:
    with pytest.raises(TypeError, match="not registered with @task"):
        task_name(print)
    with pytest.raises(TypeError, match="not int"):
        payload_json(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not registered"):
        task_name(typed_app.Rectangle)
