"""`pip install asyncz-serverless` (the client alone, no extras) in a fresh venv: `asyncz
--help` and the commands that only talk to the API work; the commands that run the server
side say which extra to install and exit non-zero, never with a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.fake_api import FakeApi
from tests.support.newcomer import source_copy

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300)]


def test_the_cli_of_the_base_install_works_over_http_and_names_the_extras(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASYNCZ_", "VIRTUAL_ENV"))}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", str(source_copy(tmp_path / "src"))],
        check=True, env=env,
        capture_output=True,
    )  # fmt: skip
    probe = "import sys, asyncz.client; print(sorted({'rich', 'psycopg'} & set(sys.modules)))"
    installed = subprocess.run([str(venv / "bin" / "python"), "-c", "import psycopg"],
                               capture_output=True, env=env)  # fmt: skip
    assert installed.returncode != 0, "the base install should not bring the server side"
    client = subprocess.run([str(venv / "bin" / "python"), "-c", probe], capture_output=True,
                            text=True, env=env)  # fmt: skip
    assert client.stdout.strip() == "[]", client.stderr  # the client loads none of them
    api = FakeApi()
    api.routes[("GET", "/health")] = (200, {"status": "ok", "dependencies": {"postgres": "ok"}})

    def asyncz(*argv: str) -> subprocess.CompletedProcess[str]:
        # a local API URL with no key given: the CLI looks for the key `asyncz dev` wrote
        run_env = env | {"ASYNCZ_API_URL": api.url}
        return subprocess.run([str(venv / "bin" / "asyncz"), *argv], capture_output=True,
                              text=True, env=run_env, cwd=tmp_path, timeout=60)  # fmt: skip

    try:
        help_ = asyncz("--help")
        assert help_.returncode == 0 and "dev" in help_.stdout, help_.stderr
        health = asyncz("health")
        assert health.returncode == 0 and "ok" in health.stdout, health.stderr
        assert api.requests[-1]["path"] == "/health"
        stats = asyncz("--api-url", "http://127.0.0.1:9", "stats")  # nothing answers there
        assert stats.returncode == 1 and "cannot reach the API" in stats.stderr, stats.stderr
        runs = [help_, health, stats]
        for command, extra in (("dev", "local"), ("migrate", "server")):
            runs.append(asyncz(command))
            assert runs[-1].returncode != 0, runs[-1].stdout
            assert f"pip install 'asyncz-serverless[{extra}]'" in runs[-1].stderr, runs[-1].stderr
        for run in runs:
            assert "Traceback" not in run.stdout + run.stderr, run.stderr
    finally:
        api.server.shutdown()
        api.server.server_close()
