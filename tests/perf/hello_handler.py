"""The cold-start floor: a bare FastAPI + Mangum Lambda handler with one ``async`` route.

Used by bench_coldstart as the baseline the real handlers are compared with.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from mangum import Mangum
from pydantic import BaseModel

app = FastAPI()


class Body(BaseModel):
    task: str
    payload: dict[str, Any] = {}


@app.post("/jobs", status_code=202)
async def submit(body: Body) -> dict[str, str]:
    return {"job_id": "00000000-0000-0000-0000-000000000000", "status": "queued"}


handler = Mangum(app, lifespan="off")
