"""Configuration of ``asyncz dev``: options, the API key, and the sandboxes' environment."""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from asyncz.client.endpoint import default_data_dir
from asyncz.local.servers.embedded import ServerUrls

# Overridable for tests that run the runner around stand-in handlers.
API_HANDLER = os.environ.get("ASYNCZ_DEV_API_HANDLER") or "asyncz.api.handler.handler"
WORKER_HANDLER = os.environ.get("ASYNCZ_DEV_WORKER_HANDLER") or "asyncz.worker.handler.handler"
RECOVERY_HANDLER = (
    os.environ.get("ASYNCZ_DEV_RECOVERY_HANDLER") or "asyncz.recovery.handler.handler"
)
FLEET_HANDLER = "asyncz.fleet.handler.handler"
EVENTS_HANDLER = "asyncz.outbox.handler.handler"
FUNCTION_PREFIX = "asyncz-local"


DEPLOYED_MAX_WORKERS = 10  # the fleet's default in AWS (ASYNCZ_FLEET_MAX_WORKERS)


def local_cores() -> int:
    """The cores this process may run on (a container's CPU set, not the host's)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


def default_max_workers() -> int:
    """Worker sandboxes ``asyncz dev`` runs at most, unless ``ASYNCZ_FLEET_MAX_WORKERS`` says:
    the deployed default (10), or two per core when that is fewer.

    In AWS each sandbox has its own CPU; here they all share this machine's cores. Past about
    two per core (a no-op worker spends half its time waiting on Postgres and Redis) a new
    sandbox adds no throughput, only a cold start and context switches (BENCHMARKS.md, the
    drain benchmark); between one and two per core the fleet starts one only while the busy
    ones leave the cores time (asyncz.local.lambda_.workers). Each sandbox still runs
    ``ASYNCZ_WORKER_CONCURRENCY`` jobs at once; a project of slow I/O-bound jobs can raise
    the cap."""
    return min(DEPLOYED_MAX_WORKERS, 2 * local_cores())


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    return float(raw) if raw else default


def env_int(name: str, default: int | None) -> int | None:
    raw = os.environ.get(name, "").strip()
    return int(raw) if raw else default


@dataclass
class DevOptions:
    """Everything ``asyncz dev`` can be told (flags override ``ASYNCZ_DEV_*`` variables)."""

    host: str = "127.0.0.1"
    port: int = 8000
    data_dir: Path = field(default_factory=lambda: default_data_dir())
    workers: int | None = None  # fixed worker sandboxes; None = the fleet controller decides
    api_sandboxes: int = 4
    worker_timeout_s: float = 900.0  # Lambda's maximum
    fleet_interval_s: float = 60.0
    recovery_interval_s: float = 60.0
    shutdown_grace_s: float = 10.0
    max_worker_sandboxes: int = field(default_factory=default_max_workers)
    pg_port: int | None = None
    redis_port: int | None = None
    access_log: bool = True
    api_events: str = "rest"  # the event shape the api sees: "rest" (v1) or "http" (2.0)
    log_format: str = "human"  # the console: "human" lines or the components' "json" lines

    @classmethod
    def from_env(cls, **overrides: Any) -> DevOptions:
        opts = cls(
            port=env_int("ASYNCZ_DEV_PORT", 8000) or 8000,
            data_dir=Path(os.environ.get("ASYNCZ_DEV_DATA_DIR") or default_data_dir()),
            workers=env_int("ASYNCZ_DEV_WORKERS", None),
            api_sandboxes=env_int("ASYNCZ_DEV_API_SANDBOXES", 4) or 4,
            worker_timeout_s=env_float("ASYNCZ_DEV_WORKER_TIMEOUT_SECONDS", 900.0),
            fleet_interval_s=env_float("ASYNCZ_FLEET_INTERVAL_SECONDS", 60.0),
            recovery_interval_s=env_float("ASYNCZ_RECOVERY_INTERVAL_SECONDS", 60.0),
            shutdown_grace_s=env_float("ASYNCZ_DEV_SHUTDOWN_GRACE_SECONDS", 10.0),
            max_worker_sandboxes=env_int("ASYNCZ_FLEET_MAX_WORKERS", None) or default_max_workers(),
            api_events=os.environ.get("ASYNCZ_DEV_API_EVENTS", "rest").strip().lower() or "rest",
            log_format=os.environ.get("ASYNCZ_DEV_LOG_FORMAT", "human").strip().lower() or "human",
        )
        if opts.api_events not in ("rest", "http"):
            raise ValueError(f"ASYNCZ_DEV_API_EVENTS={opts.api_events!r}: use rest or http")
        if opts.log_format not in ("human", "json"):
            raise ValueError(f"ASYNCZ_DEV_LOG_FORMAT={opts.log_format!r}: use human or json")
        for key, value in overrides.items():
            if value is not None:
                setattr(opts, key, value)
        return opts


def resolve_api_key(data_dir: Path) -> tuple[str, str]:
    """The key the local stack accepts: ``ASYNCZ_DEV_API_KEY``, else one kept in the data dir."""
    given = os.environ.get("ASYNCZ_DEV_API_KEY", "").strip()
    if given:
        return given, "ASYNCZ_DEV_API_KEY"
    path = data_dir / "api-key"
    with contextlib.suppress(OSError):
        kept = path.read_text().strip()
        if kept:
            return kept, str(path)
    key = "az_" + secrets.token_urlsafe(24)
    data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(key + "\n")
    return key, f"{path} (generated)"


def sandbox_env(
    urls: ServerUrls, api_key: str, lambda_url: str, max_workers: int | None = None,
    public_url: str | None = None,
) -> dict[str, str]:  # fmt: skip
    """What every local sandbox sees: ``ASYNCZ_*`` settings plus a Lambda-ish AWS environment.
    The fleet's plan (api scale-out, fleet tick) is capped at ``max_workers``, the sandboxes
    the runner will start, unless ``ASYNCZ_FLEET_MAX_WORKERS`` is set. ``public_url``: the
    front's (callbacks' URLs), unless ``ASYNCZ_PUBLIC_URL`` is set."""
    env = {
        "ASYNCZ_DATABASE_URL": urls.database_url,
        "ASYNCZ_REDIS_URL": urls.redis_url,
        "ASYNCZ_API_KEY_HASHES": hashlib.sha256(api_key.encode()).hexdigest(),
        "ASYNCZ_WORKER_FUNCTION_NAME": f"{FUNCTION_PREFIX}-worker",
        # Lambda invokes (the api waking a worker, the real fleet handler) come back to us.
        "AWS_ENDPOINT_URL_LAMBDA": lambda_url,
    }
    defaults = {
        "ASYNCZ_STAGE": "local",
        "ASYNCZ_PUBLISH_GAUGES": "false",  # no CloudWatch without a cloud
        # a webhook receiver on this machine works: http, and loopback only of the private
        "ASYNCZ_WEBHOOKS": "true",
        "ASYNCZ_WEBHOOK_ALLOW_HTTP": "true",
        "ASYNCZ_WEBHOOK_ALLOW_NETWORKS": "127.0.0.0/8,::1/128",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "AWS_EC2_METADATA_DISABLED": "true",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_METRICS_DISABLED": "true",
        "POWERTOOLS_DEV": "false",
        "ASYNCZ_FLEET_MAX_WORKERS": str(max_workers or default_max_workers()),
        # ends wake the events function, which prints each event when no bus is configured
        "ASYNCZ_EVENTS_FUNCTION_NAME": f"{FUNCTION_PREFIX}-events",
        "ASYNCZ_CONSOLE_EVENTS": "false" if os.environ.get("ASYNCZ_EVENT_BUS") else "true",
        **({"ASYNCZ_PUBLIC_URL": public_url} if public_url else {}),
    }
    for key, value in defaults.items():
        env[key] = os.environ.get(key, value)
    return env


def check_task_modules(modules: str, timeout_s: float = 30.0) -> str | None:
    """Import the task modules in a throwaway process; why they do not import, or None."""
    names = [m.strip() for m in modules.split(",") if m.strip()]
    if not names:
        return None
    code = (
        "import sys\n"
        "from asyncz.tasks.loader import load_task_modules\n"
        "for name in sys.argv[1:]:\n"
        "    try:\n"
        "        load_task_modules([name])\n"
        "    except BaseException as exc:\n"
        "        print(f'{name}\\t{type(exc).__name__}: {exc}', file=sys.stderr)\n"
        "        sys.exit(3)\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, *names],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"importing the task modules {', '.join(names)} took over {timeout_s:g} s"
    if done.returncode == 0:
        return None
    lines = done.stderr.strip().splitlines()
    name, _, why = (lines[-1] if lines else "").partition("\t")
    if why:
        return f"task module {name!r} (ASYNCZ_TASK_MODULES) cannot be imported: {why}"
    return f"the task modules {', '.join(names)} cannot be imported:\n{done.stderr[-2000:]}"
