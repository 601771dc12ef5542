"""Connection budget of the profiles without RDS Proxy, checked at synth.

Without a proxy every sandbox holds its own pool, so the most connections the functions
can open is each function's reserved concurrency times its pool size. That must stay under
the server's ``max_connections`` (less what RDS reserves for itself and a margin for an
operator's ``psql``), or a burst fails with "too many clients" instead of queueing.
"""

from __future__ import annotations

from dataclasses import dataclass

from asyncz_cdk.config import StageConfig

# RDS and Aurora PostgreSQL: max_connections = LEAST(DBInstanceClassMemory / 9531392, 5000).
# DBInstanceClassMemory is the class's memory less what the OS and RDS keep; we count 80 %
# of the nominal memory (db.t4g.micro then gives 90; 81-87 are reported in practice, and
# the reserve below absorbs the difference).
_BYTES_PER_CONNECTION = 9_531_392
_USABLE_MEMORY = 0.8
_GIB = 1024**3
# Nominal memory (GiB) of the burstable and general-purpose classes a job queue would use.
INSTANCE_MEMORY_GIB = {
    "t4g.micro": 1,
    "t4g.small": 2,
    "t4g.medium": 4,
    "t4g.large": 8,
    "t3.micro": 1,
    "t3.small": 2,
    "t3.medium": 4,
    "t3.large": 8,
    "m7g.large": 8,
    "m6g.large": 8,
    "r7g.large": 16,
    "r6g.large": 16,
}
AURORA_GIB_PER_ACU = 2
# superuser_reserved_connections (3) + rds_reserved (2) + room for an operator session.
RESERVED_CONNECTIONS = 10
WORKER_MIN_POOL = 3  # asyncz.worker.handler: max(ASYNCZ_DB_POOL_MAX, 3)


def _from_memory(gib: float) -> int:
    return min(int(gib * _GIB * _USABLE_MEMORY) // _BYTES_PER_CONNECTION, 5000)


def max_connections(config: StageConfig) -> int:
    """The server's ``max_connections`` for ``config`` (an estimate on the low side)."""
    if config.profile == "serverless":
        # Aurora Serverless v2 sizes max_connections from the maximum capacity.
        return _from_memory(config.aurora_max_acu * AURORA_GIB_PER_ACU)
    size = config.db_instance_type.removeprefix("db.")
    if size not in INSTANCE_MEMORY_GIB:
        raise ValueError(
            f"db_instance_type {config.db_instance_type!r}: its max_connections is not known "
            f"here (known: {', '.join(sorted(INSTANCE_MEMORY_GIB))})"
        )
    return _from_memory(INSTANCE_MEMORY_GIB[size])


@dataclass(frozen=True)
class ConnectionBudget:
    """Per function: (reserved concurrency, pool size); and the server's limit."""

    demand: dict[str, tuple[int, int]]
    limit: int

    @property
    def total(self) -> int:
        return sum(n * pool for n, pool in self.demand.values())

    @property
    def available(self) -> int:
        return self.limit - RESERVED_CONNECTIONS


def connection_budget(config: StageConfig) -> ConnectionBudget:
    """What the functions of ``config`` may open at most, against what the server allows."""
    if config.api_reserved_concurrency is None:
        raise ValueError(
            f"profile {config.profile!r} has no RDS Proxy: api_reserved_concurrency must be "
            "set so that its connections are bounded"
        )
    pool = config.db_pool_max
    demand = {
        "api": (config.api_reserved_concurrency, pool),
        "worker": (config.fleet_max_workers, max(pool, WORKER_MIN_POOL)),
        "recovery": (1, pool),
        "migrate": (1, 1),
    }
    return ConnectionBudget(demand=demand, limit=max_connections(config))


def check_connection_budget(config: StageConfig) -> ConnectionBudget:
    """The budget, or ``ValueError`` (synth fails) when the functions could exhaust it."""
    budget = connection_budget(config)
    if budget.total > budget.available:
        detail = ", ".join(f"{k} {n} x {p}" for k, (n, p) in budget.demand.items())
        raise ValueError(
            f"profile {config.profile!r}: the functions may open {budget.total} connections "
            f"({detail}) but the database allows {budget.limit} less {RESERVED_CONNECTIONS} "
            "reserved; lower fleet_max_workers, api_reserved_concurrency or db_pool_max, or "
            "pick a larger database"
        )
    return budget
