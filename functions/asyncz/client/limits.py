"""Flow control in the client (shared by the sync and async clients): a submit's
``concurrency_key``, and the paths that pause and resume a queue."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote


def with_concurrency_key(body: dict[str, Any], concurrency_key: str | None) -> dict[str, Any]:
    """The submit body with the key the task's per-key limits count by (when given)."""
    if concurrency_key is not None:
        body["concurrency_key"] = concurrency_key
    return body


def queue_path(queue: str, action: str) -> str:
    """``/queues/{name}/pause`` or ``/resume`` (both idempotent: safe to send again)."""
    if action not in ("pause", "resume"):
        raise ValueError(f"a queue is paused or resumed, not {action!r}")
    return f"/queues/{quote(queue, safe='')}/{action}"
