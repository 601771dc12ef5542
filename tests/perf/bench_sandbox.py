"""Invocations per second through one local sandbox
(:class:`asyncz.local.lambda_.sandbox.SandboxProcess`): the cost of the runtime protocol
alone, with a handler that returns a canned proxy result for a REST-proxy-sized event.
Prints one line.

    .venv/bin/python -m tests.perf.bench_sandbox [--seconds 3]

"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from asyncz.local.lambda_.sandbox import SandboxProcess, SandboxSpec

EVENT = {
    "httpMethod": "POST",
    "path": "/jobs",
    "headers": {f"h{i}": "v" * 30 for i in range(15)},
    "requestContext": {"requestId": "r", "stage": "local", "identity": {"sourceIp": "127.0.0.1"}},
    "body": json.dumps({"task": "echo", "payload": {"n": 1}}),
}


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    body = json.dumps({"job_id": "x" * 36, "status": "queued"})
    return {"statusCode": 202, "headers": {"content-type": "application/json"}, "body": body}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    sandbox = SandboxProcess(
        SandboxSpec(name="bench", function_name="bench", handler="tests.perf.bench_sandbox.handler")
    )
    sandbox.wait_ready(60)
    try:
        for _ in range(200):
            sandbox.invoke(EVENT, 30)
        n, started = 0, time.perf_counter()
        while time.perf_counter() - started < args.seconds:
            sandbox.invoke(EVENT, 30)
            n += 1
        elapsed = time.perf_counter() - started
        print(f"{n / elapsed:.0f} invocations/s, {elapsed / n * 1e6:.0f} µs each")
    finally:
        sandbox.stop(2)


if __name__ == "__main__":
    main()
