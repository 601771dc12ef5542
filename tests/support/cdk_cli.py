"""The repository's npm CDK CLI, run the way the infra tests run it: offline, with no
credentials, and the manifest's stacks read back."""

from __future__ import annotations

import json
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CDK = ROOT / "node_modules" / ".bin" / "cdk"


def offline_env(tmp: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) minus anything that could supply AWS
    credentials."""
    given = os.environ if base is None else base
    env = {k: v for k, v in given.items() if not k.startswith(("AWS_", "CDK_"))}
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
    """The stack names of the cloud assembly in ``outdir`` (no context lookups allowed)."""
    manifest = json.loads((outdir / "manifest.json").read_text())
    assert not manifest.get("missing"), "synth needed context lookups"
    return {
        artifact["properties"].get("stackName", name)
        for name, artifact in manifest["artifacts"].items()
        if artifact["type"] == "aws:cloudformation:stack"
    }
