"""What every local runner component shares: the fake account, the one structured log line
format, and the Lambda context class (defined by :mod:`asyncz.local.lambda_.bootstrap`)."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from typing import Any

from asyncz.local.lambda_.bootstrap import LambdaContext

__all__ = ["ACCOUNT_ID", "REGION", "LambdaContext", "format_line", "log_line"]

ACCOUNT_ID = "000000000000"
REGION = "us-east-1"


def format_line(component: str, message: str, level: str = "INFO", **fields: Any) -> str:
    """One structured log line (JSON, newline-terminated), as :func:`log_line` writes it."""
    record = {
        "timestamp": datetime.now(UTC).isoformat(timespec="milliseconds"),
        "level": level,
        "component": component,
        "message": message,
        **fields,
    }
    return json.dumps(record, default=str) + "\n"


def log_line(component: str, message: str, level: str = "INFO", **fields: Any) -> None:
    """One structured log line on stdout, the stream every local component shares."""
    sys.stdout.write(format_line(component, message, level, **fields))
    sys.stdout.flush()
