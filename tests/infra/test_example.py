"""examples/sizes, a user's project, synthesizes with the npm CLI offline and ships its
own task module (code asset) and its own third-party dependency (layer)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest

from asyncz_cdk import AsyncZ, AsyncZProps, LayerBuildError, local_stage
from asyncz_cdk.code_asset import TaskCodeError
from infra.app import ROOT
from tests.support.cdk_cli import CDK, offline_env
from tests.support.synth import TIMINGS
from tests.support.templates import asset_dir, asyncz_functions, environment, resources

pytestmark = [pytest.mark.infra, pytest.mark.slow]

EXAMPLE = ROOT / "examples" / "sizes"


def cli_synth(project: Path, outdir: Path, tmp: Path, *context: str) -> dict[str, Any]:
    """`cdk synth` in ``project`` with no credentials; the manifest's stacks by name."""
    env = offline_env(tmp)
    # As a user would: the venv holding asyncz-serverless[infra] is the active one.
    env["PATH"] = f"{ROOT / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    argv = [str(CDK), "synth", "-q", "--no-notices", "-o", str(outdir)]
    for item in context:
        argv += ["-c", item]
    result = subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    manifest = json.loads((outdir / "manifest.json").read_text())
    assert not manifest.get("missing"), "synth needed context lookups"
    return {
        artifact["properties"].get("stackName", artifact_id): artifact_id
        for artifact_id, artifact in manifest["artifacts"].items()
        if artifact["type"] == "aws:cloudformation:stack"
    }


def test_example_synthesizes_offline_with_its_task_and_dependency(tmp_path: Path) -> None:
    assert CDK.exists(), "npm CLIs missing: run `npm ci` in the repo root"
    started = time.perf_counter()
    outdir = tmp_path / "out"
    stacks = cli_synth(EXAMPLE, outdir, tmp_path)
    TIMINGS["examples/sizes: cdk synth"] = time.perf_counter() - started
    assert set(stacks) == {"sizes-Data", "sizes-Service"}
    artifact = stacks["sizes-Service"]
    template = json.loads((outdir / f"{artifact}.template.json").read_text())

    functions = asyncz_functions(template)
    assert set(functions) == {"api", "worker", "fleet", "recovery", "migrate", "events"}
    for _, fn in functions.values():
        assert environment(fn)["ASYNCZ_TASK_MODULES"] == "tasks"
        code = asset_dir(outdir, artifact, fn["Properties"]["Code"])
        assert "import humanize" in (code / "tasks.py").read_text()
        assert (code / "asyncz" / "worker" / "handler.py").is_file()
        for tooling in ("cdk.out", "cdk.json", ".asyncz", "asyncz/tests"):
            assert not (code / tooling).exists(), f"{tooling} shipped in the code asset"
        (layer_ref,) = fn["Properties"]["Layers"]
        layer = template["Resources"][layer_ref["Ref"]]
        site = asset_dir(outdir, artifact, layer["Properties"]["Content"]) / "python"
        assert (site / "humanize" / "filesize.py").is_file(), "the example's dependency"
        assert (site / "psycopg").is_dir() and (site / "fastapi").is_dir(), "our own runtime"
    assert len(resources(template, "AWS::Lambda::LayerVersion")) == 1


def test_a_dependency_without_a_wheel_fails_synth_naming_it(tmp_path: Path) -> None:
    # docopt 0.6.2 was only ever published as an sdist.
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("humanize==4.17.0\ndocopt==0.6.2\n")
    (tmp_path / "tasks.py").write_text("")
    app = cdk.App()
    props = AsyncZProps(
        settings=local_stage(),
        task_code=tmp_path,
        task_modules=["tasks"],
        task_requirements=requirements,
        build_dir=tmp_path / "build",
    )
    with pytest.raises(LayerBuildError) as caught:
        AsyncZ(app, "asyncz", props)
    message = str(caught.value)
    assert "'docopt==0.6.2' has no binary wheel" in message
    assert "py3-none-any" in message and str(requirements) in message


def test_a_missing_task_module_fails_synth_naming_it(tmp_path: Path) -> None:
    props = AsyncZProps(settings=local_stage(), task_code=tmp_path, task_modules=["mytasks"])
    with pytest.raises(TaskCodeError, match=r"task module 'mytasks' not found"):
        AsyncZ(cdk.App(), "asyncz", props)
