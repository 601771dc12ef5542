"""The Lambda runtime loop of one host-process execution environment.

Started by the executor with the function's Python interpreter (stdlib only, so it runs
on any 3.x). It imports the handler once (the "init" phase), then answers invocations
one at a time on the process's main thread, as the AWS Python runtime does; Mangum and
asyncio code rely on that. It talks to the executor over two pipes with one JSON
object per line; stdout and stderr belong to the function (they are its logs).

    executor -> runtime: {"type": "invoke", "request_id", "invoked_function_arn",
                          "payload", "deadline_ms", "trace_id", "client_context"}
    runtime -> executor: {"type": "ready"} | {"type": "init_error", "error": {...}}
                         {"type": "result", "ok": bool, "payload": str}
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
import traceback
from typing import Any


class LambdaContext:
    """The subset of the AWS Lambda context object that handlers and Powertools read."""

    def __init__(self, invoke: dict[str, Any]) -> None:
        self.function_name = os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "")
        self.function_version = os.environ.get("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        self.invoked_function_arn = invoke.get("invoked_function_arn", "")
        self.memory_limit_in_mb = int(os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"))
        self.aws_request_id = invoke["request_id"]
        self.log_group_name = os.environ.get("AWS_LAMBDA_LOG_GROUP_NAME", "")
        self.log_stream_name = os.environ.get("AWS_LAMBDA_LOG_STREAM_NAME", "")
        self.identity = None
        self.client_context = invoke.get("client_context")
        self.tenant_id = None
        self._deadline_ms = int(invoke["deadline_ms"])

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self._deadline_ms - int(time.time() * 1000))


def _error(
    exc: BaseException, error_type: str | None = None, message: str | None = None
) -> dict[str, Any]:
    """An error object shaped like the one the AWS Python runtime returns."""
    return {
        "errorMessage": message if message is not None else str(exc),
        "errorType": error_type or type(exc).__name__,
        "requestId": "",
        # Like the AWS runtime, show the function's frames, not the runtime's own.
        "stackTrace": traceback.format_list(
            [f for f in traceback.extract_tb(exc.__traceback__) if f.filename != __file__]
        ),
    }


def _set_path(task_root: str, layer_roots: list[str]) -> None:
    """Put the code first and the layers next, in the order Lambda gives them."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    # sys.path[0] is this script's folder (LocalStack's venv): the function must not see it.
    if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
        sys.path.pop(0)
    front = [task_root]
    # A later layer overrides an earlier one when Lambda merges them into /opt.
    for root in reversed(layer_roots):
        front += [
            os.path.join(root, "python", "lib", version, "site-packages"),
            os.path.join(root, "python"),
        ]
    sys.path[:0] = [p for p in front if os.path.isdir(p)]


def _load_handler(spec: str) -> Any:
    module_name, _, attr = spec.rpartition(".")
    if not module_name:
        raise ValueError(f"Bad handler '{spec}': expected 'module.function'")
    try:
        module = importlib.import_module(module_name.replace("/", "."))
    except ImportError as exc:
        raise _InitError(
            _error(
                exc, "Runtime.ImportModuleError", f"Unable to import module '{module_name}': {exc}"
            )
        ) from exc
    except SyntaxError as exc:
        raise _InitError(
            _error(
                exc, "Runtime.UserCodeSyntaxError", f"Syntax error in module '{module_name}': {exc}"
            )
        ) from exc
    try:
        return getattr(module, attr)
    except AttributeError as exc:
        raise _InitError(
            _error(
                exc,
                "Runtime.HandlerNotFound",
                f"Handler '{attr}' missing on module '{module_name}'",
            )
        ) from exc


class _InitError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error["errorMessage"])
        self.error = error


def main() -> int:
    cmd_fd, res_fd = int(sys.argv[1]), int(sys.argv[2])
    commands = os.fdopen(cmd_fd, "r", encoding="utf-8")
    results = os.fdopen(res_fd, "w", encoding="utf-8")

    def send(message: dict[str, Any]) -> None:
        results.write(json.dumps(message) + "\n")
        results.flush()

    _set_path(
        os.environ["LAMBDA_TASK_ROOT"], json.loads(os.environ.pop("HOSTPROC_LAYER_ROOTS", "[]"))
    )
    os.chdir(os.environ["LAMBDA_TASK_ROOT"])
    try:
        handler = _load_handler(os.environ["_HANDLER"])
    except _InitError as exc:
        traceback.print_exc()
        send({"type": "init_error", "error": exc.error})
        return 1
    except Exception as exc:  # noqa: BLE001 - the module's top-level code failed: report it
        traceback.print_exc()
        send({"type": "init_error", "error": _error(exc)})
        return 1
    send({"type": "ready"})

    for line in commands:
        invoke = json.loads(line)
        if invoke.get("type") != "invoke":
            continue
        os.environ["_X_AMZN_TRACE_ID"] = invoke.get("trace_id") or ""
        try:
            event = json.loads(invoke["payload"]) if invoke["payload"] else {}
            result = handler(event, LambdaContext(invoke))
        except Exception as exc:  # noqa: BLE001 - any handler error is the invoke's result
            error = _error(exc)
            error["requestId"] = invoke["request_id"]
            print(f"[ERROR] {error['errorType']}: {error['errorMessage']}", file=sys.stderr)
            traceback.print_exc()
            send({"type": "result", "ok": False, "payload": json.dumps(error)})
            continue
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
        try:
            body = json.dumps(result)
        except (TypeError, ValueError) as exc:
            error = _error(exc, "Runtime.MarshalError", f"Unable to marshal response: {exc}")
            send({"type": "result", "ok": False, "payload": json.dumps(error)})
            continue
        send({"type": "result", "ok": True, "payload": body})
    return 0


if __name__ == "__main__":
    sys.exit(main())
