"""A user's typed tasks, as a user writes them: loaded by the api and workers via
``ASYNCZ_TASK_MODULES`` in the typed-task tests, and checked with ``mypy --strict`` in the
lint tier."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TypedDict

from pydantic import BaseModel, Field

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
