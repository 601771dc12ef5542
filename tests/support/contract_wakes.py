"""The broker contract for wakes: when the earliest delayed id of some queues falls due, so
an idle worker or the fleet can be there on time; run with the rest of the contract against
the in-memory adapters and Redis."""

from __future__ import annotations

import uuid
from typing import Any

from asyncz.port_types import Dispatch, epoch_ms
from tests.support.contract import Ports, scenario


def test_next_due_is_the_earliest_delayed_id_of_the_queues(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        a, b, other = (f"q{uuid.uuid4().hex[:6]}" for _ in range(3))
        assert await broker.next_due([a, b]) is None
        assert await broker.next_due([]) is None
        now = epoch_ms()
        await broker.enqueue(
            [
                Dispatch(str(uuid.uuid4()), a, 0, now + 9_000, False),
                Dispatch(str(uuid.uuid4()), a, 9, now + 4_000, False),
                Dispatch(str(uuid.uuid4()), b, 0, now + 6_000, False),
                Dispatch(str(uuid.uuid4()), other, 0, now + 1_000, False),
                Dispatch(str(uuid.uuid4()), b, 0, now, True),  # ready: not a wake
            ]
        )
        assert await broker.next_due([a, b]) == now + 4_000  # across queues and priorities
        assert await broker.next_due([b]) == now + 6_000
        assert await broker.next_due([other, a]) == now + 1_000

    scenario(ports, body)


def test_next_due_forgets_what_was_promoted(ports: Ports) -> None:
    async def body(store: Any, broker: Any) -> None:
        q = f"q{uuid.uuid4().hex[:6]}"
        past = epoch_ms() - 1_000
        await broker.enqueue([Dispatch(str(uuid.uuid4()), q, 0, past, False)])
        assert await broker.next_due([q]) == past  # overdue still counts: nobody promoted it
        assert await broker.promote_due([q]) == 1
        assert await broker.next_due([q]) is None

    scenario(ports, body)
