"""Response models of the limits (each task's usage, paused queues), for ``/queues``,
``/stats`` and ``/tasks``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field


class KeyUsage(BaseModel):
    key: str
    running: int
    waiting: int = Field(description="jobs held back for this key's slot")


class LimitUsage(BaseModel):
    task: str
    limits: dict[str, Any] = Field(description="concurrency, key_concurrency, rate, key_rate")
    running: int = Field(description="attempts holding one of the task's slots, fleet-wide")
    waiting: int = Field(description="jobs held back for the task's slot")
    keys: list[KeyUsage] = Field(description="per concurrency key seen (the first 50)")


class QueueState(BaseModel):
    queue: str
    paused: bool
    paused_at: datetime | None = None
    paused_by: str | None = Field(default=None, description="the name of the key that paused it")


class QueueList(BaseModel):
    items: list[QueueState]
