"""docs/first-task.md, step 5, as written: the project folder of steps 1-2 gets app.py and
cdk.json, and `npx cdk synth` (the repo's CLI, the repo's venv active) ships mytasks.py."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.infra.test_cli import CDK, offline_env
from tests.infra.test_example import asset_dir
from tests.support.first_task import block_with, blocks
from tests.support.templates import asyncz_functions, environment

pytestmark = [pytest.mark.infra, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
MYTASKS = "from pydantic import BaseModel\n\nfrom asyncz.tasks import task\n\n\nclass ShoutIn("


def test_first_task_project_synthesizes_as_documented(tmp_path: Path) -> None:
    project = tmp_path / "myproject"
    project.mkdir()
    # Step 2's block writes mytasks.py; step 5's block writes app.py, cdk.json and synths.
    script = block_with("local", "cat > mytasks.py") + blocks("deploy").replace("npx cdk", str(CDK))
    env = offline_env(tmp_path)
    env["PATH"] = f"{ROOT / '.venv' / 'bin'}{os.pathsep}{env['PATH']}"
    result = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + script],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (project / "mytasks.py").read_text().startswith(MYTASKS)

    manifest = json.loads((project / "cdk.out" / "manifest.json").read_text())
    stacks = {
        a["properties"].get("stackName"): artifact_id
        for artifact_id, a in manifest["artifacts"].items()
        if a["type"] == "aws:cloudformation:stack"
    }
    assert set(stacks) == {"asyncz-Data", "asyncz-Service"}
    artifact = stacks["asyncz-Service"]
    template = json.loads((project / "cdk.out" / f"{artifact}.template.json").read_text())
    for _, fn in asyncz_functions(template).values():
        assert environment(fn)["ASYNCZ_TASK_MODULES"] == "mytasks"
        code = asset_dir(project / "cdk.out", artifact, fn["Properties"]["Code"])
        assert (code / "mytasks.py").read_text().startswith(MYTASKS)
        assert not (code / ".venv").exists() and not (code / "cdk.out").exists()
