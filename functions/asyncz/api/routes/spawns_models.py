"""The shapes of spawned jobs in ``GET /jobs/{id}`` (docs/durable.md, "Spawned jobs")."""

from __future__ import annotations

from pydantic import BaseModel, Field


class SpawnedOut(BaseModel):
    """A durable job's spawned jobs (``ctx.spawn``): not its ``dependents``."""

    total: int = Field(description="how many jobs it created (counted up to 10,000)")
    by_status: dict[str, int]
    capped: bool = Field(description="the count stopped at its bound")
    list: str = Field(description="where to list them: GET /jobs?spawned_by=<its id>")
