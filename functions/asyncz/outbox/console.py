"""The console sink: each event as one line on stdout (``asyncz dev`` with no bus, so a
developer sees what a deployment would publish)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import TextIO

from asyncz.outbox.sink import Envelope


class ConsoleSink:
    def __init__(self, out: TextIO | None = None) -> None:
        self._out = out

    async def publish(self, events: Sequence[Envelope]) -> None:
        out = self._out or sys.stdout
        for event in events:
            out.write(f"event {event.type} {json.dumps(event.as_dict(), default=str)}\n")
        out.flush()

    async def tick(self, deadline: float) -> None:
        return None
