"""The npm `cdk` CLI and the plain Python entry synthesize both stages with no credentials."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from infra.app import ROOT
from tests.infra.conftest import TIMINGS

pytestmark = [pytest.mark.infra, pytest.mark.slow]

CDK = ROOT / "node_modules" / ".bin" / "cdk"


def offline_env(tmp: Path) -> dict[str, str]:
    """The environment minus anything that could supply AWS credentials."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_"))}
    env.update(
        AWS_CONFIG_FILE=str(tmp / "no-aws-config"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp / "no-aws-credentials"),
        AWS_EC2_METADATA_DISABLED="true",
        CDK_HOME=str(tmp / "cdk-home"),
        CDK_DISABLE_VERSION_CHECK="1",
        CDK_DISABLE_CLI_TELEMETRY="1",
        JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20",
    )
    return env


def stacks_in(outdir: Path) -> set[str]:
    manifest = json.loads((outdir / "manifest.json").read_text())
    assert not manifest.get("missing"), "synth needed context lookups"
    return {
        artifact["properties"].get("stackName", name)
        for name, artifact in manifest["artifacts"].items()
        if artifact["type"] == "aws:cloudformation:stack"
    }


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
