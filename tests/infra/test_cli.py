"""The npm `cdk` CLI and the plain Python entry synthesize both stages with no credentials."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from infra.app import ROOT
from tests.support.cdk_cli import CDK, offline_env, stacks_in
from tests.support.synth import TIMINGS

pytestmark = [pytest.mark.infra, pytest.mark.slow]


def test_cdk_cli_and_python_entry_synth_offline(tmp_path: Path) -> None:
    assert CDK.exists(), "npm CLIs missing: run `npm ci` in the repo root"
    env = offline_env(tmp_path)
    runs = {
        "cdk synth (aws)": [
            str(CDK),
            "synth",
            "-q",
            "--no-notices",
            "-o",
            str(tmp_path / "cli-aws"),
        ],
        "cdk synth -c stage=local": [
            str(CDK),
            "synth",
            "-q",
            "-c",
            "stage=local",
            "-o",
            str(tmp_path / "cli-local"),
        ],
        "python infra/app.py (local)": [sys.executable, "infra/app.py"],
    }
    script_env = {
        **env,
        "CDK_OUTDIR": str(tmp_path / "py-local"),
        "CDK_CONTEXT_JSON": json.dumps({"stage": "local"}),
    }
    started = time.perf_counter()
    procs = {
        name: subprocess.Popen(
            argv,
            cwd=ROOT,
            env=script_env if argv[0] == sys.executable else env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name, argv in runs.items()
    }
    for name, proc in procs.items():
        out, _ = proc.communicate(timeout=240)
        assert proc.returncode == 0, f"{name} failed:\n{out}"
    TIMINGS["cdk CLI + python entry synth (3 in parallel)"] = time.perf_counter() - started

    assert stacks_in(tmp_path / "cli-aws") == {"asyncz-Data", "asyncz-Service"}
    assert stacks_in(tmp_path / "cli-local") == {"asyncz-Service"}
    assert stacks_in(tmp_path / "py-local") == {"asyncz-Service"}
