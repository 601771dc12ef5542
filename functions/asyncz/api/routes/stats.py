"""Routes of the queue's state: ``GET /stats`` and ``GET /health`` (no key needed)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from asyncz.api.routes.stats_models import Health, Stats
from asyncz.service import JobService


def mount_stats(
    app: FastAPI,
    service: Callable[[], Awaitable[JobService]],
    health_report: Callable[[], Awaitable[dict[str, Any]]],
) -> None:
    @app.get("/stats", response_model=Stats, summary="Queue statistics")
    async def stats() -> Any:
        return await (await service()).stats()

    @app.get(
        "/health",
        response_model=Health,
        summary="Dependency health (no key needed)",
        responses={503: {"model": Health, "description": "a dependency is down"}},
    )
    async def health() -> Any:
        report = await health_report()
        return JSONResponse(report, status_code=200 if report["status"] == "ok" else 503)
