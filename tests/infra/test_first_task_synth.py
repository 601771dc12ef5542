"""docs/first-task.md, steps 1, 2 and 5, run as written from an empty folder outside the
repo in a newcomer's environment: a fresh venv with the package and its ``infra`` extra,
the CDK CLI installed as the doc says, and ``npx cdk synth`` of the user's own project, on
a machine whose ``python3.12`` is a pyenv shim that does not run.

One substitution only: the checkout path (the repo)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support.cdk_cli import offline_env
from tests.support.first_task import block_with, blocks, run_script
from tests.support.newcomer import newcomer_env, source_copy
from tests.support.shims import broken_python312
from tests.support.templates import asset_dir, asyncz_functions, environment

pytestmark = [pytest.mark.infra, pytest.mark.slow, pytest.mark.timeout(900)]

MYTASKS = "from pydantic import BaseModel\n\nfrom asyncz.tasks import task\n\n\nclass ShoutIn("


def test_first_task_project_synthesizes_as_documented(tmp_path: Path) -> None:
    # Step 1 installs into a fresh venv, step 2 writes mytasks.py; step 5 installs the infra
    # extra and the CDK CLI, writes app.py and cdk.json, and synthesizes.
    script = (
        block_with("local", "python3 -m venv")
        + block_with("local", "cat > mytasks.py")
        + blocks("install-infra")
        + blocks("deploy")
    )
    assert "ASYNCZ_SRC=~/src/asyncz-serverless" in script
    src = source_copy(tmp_path / "src")  # a copy: another tier may build the repo meanwhile
    script = script.replace("ASYNCZ_SRC=~/src/asyncz-serverless", f"ASYNCZ_SRC={src}")
    shim = broken_python312(tmp_path / "shims")
    env = offline_env(tmp_path, newcomer_env(shim.parent))
    env.pop("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION")  # the doc sets it, for Node 20
    folder = tmp_path / "empty"
    folder.mkdir()
    status, out = run_script(script, folder, env, timeout=840)
    assert status == 0, out[-6000:]
    assert "b'!!" not in out, "jsii's Node banner, as bytes"
    venv_python = folder / "myproject" / ".venv" / "bin" / "python"
    version = subprocess.run([venv_python, "-c", "import sys; print(sys.version_info[:2])"],
                             capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    if version != "(3, 12)":  # the shim was the only python3.12: no bytecode, and synth says so
        assert "no Python 3.12 here; shipping without bytecode" in out, out[-3000:]

    project = folder / "myproject"
    assert (project / "node_modules" / ".bin" / "cdk").exists(), "the CLI, where the doc put it"
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
        assert not (code / "node_modules").exists()
