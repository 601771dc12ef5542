"""Both stages synthesize offline, pass cdk-nag, and expose the outputs others read."""

from __future__ import annotations

import json

import pytest

from tests.support.synth import Synth

pytestmark = pytest.mark.infra

SERVICE_OUTPUTS = {
    "ApiUrl",
    "ApiId",
    "ApiKeySecretArn",
    "WorkerFunctionName",
    "FleetFunctionName",
    "RecoveryFunctionName",
    "DlqAlarmName",
    "OldestQueuedAlarmName",
    "AlertsTopicArn",
}


def test_stack_names(aws: Synth, local: Synth) -> None:
    assert set(aws.templates) == {"asyncz-Data", "asyncz-Service"}
    assert set(local.templates) == {"asyncz-Service"}


def test_service_outputs_have_the_exact_names(stage: Synth) -> None:
    assert set(stage.service["Outputs"]) >= SERVICE_OUTPUTS


def test_no_lookups_and_no_environment(stage: Synth) -> None:
    manifest = json.loads((stage.outdir / "manifest.json").read_text())
    assert not manifest.get("missing"), "synth needed context lookups (credentials)"
    for artifact in manifest["artifacts"].values():
        if artifact["type"] == "aws:cloudformation:stack":
            assert artifact["environment"] == "aws://unknown-account/unknown-region"


def test_cdk_nag_passed(stage: Synth) -> None:
    # synth() raises ValidationFailed on any unacknowledged finding; a report, if any,
    # must say success.
    report = stage.outdir / "validation-report.json"
    if report.exists():
        for plugin in json.loads(report.read_text())["pluginReports"]:
            assert plugin["conclusion"] == "success", plugin


def test_local_stage_has_no_vpc_or_data_stores(local: Synth) -> None:
    types = {r["Type"] for r in local.service["Resources"].values()}
    assert not {
        t for t in types if t.startswith(("AWS::EC2::", "AWS::RDS::", "AWS::ElastiCache::"))
    }
