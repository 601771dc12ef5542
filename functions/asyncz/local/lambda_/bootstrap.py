"""The Lambda runtime loop of one execution environment: the local runner's sandboxes and the
LocalStack host-process executor both run this file (the executor ships it as a link).

It imports the handler once (the "init" phase), then answers invocations one at a time on the
process's main thread, as the AWS Python runtime does; Mangum and asyncio code rely on that.
Stdlib only, so it runs on the function's interpreter before anything else is importable. It
talks to its parent over two pipes (file descriptors in argv) with one JSON object per line;
stdout and stderr belong to the function (they are its logs).

    parent -> runtime: {"type": "invoke", "request_id", "invoked_function_arn",
                        "payload" | "event", "deadline_ms", "trace_id", "client_context"}
    runtime -> parent: {"type": "ready", "init_ms"} | {"type": "init_error", "error": {...}}
                       {"type": "result", "ok": bool, "payload": str} | {..., "result": ...}

``payload`` is the JSON text of the event, of the result, or of the error object the AWS
runtime returns (the LocalStack executor passes Lambda's bytes through). The local runner
sends the event as an object (``event``) and gets a successful result as one (``result``).
SIGTERM brings the running invocation's deadline forward (the handler winds down) and ends
the process once it returns; the process also ends when its parent does.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import os
import signal
import sys
import threading
import time
import traceback
from typing import Any, NoReturn


class LambdaContext:
    """The attributes and method of AWS Lambda's Python context object; names not given come
    from the ``AWS_LAMBDA_*`` variables, as in AWS."""

    def __init__(
        self,
        function_name: str | None = None,
        timeout_s: float | None = None,
        *,
        request_id: str | None = None,
        deadline_ms: int | None = None,
        invoked_function_arn: str | None = None,
        memory_limit_in_mb: int | None = None,
        log_stream_name: str | None = None,
        client_context: Any = None,
    ) -> None:
        env = os.environ.get
        self.function_name = function_name or env("AWS_LAMBDA_FUNCTION_NAME", "")
        self.function_version = env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        self.invoked_function_arn = invoked_function_arn or (
            f"arn:aws:lambda:{env('AWS_REGION', 'us-east-1')}:000000000000"
            f":function:{self.function_name}"
        )
        self.memory_limit_in_mb = memory_limit_in_mb or int(
            env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "1024")
        )
        self.aws_request_id = request_id or os.urandom(16).hex()
        self.log_group_name = env("AWS_LAMBDA_LOG_GROUP_NAME", f"/aws/lambda/{self.function_name}")
        self.log_stream_name = log_stream_name or env("AWS_LAMBDA_LOG_STREAM_NAME", "local")
        self.identity: Any = None
        self.client_context = client_context
        self.tenant_id: str | None = None
        if deadline_ms is None:
            deadline_ms = int((time.time() + (timeout_s if timeout_s is not None else 3)) * 1000)
        self._deadline_ms = deadline_ms

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds left before this invocation's deadline (never negative)."""
        return max(0, self._deadline_ms - int(time.time() * 1000))

    def expire(self) -> None:
        """Bring the deadline forward to now, so a handler that watches it winds down."""
        self._deadline_ms = int(time.time() * 1000)


def error_object(
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


class _InitError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error["errorMessage"])
        self.error = error


def _set_path(task_root: str | None, layer_roots: list[str]) -> None:
    """Put the code first and the layers next, in the order Lambda gives them."""
    here = os.path.dirname(os.path.abspath(__file__))
    # Run as a script, sys.path[0] is this file's folder: the function must not see it.
    if sys.path and os.path.abspath(sys.path[0]) == here:
        sys.path.pop(0)
    if not task_root:
        return
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    front = [task_root]
    # A later layer overrides an earlier one when Lambda merges them into /opt.
    for root in reversed(layer_roots):
        front += [
            os.path.join(root, "python", "lib", version, "site-packages"),
            os.path.join(root, "python"),
        ]
    sys.path[:0] = [p for p in front if os.path.isdir(p)]


def load_handler(spec: str) -> Any:
    """``module.function`` (or ``module:function``), failing as the AWS runtime names it."""
    module_name, _, attr = spec.replace(":", ".").rpartition(".")
    if not module_name:
        raise _InitError(error_object(ValueError(spec), "Runtime.MalformedHandlerName"))
    try:
        module = importlib.import_module(module_name.replace("/", "."))
    except ImportError as exc:
        text = f"Unable to import module '{module_name}': {exc}"
        raise _InitError(error_object(exc, "Runtime.ImportModuleError", text)) from exc
    except SyntaxError as exc:
        text = f"Syntax error in module '{module_name}': {exc}"
        raise _InitError(error_object(exc, "Runtime.UserCodeSyntaxError", text)) from exc
    try:
        return getattr(module, attr)
    except AttributeError as exc:
        text = f"Handler '{attr}' missing on module '{module_name}'"
        raise _InitError(error_object(exc, "Runtime.HandlerNotFound", text)) from exc


def _watch_parent(parent_pid: int) -> None:
    # An environment never outlives its runner, even when the runner is SIGKILLed alone.
    while True:
        time.sleep(0.5)
        if os.getppid() != parent_pid:
            os._exit(1)


def _exit_now(code: int = 0) -> NoReturn:
    # Like an environment being reclaimed: no interpreter teardown (which would only complain
    # about the handler's still-open pools), just flushed output.
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def _answer(handler: Any, invoke: dict[str, Any], ctx: LambdaContext) -> str:
    """The result message's line. An invoke with ``event`` (an object: the local runner) is
    answered with ``result`` (an object); one with ``payload`` (JSON text: the LocalStack
    executor, which passes Lambda's bytes through) with ``payload``. The object form saves
    a JSON encoding and a decoding on each side per invocation."""
    inline = "event" in invoke
    try:
        if inline:
            event = invoke["event"]
        else:
            event = json.loads(invoke["payload"]) if invoke.get("payload") else {}
        result = handler(event, ctx)
    except Exception as exc:  # noqa: BLE001 - any handler error is the invoke's result
        error = error_object(exc)
        error["requestId"] = invoke["request_id"]
        print(f"[ERROR] {error['errorType']}: {error['errorMessage']}", file=sys.stderr)
        traceback.print_exc()
        return json.dumps({"type": "result", "ok": False, "payload": json.dumps(error)})
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    try:
        if inline:
            return json.dumps({"type": "result", "ok": True, "result": result})
        return json.dumps({"type": "result", "ok": True, "payload": json.dumps(result)})
    except (TypeError, ValueError) as exc:
        error = error_object(exc, "Runtime.MarshalError", f"Unable to marshal response: {exc}")
        return json.dumps({"type": "result", "ok": False, "payload": json.dumps(error)})


def main() -> int:
    commands = os.fdopen(int(sys.argv[1]), "r", encoding="utf-8")
    results = os.fdopen(int(sys.argv[2]), "w", encoding="utf-8")

    def send_line(line: str) -> None:
        results.write(line + "\n")  # one write: the parent reads whole lines
        results.flush()

    def send(message: dict[str, Any]) -> None:
        send_line(json.dumps(message))

    # Ctrl-C reaches the whole process group; the parent decides the shutdown order.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    current: list[LambdaContext] = []
    stopping = threading.Event()

    def on_term(_signum: int, _frame: Any) -> None:
        # Like Lambda's shutdown: the deadline comes forward and the handler should return.
        stopping.set()
        for ctx in current:
            ctx.expire()
        if not current:
            _exit_now()

    signal.signal(signal.SIGTERM, on_term)
    started = time.monotonic()
    task_root = os.environ.get("LAMBDA_TASK_ROOT")
    _set_path(task_root, json.loads(os.environ.pop("HOSTPROC_LAYER_ROOTS", "[]")))
    if task_root:
        os.chdir(task_root)
    try:
        handler = load_handler(os.environ["_HANDLER"])
    except _InitError as exc:
        traceback.print_exc()
        send({"type": "init_error", "error": exc.error})
        return 1
    except Exception as exc:  # noqa: BLE001 - the module's top-level code failed: report it
        traceback.print_exc()
        send({"type": "init_error", "error": error_object(exc)})
        return 1
    asyncio.set_event_loop(asyncio.new_event_loop())  # Mangum runs on this thread's loop
    send({"type": "ready", "init_ms": round((time.monotonic() - started) * 1000, 1)})

    for line in commands:
        invoke = json.loads(line)
        if invoke.get("type") != "invoke":
            break
        os.environ["_X_AMZN_TRACE_ID"] = invoke.get("trace_id") or ""
        ctx = LambdaContext(
            request_id=invoke["request_id"],
            deadline_ms=int(invoke["deadline_ms"]),
            invoked_function_arn=invoke.get("invoked_function_arn") or None,
            client_context=invoke.get("client_context"),
        )
        current.append(ctx)
        try:
            reply = _answer(handler, invoke, ctx)
        finally:
            current.remove(ctx)
        try:
            send_line(reply)
        except OSError:
            _exit_now()
        if stopping.is_set():
            _exit_now()
    _exit_now()


if __name__ == "__main__":
    sys.exit(main())
