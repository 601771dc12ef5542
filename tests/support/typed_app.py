"""A user's typed tasks and the client code that submits them, as a user writes them:
loaded by the api and workers via ``ASYNCZ_TASK_MODULES`` in the typed-task tests, and
checked with ``mypy --strict`` in the lint tier (pyproject's mypy ``files``)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TypedDict

from pydantic import BaseModel, Field

from asyncz.client import AsyncClient, Client, TaskInfo
from asyncz.tasks import TaskContext, task


class ShoutIn(BaseModel):
    text: str = Field(min_length=1)
    times: int = Field(default=1, ge=1, le=10)


class ShoutOut(BaseModel):
    text: str
    job_id: str | None = None


@task("shout")
def shout(payload: ShoutIn) -> ShoutOut:
    """The text in capitals, ``times`` times."""
    return ShoutOut(text=" ".join([payload.text.upper()] * payload.times))


@task("shout_async")
async def shout_async(payload: ShoutIn, ctx: TaskContext) -> ShoutOut:
    """The same, ``async`` and taking the context."""
    await asyncio.sleep(0)
    return ShoutOut(text=payload.text.upper(), job_id=ctx.job_id)


@dataclass
class Rectangle:
    width: float
    height: float


class Area(TypedDict):
    area: float
    square: bool


@task("area")
def area(payload: Rectangle) -> Area:
    """A dataclass in, a TypedDict out."""
    return {"area": payload.width * payload.height, "square": payload.width == payload.height}


@task("shout_wrongly")
def shout_wrongly(payload: ShoutIn) -> ShoutOut:
    """Declares a ShoutOut and returns something else: the attempt fails."""
    return {"shouted": payload.text}  # type: ignore[return-value]


def shout_via(client: Client, text: str, times: int = 1) -> ShoutOut:
    """Submit by function with a model; the result comes back as a ShoutOut."""
    job = client.submit(shout, ShoutIn(text=text, times=times))
    return client.result(job.id, ShoutOut, timeout=60)


def area_via(client: Client, width: float, height: float) -> Area:
    """Submit by name with a dataclass; read the finished job's result as the TypedDict."""
    job = client.submit("area", Rectangle(width=width, height=height))
    client.wait(job.id, timeout=60)
    return client.get(job.id).result_as(Area)


async def shout_async_via(client: AsyncClient, text: str) -> tuple[ShoutOut, list[TaskInfo]]:
    """The same from asyncio, with a dict payload, and the API's task catalogue."""
    job = await client.submit(shout_async, {"text": text})
    return await client.result(job.id, ShoutOut, timeout=60), await client.tasks()
