"""The service's side of durable tasks' callbacks (docs/durable.md, "Callbacks"): a token
posted to ``/callbacks/{token}`` resolves its wait once (the result or the error it
carries) and wakes the job; a heartbeat moves its deadline. The token is looked up by its
SHA-256, never stored."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from asyncz.durable.callbacks import token_hash
from asyncz.errors import CallbackNotFoundError, CallbackUsedError, InvalidInputError
from asyncz.ports import JobStore
from asyncz.service.waits import Waits, value_json


class Callbacks:
    def __init__(self, store: JobStore, waits: Waits, max_bytes: int) -> None:
        self.store, self.waits, self.max_bytes = store, waits, max_bytes

    async def post(self, token: str, outcome: dict[str, Any]) -> str:
        """Resolve the callback of ``token`` with ``{"result": …}`` or ``{"error": …}``; the
        job it resumed. Raises when the token is unknown, or used (first post wins)."""
        text, size = value_json(outcome)
        if size > self.max_bytes:
            raise InvalidInputError(
                f"the callback's body holds {size} bytes of JSON; the limit is {self.max_bytes} "
                f"(ASYNCZ_MAX_RESULT_BYTES)"
            )
        found = await self._find(token)
        if found["status"] != "waiting":  # a used token's retry takes no lock
            raise _used()
        if not await self.waits.resolve_json(str(found["job_id"]), found["seq"], text):
            raise _used()  # another post or the timeout came first, or the job has ended
        return str(found["job_id"])

    async def heartbeat(self, token: str) -> datetime:
        """Move the waiting callback's deadline to at least now plus its timeout."""
        deadline = await self.store.callbacks.heartbeat(token_hash(token))
        if deadline is None:
            await self._find(token)  # unknown: 404
            raise _used()
        return deadline

    async def _find(self, token: str) -> dict[str, Any]:
        found = await self.store.callbacks.find(token_hash(token))
        if found is None:
            raise CallbackNotFoundError("no callback has this token")
        return found


def _used() -> CallbackUsedError:
    return CallbackUsedError(
        "this callback's token was used already (or its wait timed out, or its job ended): "
        "a token resumes its job once"
    )
