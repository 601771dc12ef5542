"""The callbacks' part of the store contract (see tests/support/contract.py): a callback's
wait is found by its token's hash whether it waits or was used, a heartbeat moves the
deadline of a waiting one only, a step is read back as it is now, and the key tokens are
derived under is the same on every read. Run against the in-memory store and PostgreSQL."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.support.contract import Ports, insert, scenario
from tests.support.waits_contract import DEADLINE


def _callback(seq: int, key: str, timeout: float = 600) -> dict[str, Any]:
    return {"seq": seq, "name": f"cb{seq}", "kind": "callback", "after_name": None,
            "job_attempt": 1, "result": json.dumps({"timeout": timeout}),
            "wait_until": DEADLINE, "wait_key": key}  # fmt: skip


def test_a_callback_is_found_by_its_hash_and_a_heartbeat_moves_its_deadline(
    ports: Ports,
) -> None:
    async def body(store: Any, broker: Any) -> None:
        job_id = await insert(store)
        [lease] = await store.claim([job_id], "w", 3600)
        soon = datetime.now(UTC) + timedelta(seconds=5)
        row = {**_callback(1, "a" * 64, timeout=600), "wait_until": soon}
        assert await store.steps.open_wait(job_id, lease.token, row)
        found = await store.callbacks.find("a" * 64)
        assert (str(found["job_id"]), found["seq"], found["status"], found["job_status"]) == (
            job_id, 1, "waiting", "processing")  # fmt: skip
        assert await store.callbacks.find("b" * 64) is None
        later = await store.callbacks.heartbeat("a" * 64)
        assert later is not None and later >= soon + timedelta(seconds=500)  # now + 600 s
        peek = await store.steps.peek(job_id, 1)
        assert (peek["status"], peek["wait_until"]) == ("waiting", later)
        assert await store.steps.resolve(job_id, 1, json.dumps({"result": 7}), 13)
        assert (await store.callbacks.find("a" * 64))["status"] == "completed"
        assert await store.callbacks.heartbeat("a" * 64) is None  # used: nothing moves
        assert await store.callbacks.heartbeat("b" * 64) is None  # unknown
        peek = await store.steps.peek(job_id, 1)
        assert (peek["status"], peek["result"]) == ("completed", {"result": 7})
        assert await store.steps.peek(job_id, 2) is None
        key = await store.steps.callback_key()
        assert isinstance(key, bytes) and len(key) == 32
        assert await store.steps.callback_key() == key

    scenario(ports, body)
