"""What ``asyncz dev`` prints once the local stack is up: where each part runs, and lines
to try that work as printed, from a second terminal in the same folder."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from asyncz.local.config import DevOptions
from asyncz.local.servers.embedded import ServerUrls


def cli_command(cwd: Path | None = None) -> str:
    """The ``asyncz`` command as a second terminal in ``cwd`` runs it: the bare name only
    when the PATH finds this one outside a virtualenv (a venv's ``bin`` is on the PATH only
    while it is activated), else its path (relative to ``cwd`` when below it)."""
    beside = Path(sys.executable).parent / "asyncz"
    if not beside.is_file():
        return f"{sys.executable} -m asyncz"
    found = shutil.which("asyncz")
    if found and Path(found).resolve() == beside.resolve() and sys.prefix == sys.base_prefix:
        return "asyncz"
    here = (cwd or Path.cwd()).absolute()
    if beside.absolute().is_relative_to(here):
        return os.path.join(".", beside.absolute().relative_to(here))
    return str(beside.absolute())


def banner(opts: DevOptions, url: str, urls: ServerUrls, api_key: str, key_source: str) -> str:
    """The banner, for ``opts``' runner serving ``url`` with ``api_key``."""
    pg = "embedded" if urls.embedded_postgres else "given by ASYNCZ_DATABASE_URL"
    rd = "embedded" if urls.embedded_redis else "given by ASYNCZ_REDIS_URL"
    workers = (
        f"{opts.workers} fixed"
        if opts.workers
        else (
            f"fleet of up to {opts.max_worker_sandboxes} (ASYNCZ_FLEET_MAX_WORKERS), "
            f"controller every {opts.fleet_interval_s:g}s"
        )
    )
    lines = [
        "",
        "AsyncZ local stack is up (Ctrl-C stops everything)",
        f"  API            {url}   (API Gateway REST proxy -> api Lambda handler)",
        f"  API key        {api_key}   [{key_source}]",
        f"  Postgres       {urls.database_url}   [{pg}]",
        f"  Redis          {urls.redis_url}   [{rd}]",
        f"  Data folder    {opts.data_dir.resolve()}",
        f"  Workers        {workers}; recovery every {opts.recovery_interval_s:g}s",
        "",
        "  Try:",
        f"    curl -s -X POST {url}/jobs -H 'x-api-key: {api_key}' "
        "-H 'content-type: application/json' "
        '-d \'{"task": "email_send", "payload": {"user_id": 42}}\'',
        f"    export ASYNCZ_API_URL={url} ASYNCZ_API_KEY={api_key}",
        f'    {cli_command()} submit echo \'{{"hello": "world"}}\' --wait',
        "",
    ]
    return "\n".join(lines) + "\n"
