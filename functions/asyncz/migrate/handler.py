"""Migration trigger Lambda: applies the SQL migrations at deploy, before traffic."""

from __future__ import annotations

import json
from typing import Any

from asyncz.connections import database_conninfo, read_secret
from asyncz.observability import lambda_entry, logger
from asyncz.settings import get_settings
from asyncz.store.migrations import (
    RUNTIME_ROLE,
    apply_migrations,
    provision_runtime_role,
    provision_runtime_role_iam,
    set_outbox,
    set_runtime_statement_timeout,
)


@lambda_entry()
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    settings = get_settings().require_for("migrate")
    # Right after a fresh deploy the proxy's targets may still be registering.
    conninfo = database_conninfo(settings)
    applied = apply_migrations(conninfo, wait_seconds=240)
    logger.info("migrations applied", extra={"applied": applied})
    # off where the stage has no sink (the construct sets it): no row is written to be forgotten
    changed = set_outbox(conninfo, on=settings.outbox == "on")
    logger.info("outbox", extra={"outbox": settings.outbox, "changed": changed})
    if settings.runtime_database_secret_arn:
        runtime = json.loads(read_secret(settings.runtime_database_secret_arn))
        if runtime.get("username") != RUNTIME_ROLE:
            raise ValueError(f"the runtime secret's username must be {RUNTIME_ROLE!r}")
        provision_runtime_role(conninfo, runtime["password"])
        logger.info("runtime role provisioned", extra={"role": RUNTIME_ROLE})
    if settings.runtime_role_iam:
        provision_runtime_role_iam(conninfo)
        logger.info("runtime role provisioned for IAM auth", extra={"role": RUNTIME_ROLE})
    if settings.runtime_database_secret_arn or settings.runtime_role_iam:
        set_runtime_statement_timeout(conninfo, settings.statement_timeout_seconds)
    return {"applied": applied}
