"""What every local sandbox and runner component shares: the Lambda context object, the
fake account, and the one structured log line format."""

from __future__ import annotations

import json
import sys
import time
import uuid
from datetime import UTC, datetime
from typing import Any

ACCOUNT_ID = "000000000000"
REGION = "us-east-1"


class LambdaContext:
    """The attributes and method of AWS Lambda's Python context object."""

    def __init__(
        self,
        function_name: str,
        timeout_s: float,
        *,
        request_id: str | None = None,
        memory_limit_in_mb: int = 1024,
        log_stream_name: str = "local",
    ) -> None:
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:{ACCOUNT_ID}:function:{function_name}"
        self.memory_limit_in_mb = memory_limit_in_mb
        self.aws_request_id = request_id or str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = log_stream_name
        self.identity: Any = None
        self.client_context: Any = None
        self._deadline = time.monotonic() + timeout_s

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds left before this invocation's deadline (never negative)."""
        return max(0, int((self._deadline - time.monotonic()) * 1000))

    def expire(self) -> None:
        """Bring the deadline forward to now, so a handler that watches it winds down."""
        self._deadline = time.monotonic()


def log_line(component: str, message: str, level: str = "INFO", **fields: Any) -> None:
    """One structured log line on stdout, the stream every local component shares."""
    record = {
        "timestamp": datetime.now(UTC).isoformat(timespec="milliseconds"),
        "level": level,
        "component": component,
        "message": message,
        **fields,
    }
    sys.stdout.write(json.dumps(record, default=str) + "\n")
    sys.stdout.flush()
