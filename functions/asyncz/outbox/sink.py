"""The envelope of a lifecycle event and the protocol every sink implements.

Small and dependency-free so that a sink (EventBridge, the console, webhooks) imports only
this. An envelope is CloudEvents 1.0 shaped; its ``id`` is the outbox row's and stays the
same on every retry, so consumers dedupe on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

EVENT_TYPES = (
    "asyncz.job.completed",
    "asyncz.job.dead",
    "asyncz.job.cancelled",
    "asyncz.job.replayed",
)
SPEC_VERSION = "1.0"
DEFAULT_SOURCE = "asyncz"


@dataclass(frozen=True, slots=True)
class Envelope:
    """One lifecycle event: ``data`` holds the job's fields (docs/events.md, the schema)."""

    id: str
    type: str
    time: str  # RFC 3339, UTC: when the change committed's transaction wrote the row
    data: dict[str, Any] = field(default_factory=dict)
    source: str = DEFAULT_SOURCE

    @property
    def subject(self) -> str:
        """The job the event is about (CloudEvents ``subject``)."""
        return str(self.data.get("job_id", ""))

    def as_dict(self) -> dict[str, Any]:
        """The CloudEvents 1.0 JSON form (structured mode)."""
        return {
            "specversion": SPEC_VERSION,
            "id": self.id,
            "type": self.type,
            "source": self.source,
            "subject": self.subject,
            "time": self.time,
            "datacontenttype": "application/json",
            "data": self.data,
        }


class Sink(Protocol):
    """Where published events go. A sink owns its own retries beyond one batch."""

    async def publish(self, events: Sequence[Envelope]) -> None:
        """Deliver a batch (oldest first). Raise to have the whole batch offered again later;
        a sink that accepts a batch takes over any retries of its parts. A batch may come
        again (another sink failed it): dedupe on ``id``. The outbox forgets an event once
        every sink took it: a sink that needs it later keeps its own copy."""
        ...

    async def tick(self, deadline: float) -> None:
        """Do the sink's own due work (e.g. retries) until ``deadline`` (time.monotonic())."""
        ...
