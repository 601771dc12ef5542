"""HostProcessRuntimeExecutor: one host process per LocalStack Lambda execution environment.

LocalStack creates one executor per execution environment and calls ``start`` once,
then ``invoke`` for one invocation at a time, then ``stop``. Here ``start`` spawns the
bootstrap with the function runtime's Python and waits for its init; ``invoke`` sends
the event over a pipe and waits at most the function timeout. On timeout the process
is killed (as Lambda resets a sandbox) and the next invoke starts a fresh one; so does
the invoke after the process died for any other reason.

Configuration (environment of the LocalStack process):

- ``LAMBDA_HOSTPROC_PYTHON<MAJOR><MINOR>`` (e.g. ``LAMBDA_HOSTPROC_PYTHON312``): the
  interpreter for runtime ``python3.12``; defaults to ``python3.12`` on ``PATH``.
- ``LAMBDA_HOSTPROC_LOG_DIR``: where each environment's stdout/stderr file goes
  (default: LocalStack's logs folder).
- ``LAMBDA_HOSTPROC_PRIVATE_TMP``: ``auto`` (default), ``1`` or ``0``. Each Lambda
  sandbox has its own ``/tmp``; where ``unshare`` may create a mount namespace (root),
  the process gets a private ``/tmp`` bound to its sandbox folder, so what functions
  and their libraries write to ``/tmp`` stays in LocalStack's work folder.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import select
import shutil
import signal
import subprocess
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import psutil
from localstack.services.lambda_.invocation.lambda_models import FunctionVersion, InvocationResult
from localstack.services.lambda_.invocation.runtime_executor import (
    LambdaRuntimeException,
    RuntimeExecutor,
)

from localstack import config

LOG = logging.getLogger(__name__)

BOOTSTRAP = Path(__file__).with_name("bootstrap.py")
LOCALHOST = "127.0.0.1"
MAX_LOG_CHARS = 256 * 1024


def python_for_runtime(runtime: str | None) -> str:
    """The host interpreter for a Lambda runtime name such as ``python3.12``."""
    if not runtime or not runtime.startswith("python"):
        raise LambdaRuntimeException(
            f"Runtime '{runtime}' is not supported by the hostprocess executor"
            " (Python runtimes only)"
        )
    version = runtime.removeprefix("python")
    variable = "LAMBDA_HOSTPROC_PYTHON" + version.replace(".", "")
    interpreter = os.environ.get(variable) or shutil.which(f"python{version}")
    if not interpreter or not os.access(interpreter, os.X_OK):
        raise LambdaRuntimeException(
            f"No host interpreter for runtime '{runtime}':"
            f" set {variable} to a python{version} binary"
        )
    return interpreter


@functools.cache
def private_tmp_supported() -> bool:
    """Whether this process may give children a private /tmp (a mount namespace)."""
    setting = os.environ.get("LAMBDA_HOSTPROC_PRIVATE_TMP", "auto").lower()
    if setting in ("0", "false", "no"):
        return False
    unshare = shutil.which("unshare")
    ok = (
        unshare is not None
        and subprocess.run(
            [unshare, "--mount", "--propagation", "private", "true"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        ).returncode
        == 0
    )
    if not ok:
        if setting in ("1", "true", "yes"):
            raise LambdaRuntimeException("LAMBDA_HOSTPROC_PRIVATE_TMP=1 but unshare --mount fails")
        LOG.warning("hostprocess: no private /tmp for Lambda processes (unshare --mount fails)")
    return ok


def _under_tmp(path: object) -> bool:
    resolved = Path(str(path)).resolve()
    tmp = Path("/tmp")  # noqa: S108 - the folder a private /tmp would hide
    return resolved == tmp or tmp in resolved.parents


# Binds the sandbox folder over /tmp inside a new mount namespace, then becomes the runtime.
_PRIVATE_TMP_SH = 'mount --bind "$0" /tmp && exec "$@"'


def _lambda_error(request_id: str, error_type: str, message: str) -> bytes:
    return json.dumps(
        {"errorType": error_type, "errorMessage": f"RequestId: {request_id} Error: {message}"}
    ).encode()


def _kill_tree(pid: int) -> None:
    """Kill a process and everything it started."""
    try:
        root = psutil.Process(pid)
        procs = [*root.children(recursive=True), root]
    except psutil.NoSuchProcess:
        return
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    psutil.wait_procs(procs, timeout=5)


class HostProcessRuntimeExecutor(RuntimeExecutor):
    """Runs a Python Lambda function's handler in a host process instead of a container."""

    def __init__(self, id: str, function_version: FunctionVersion) -> None:
        super().__init__(id=id, function_version=function_version)
        self._lock = threading.Lock()
        self._env: dict[str, str] = {}
        self._proc: subprocess.Popen[bytes] | None = None
        self._cmd: int | None = None
        self._res: int | None = None
        self._buffer = b""
        self._init_error: bytes | None = None
        self._stopped = False
        log_dir = Path(os.environ.get("LAMBDA_HOSTPROC_LOG_DIR") or config.dirs.logs) / "lambda"
        log_dir.mkdir(parents=True, exist_ok=True)
        self._log_path = log_dir / f"{function_version.id.function_name}-{id}.log"
        self._sandbox = Path(config.dirs.tmp) / "hostproc" / id
        self._private_tmp = False  # decided at start()

    # --- lifecycle -----------------------------------------------------------------

    def start(self, env_vars: dict[str, str]) -> None:
        code = self.function_version.config.code
        if code is None:
            raise LambdaRuntimeException("Container-image functions need Docker")
        python = python_for_runtime(self.function_version.config.runtime)
        (self._sandbox / "tmp").mkdir(parents=True, exist_ok=True)
        # Binding a fresh /tmp hides everything under /tmp: not when the project (a CI
        # clone, say) lives there, or the runtime would not find its own files.
        needed = (python, BOOTSTRAP, self._sandbox, code.get_unzipped_code_location())
        self._private_tmp = private_tmp_supported() and not any(_under_tmp(p) for p in needed)
        layer_roots = [
            str(layer.code.get_unzipped_code_location())
            for layer in self.function_version.config.layers
            if layer.code is not None
        ]
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "HOME": str(self._sandbox),
            # /tmp itself when it is private (see private_tmp_supported), else the folder.
            "TMPDIR": "/tmp" if self._private_tmp else str(self._sandbox / "tmp"),  # noqa: S108
            "PYTHONUNBUFFERED": "1",
            # The code folder may be a hot-reload mount of a work tree: leave no .pyc in it.
            "PYTHONDONTWRITEBYTECODE": "1",
            "AWS_ENDPOINT_URL": f"http://{LOCALHOST}:{config.GATEWAY_LISTEN[0].port}",
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_DEFAULT_REGION": self.function_version.id.region,
        }
        env.update({k: str(v) for k, v in env_vars.items() if v is not None})
        env["LAMBDA_TASK_ROOT"] = str(code.get_unzipped_code_location())
        env["LAMBDA_RUNTIME_DIR"] = str(BOOTSTRAP.parent)
        env["AWS_EXECUTION_ENV"] = f"AWS_Lambda_{self.function_version.config.runtime}"
        env["HOSTPROC_LAYER_ROOTS"] = json.dumps(layer_roots)
        self._env = env
        self._python = python
        with self._lock:
            self._spawn()

    def _spawn(self) -> None:
        """Start the runtime process and wait for its init to finish (caller holds the lock)."""
        cmd_r, cmd_w = os.pipe()
        res_r, res_w = os.pipe()
        argv = [
            self._python,
            "-u",
            str(BOOTSTRAP),
            str(cmd_r),
            str(res_w),
            self.function_version.id.function_name,
        ]
        if self._private_tmp:
            argv = [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                _PRIVATE_TMP_SH,
                str(self._sandbox / "tmp"),
                *argv,
            ]
        with open(self._log_path, "ab") as log:
            self._proc = subprocess.Popen(
                argv,
                env=self._env,
                cwd=self._env["LAMBDA_TASK_ROOT"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=(cmd_r, res_w),
            )
        os.close(cmd_r)
        os.close(res_w)
        self._cmd, self._res, self._buffer = cmd_w, res_r, b""
        self._init_error = None
        LOG.debug(
            "hostprocess %s: pid %s for %s",
            self.id,
            self._proc.pid,
            self.function_version.qualified_arn,
        )
        message = self._read_message(time.monotonic() + config.LAMBDA_RUNTIME_ENVIRONMENT_TIMEOUT)
        if message is None:
            tail = self._log_tail()
            self._terminate()
            raise LambdaRuntimeException(
                f"Runtime process for {self.function_version.id.function_name}"
                f" did not start: {tail}"
            )
        if message["type"] == "init_error":
            # Lambda reports an init failure on the invoke, then retries init next time.
            self._init_error = json.dumps(message["error"]).encode()
            self._terminate()

    def stop(self) -> None:
        self._stopped = True
        # Kill first, without the lock: an invoke waiting on the process then sees end of
        # file, returns, and releases the lock so the pipes can be closed.
        proc = self._proc
        if proc is not None and proc.poll() is None:
            _kill_tree(proc.pid)
        with self._lock:
            self._terminate()

    def _terminate(self) -> None:
        proc, self._proc = self._proc, None
        for fd in (self._cmd, self._res):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._cmd = self._res = None
        if proc is not None and proc.poll() is None:
            _kill_tree(proc.pid)
        if proc is not None:
            proc.wait()

    # --- invocation ----------------------------------------------------------------

    def invoke(self, payload: dict[str, str]) -> InvocationResult:
        request_id = payload["invoke-id"]
        timeout = int(self.function_version.config.timeout)
        started = time.monotonic()
        log_start = self._log_size()
        with self._lock:
            if self._stopped:
                raise LambdaRuntimeException(f"Execution environment {self.id} is stopped")
            if self._proc is None or self._proc.poll() is not None:
                self._terminate()
                self._spawn()  # a fresh sandbox after a timeout or a crash
            if self._init_error is not None:
                body, self._init_error = self._init_error, None
                return self._result(request_id, body, True, log_start, started)
            deadline = started + timeout
            message = {
                "type": "invoke",
                "request_id": request_id,
                "invoked_function_arn": payload.get("invoked-function-arn", ""),
                "payload": payload.get("payload", ""),
                "trace_id": payload.get("trace-id", ""),
                "deadline_ms": int(time.time() * 1000 + timeout * 1000),
            }
            try:
                os.write(self._cmd, (json.dumps(message) + "\n").encode())
                reply = self._read_message(deadline)
            except OSError:
                reply = None
            if reply is not None and reply.get("type") == "result":
                return self._result(
                    request_id, reply["payload"].encode(), not reply["ok"], log_start, started
                )
            if (
                time.monotonic() >= deadline
                and self._proc is not None
                and self._proc.poll() is None
            ):
                self._terminate()
                body = _lambda_error(
                    request_id, "Sandbox.Timedout", f"Task timed out after {timeout:.2f} seconds"
                )
                return self._result(request_id, body, True, log_start, started)
            code = None
            if self._proc is not None:
                try:
                    code = self._proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    code = None
            self._terminate()
            status = (
                f"signal: {_signal_name(-code)}"
                if code is not None and code < 0
                else f"exit status {code}"
            )
            body = _lambda_error(
                request_id, "Runtime.ExitError", f"Runtime exited with error: {status}"
            )
            return self._result(request_id, body, True, log_start, started)

    def _read_message(self, deadline: float) -> dict | None:
        """One JSON line from the runtime, or None on timeout or end of file."""
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._res is None:
                return None
            ready, _, _ = select.select([self._res], [], [], min(remaining, 1.0))
            if not ready:
                continue
            chunk = os.read(self._res, 1 << 16)
            if not chunk:
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return json.loads(line)

    def _result(
        self, request_id: str, body: bytes, is_error: bool, log_start: int, started: float
    ) -> InvocationResult:
        duration_ms = (time.monotonic() - started) * 1000
        logs = (
            f"START RequestId: {request_id} Version: {self.function_version.id.qualifier}\n"
            f"{self._log_since(log_start)}"
            f"END RequestId: {request_id}\n"
            f"REPORT RequestId: {request_id}\tDuration: {duration_ms:.2f} ms\t"
            f"Memory Size: {self.function_version.config.memory_size} MB\n"
        )
        return InvocationResult(request_id=request_id, payload=body, is_error=is_error, logs=logs)

    # --- logs ----------------------------------------------------------------------

    def _log_size(self) -> int:
        try:
            return self._log_path.stat().st_size
        except FileNotFoundError:
            return 0

    def _log_since(self, offset: int) -> str:
        try:
            with open(self._log_path, "rb") as f:
                f.seek(offset)
                text = f.read(MAX_LOG_CHARS).decode("utf-8", "replace")
        except FileNotFoundError:
            return ""
        return text if not text or text.endswith("\n") else text + "\n"

    def _log_tail(self) -> str:
        return self._log_since(max(0, self._log_size() - 4000))

    def get_logs(self) -> str:
        return self._log_tail()

    # --- addresses -----------------------------------------------------------------

    def get_address(self) -> str:
        return LOCALHOST

    def get_endpoint_from_executor(self) -> str:
        return LOCALHOST

    def get_runtime_endpoint(self) -> str:
        return f"http://{LOCALHOST}:{config.GATEWAY_LISTEN[0].port}/_localstack_lambda/{self.id}"

    # --- versions ------------------------------------------------------------------

    @classmethod
    def prepare_version(cls, function_version: FunctionVersion) -> None:
        try:
            python_for_runtime(function_version.config.runtime)
        except LambdaRuntimeException as exc:
            # Creating the function must still succeed (CDK stacks hold Node.js custom
            # resource handlers that LocalStack's community edition never invokes);
            # invoking it fails with this message.
            LOG.warning("%s: %s", function_version.qualified_arn, exc)
        if function_version.config.code:
            function_version.config.code.prepare_for_execution()
        for layer in function_version.config.layers:
            if layer.code is not None:
                layer.code.prepare_for_execution()

    @classmethod
    def cleanup_version(cls, function_version: FunctionVersion) -> None:
        pass

    @classmethod
    def validate_environment(cls) -> bool:
        LOG.info(
            "Lambda functions run as host processes (hostprocess executor), started %s",
            datetime.now(UTC).isoformat(timespec="seconds"),
        )
        return True


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name.removeprefix("SIG").lower()
    except ValueError:
        return str(number)
