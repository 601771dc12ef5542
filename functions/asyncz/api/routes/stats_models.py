"""Response models of the service's state: queue statistics with the cost estimate, the
periodic schedules, health (they generate the OpenAPI schema)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from asyncz.api.routes.limits_models import LimitUsage


class QueueStats(BaseModel):
    counts: dict[str, int]
    ready: int | None = None
    delayed: int | None = None
    oldest_queued_age_seconds: float
    paused: bool = False


class CostWindow(BaseModel):
    dollars: float
    jobs: int
    requests: int = Field(description="submit requests (a batch is one)")
    attempts: int
    attempt_seconds: float


class CostEstimate(BaseModel):
    estimate: bool = Field(description="always true: modelled from counts and unit prices")
    last_hour: CostWindow
    last_day: CostWindow
    api: str = Field(description="the gateway priced: rest or http")
    architecture: str
    prices_of: str = Field(description="the date of the unit prices")
    source: str


class Stats(BaseModel):
    queues: dict[str, QueueStats]
    live_workers: int | None
    cost: CostEstimate | None = Field(
        default=None,
        description="estimated dollars for the last hour and day, without fixed monthly costs",
    )
    limits: list[LimitUsage] | None = Field(
        default=None, description="each limited task: running and waiting (null: Redis is down)"
    )


class ScheduleOut(BaseModel):
    task: str
    schedule: str = Field(description="a cron expression, or 'every N s'")
    timezone: str
    catch_up: int
    last_run: datetime | None = Field(description="the slot of the last job enqueued")
    last_job_id: str | None
    next_run: datetime = Field(description="the next slot (checked once a minute)")


class ScheduleList(BaseModel):
    items: list[ScheduleOut]


class Health(BaseModel):
    status: Literal["ok", "degraded"]
    dependencies: dict[str, str]
