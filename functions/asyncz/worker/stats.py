"""What a worker keeps about each attempt it runs, and the counts it reports."""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from dataclasses import dataclass, field
from typing import Any

from asyncz.jobs import Lease
from asyncz.tasks.registry import TaskContext


@dataclass(slots=True)
class Running:
    lease: Lease
    ctx: TaskContext
    task: asyncio.Task[None] | None = None
    stop_reason: str | None = None  # "lost" | "cancel"
    finishing: bool = False  # the task returned: from here the fenced finish decides
    outcome: tuple[str, str | None] | None = None  # (status, error) once recorded
    # the attempts claimed in the same batch, this one included (one shared list)
    mates: list[Running] = field(default_factory=list, repr=False, compare=False)


@dataclass(slots=True)
class WorkerStats:
    claimed: int = 0
    completed: int = 0
    failed: int = 0
    timed_out: int = 0
    cancelled: int = 0
    lost_leases: int = 0
    hung_threads: int = 0
    stopped_because: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "claimed": self.claimed,
            "completed": self.completed,
            "failed": self.failed,
            "timed_out": self.timed_out,
            "cancelled": self.cancelled,
            "lost_leases": self.lost_leases,
            "hung_threads": self.hung_threads,
            "stopped_because": self.stopped_because,
        }


def new_worker_id(hint: str = "worker") -> str:
    return f"{hint}:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
