"""In-memory store and broker (procrastinate's ``InMemoryConnector`` idea): the job service
without servers, for fast unit tests of its logic. Held to the same contract suite as the
PostgreSQL and Redis adapters (tests/support/contract.py). Not shipped in the Lambda asset."""

from asyncz.testing.broker import MemoryBroker
from asyncz.testing.durable import DurableRun, ManualClock, run_durable
from asyncz.testing.store import MemoryStore

__all__ = ["DurableRun", "ManualClock", "MemoryBroker", "MemoryStore", "run_durable"]
