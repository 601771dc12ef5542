"""Typed task signatures: payloads parsed into pydantic models, dataclasses and TypedDicts,
results checked and turned into JSON, untyped tasks untouched, and clear errors."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from asyncz.errors import InvalidPayloadError, InvalidResultError, describe
from asyncz.jobs import NewJob
from asyncz.tasks import TaskContext, TaskRegistry, task
from asyncz.tasks.loader import load_task_modules
from tests.support import memory, typed_app

pytestmark = pytest.mark.unit

CTX = TaskContext("job-1", 1, "default", "w", "/tmp")


class Item(BaseModel):
    qty: int


class Order(BaseModel):
    items: list[Item]


class Tick(BaseModel):
    scheduled_for: str


class Stats(BaseModel):  # the name of one of the API's own response models
    mine: int


def registry(reg: TaskRegistry | None = None) -> TaskRegistry:
    """The built-in tasks and the typed app's (registered on ``reg``, not the global one)."""
    reg = load_task_modules([], reg or TaskRegistry())
    for fn in (typed_app.shout, typed_app.shout_async, typed_app.area, typed_app.shout_wrongly):
        reg.register(fn.__name__, fn)
    return reg


def test_a_pydantic_task_gets_its_model_and_gives_back_json() -> None:
    spec = registry().get("shout")
    assert spec.call({"text": "hi", "times": 2}, CTX) == {"text": "HI HI", "job_id": None}


def test_an_async_task_with_the_context_gets_its_model() -> None:
    spec = registry().get("shout_async")
    assert spec.is_async and spec.wants_context
    assert asyncio.run(spec.call({"text": "hi"}, CTX)) == {"text": "HI", "job_id": "job-1"}


def test_a_dataclass_in_and_a_typeddict_out() -> None:
    spec = registry().get("area")
    assert spec.call({"width": 2, "height": 3.5}, CTX) == {"area": 7.0, "square": False}


def test_a_misspelt_field_names_its_path() -> None:
    spec = registry().get("shout")
    with pytest.raises(InvalidPayloadError) as caught:
        spec.call({"txet": "hi"}, CTX)
    assert [d["field"] for d in caught.value.details] == ["payload.text"]
    assert caught.value.details[0]["type"] == "missing"
    assert "payload.text: Field required" in str(caught.value)
    assert describe(caught.value).startswith("invalid_payload: ")


def test_nested_field_paths_are_dotted() -> None:
    reg = TaskRegistry()

    def order(payload: Order) -> int:
        return len(payload.items)

    reg.register("order", order)
    with pytest.raises(InvalidPayloadError) as caught:
        reg.get("order").check_payload({"items": [{"qty": 1}, {"qty": "many"}]})
    assert caught.value.details[0]["field"] == "payload.items.1.qty"


def test_a_result_that_is_not_its_declared_type_fails_clearly() -> None:
    with pytest.raises(InvalidResultError, match=r"declared ShoutOut.*result\.text"):
        registry().get("shout_wrongly").call({"text": "hi"}, CTX)


def test_untyped_tasks_get_the_payload_as_sent_and_return_anything() -> None:
    reg = TaskRegistry()
    seen: list[Any] = []

    @task("plain", registry=reg)
    def plain(payload: dict[str, Any]) -> dict[str, Any]:
        seen.append(payload)
        return {"n": {1, 2}.__len__()}

    @task("bare", registry=reg)
    def bare(payload, ctx):  # type: ignore[no-untyped-def]
        return payload

    sent = {"anything": [1, "x"], "task": "plain"}
    assert reg.get("plain").call(sent, CTX) == {"n": 2} and seen[0] is sent
    assert reg.get("plain").signature is None and reg.get("bare").signature is None
    assert reg.get("bare").call(sent, CTX) is sent


def test_an_annotation_that_cannot_be_resolved_is_refused_at_registration() -> None:
    def broken(payload: NoSuchModel) -> None:  # type: ignore[name-defined]  # noqa: F821
        return None

    with pytest.raises(TypeError, match="'broken': cannot resolve its type annotations"):
        TaskRegistry().register("broken", broken)


class Opaque:
    """A plain class: nothing pydantic can validate."""


def test_a_type_pydantic_cannot_check_is_refused_at_registration_saying_what_to_do() -> None:
    def opaque(payload: dict[str, Any]) -> Opaque:
        return Opaque()

    with pytest.raises(TypeError, match=r"'opaque': its result type Opaque .*annotate it `Any`"):
        TaskRegistry().register("opaque", opaque)


def test_a_scheduled_task_must_accept_its_slot_payload() -> None:
    reg = TaskRegistry()

    def ticks(payload: Tick) -> None:
        return None

    task("ticks", schedule=60, registry=reg)(ticks)
    with pytest.raises(ValueError, match="scheduled_for"):
        task("shouts", schedule=60, registry=reg)(typed_app.shout)


def test_builtin_tasks_are_typed_and_ignore_fields_they_do_not_know() -> None:
    reg = load_task_modules([], TaskRegistry())
    assert reg.get("flaky").call({"failures": 0, "extra": True}, CTX) == {"succeeded_on_attempt": 1}
    with pytest.raises(InvalidPayloadError, match=r"payload\.failures"):
        reg.get("flaky").check_payload({"failures": "several"})
    assert reg.get("echo").signature is None  # echo returns whatever it is given
    schema = reg.get("sleep").signature.payload_schema()  # type: ignore[union-attr]
    assert schema["properties"]["seconds"]["type"] == "number"


def test_schemas_of_typed_and_untyped_tasks() -> None:
    reg = registry()
    sig = reg.get("area").signature
    assert sig is not None
    assert sig.payload_schema()["required"] == ["width", "height"]
    assert sig.result_schema()["properties"]["square"] == {"title": "Square", "type": "boolean"}
    json.dumps(reg.get("shout").signature.payload_schema())  # type: ignore[union-attr]


def test_submit_refuses_a_bad_payload_before_anything_is_stored() -> None:
    svc = memory.service()
    registry(svc.registry)

    async def go() -> None:
        with pytest.raises(InvalidPayloadError):
            await svc.submit(NewJob(task="shout", payload={"text": ""}))
        news = [NewJob(task="shout", payload={"text": "a"}), NewJob(task="shout", payload={})]
        with pytest.raises(InvalidPayloadError) as caught:
            await svc.submit_many(news)
        assert caught.value.index == 1 and str(caught.value).startswith("jobs[1]: ")
        assert (await svc.list_jobs(limit=10)).items == []
        ok = await svc.submit(NewJob(task="shout", payload={"text": "a"}))
        assert ok.job_id

    asyncio.run(go())


def test_the_readme_writing_tasks_example_registers_and_runs() -> None:
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = text[text.index("## Writing tasks") :]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block, "the README's Writing tasks section lost its example"
    probe = block.group(1) + textwrap.dedent("""
        import json
        from asyncz.errors import InvalidPayloadError
        from asyncz.tasks import REGISTRY, TaskContext
        spec = REGISTRY.get("report_build")
        ctx = TaskContext("j1", 1, "default", "w", "/tmp")
        print(json.dumps(spec.call({"report_id": "7"}, ctx)))
        try:
            spec.check_payload({"report": 7})
        except InvalidPayloadError as exc:
            print(exc.details[0]["field"])
        print(REGISTRY.get("digest").schedule.describe())
    """)
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        '{"url": "s3://reports/7.pdf"}',
        "payload.report_id",
        "0 * * * *",
    ]


def test_a_task_model_named_like_an_api_model_does_not_replace_it_in_openapi() -> None:
    from asyncz.api.routes.tasks_models import submit_union

    def counts(payload: Stats) -> None:
        return None

    reg = TaskRegistry()
    reg.register("counts", counts)
    components: dict[str, Any] = {"Stats": {"title": "the API's"}, "SubmitJob": {}}
    assert submit_union(reg, components) == "TypedSubmitJob"
    assert components["Stats"] == {"title": "the API's"}
    assert components["Task.Stats"]["required"] == ["mine"]
    payload = components["SubmitJob.counts"]["properties"]["payload"]
    assert payload == {"$ref": "#/components/schemas/Task.Stats"}
