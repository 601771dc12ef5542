"""Migration trigger Lambda: applies the SQL migrations at deploy, before traffic."""

from __future__ import annotations

from typing import Any

from asyncz.connections import database_conninfo
from asyncz.observability import lambda_entry, logger
from asyncz.settings import get_settings
from asyncz.store.migrations import apply_migrations


@lambda_entry()
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    settings = get_settings().require_for("migrate")
    # Right after a fresh deploy the proxy's targets may still be registering.
    applied = apply_migrations(database_conninfo(settings), wait_seconds=240)
    logger.info("migrations applied", extra={"applied": applied})
    return {"applied": applied}
