"""Service stack: functions, schedules, migration order, API + usage plan, monitoring."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.synth import Synth
from tests.support.templates import asyncz_functions, environment, resources

pytestmark = pytest.mark.infra


def by_id(template: dict[str, Any], logical_id: str) -> dict[str, Any]:
    return dict(template["Resources"][logical_id])


def test_functions_share_one_code_asset_and_the_layer(stage: Synth) -> None:
    fns = asyncz_functions(stage.service)
    (layer_id,) = resources(stage.service, "AWS::Lambda::LayerVersion")
    layer = by_id(stage.service, layer_id)["Properties"]
    arch = stage.config.architecture
    assert layer["CompatibleArchitectures"] == [arch]
    assert layer["CompatibleRuntimes"] == ["python3.12"]
    code_keys = set()
    for _, fn in fns.values():
        props = fn["Properties"]
        assert props["Runtime"] == "python3.12"
        assert props["Architectures"] == [arch]
        assert props["Layers"] == [{"Ref": layer_id}]
        code_keys.add(json.dumps(props["Code"], sort_keys=True))
    assert len(code_keys) == 1, "one code asset (functions/) for every function"


def test_worker_limits(stage: Synth) -> None:
    fns = asyncz_functions(stage.service)
    worker = fns["worker"][1]["Properties"]
    assert worker["Timeout"] == 900
    # The worker's reserved concurrency is the fleet's cap.
    assert worker["ReservedConcurrentExecutions"] == stage.config.fleet_max_workers
    assert (
        int(environment(fns["fleet"][1])["ASYNCZ_FLEET_MAX_WORKERS"])
        == worker["ReservedConcurrentExecutions"]
    )
    assert fns["api"][1]["Properties"]["Timeout"] <= 29


def test_schedules_every_minute(stage: Synth) -> None:
    fns = asyncz_functions(stage.service)
    targets = {}
    for rule in resources(stage.service, "AWS::Events::Rule").values():
        assert rule["Properties"]["ScheduleExpression"] == "rate(1 minute)"
        assert rule["Properties"]["State"] == "ENABLED"
        (target,) = rule["Properties"]["Targets"]
        targets[target["Arn"]["Fn::GetAtt"][0]] = rule
    assert set(targets) == {fns["fleet"][0], fns["recovery"][0], fns["events"][0]}
    # EventBridge may invoke exactly those three.
    invokers = {
        p["Properties"]["FunctionName"]["Fn::GetAtt"][0]
        for p in resources(stage.service, "AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] == "events.amazonaws.com"
    }
    assert invokers == {fns["fleet"][0], fns["recovery"][0], fns["events"][0]}


def test_the_fleet_covers_its_minute_and_ends_before_the_next_tick(stage: Synth) -> None:
    fns = asyncz_functions(stage.service)
    fleet_id, fleet = fns["fleet"]
    props = fleet["Properties"]
    (rule,) = [
        r["Properties"]
        for r in resources(stage.service, "AWS::Events::Rule").values()
        if r["Properties"]["Targets"][0]["Arn"]["Fn::GetAtt"][0] == fleet_id
    ]
    assert rule["ScheduleExpression"] == "rate(1 minute)"
    # It waits for the wakes due before its timeout (less a margin): the timeout is the
    # rule's minute, and one tick at a time.
    assert props["Timeout"] == 60
    assert props["ReservedConcurrentExecutions"] == 1
    assert props["MemorySize"] == 256  # what docs/cost.md prices the wait at


def test_migration_runs_before_api_and_schedules(stage: Synth) -> None:
    fns = asyncz_functions(stage.service)
    (trigger_id,) = resources(stage.service, "Custom::Trigger")
    trigger = by_id(stage.service, trigger_id)["Properties"]
    version = by_id(stage.service, trigger["HandlerArn"]["Ref"])
    assert version["Type"] == "AWS::Lambda::Version"
    assert version["Properties"]["FunctionName"] == {"Ref": fns["migrate"][0]}
    assert trigger["InvocationType"] == "RequestResponse"  # a failed migration fails the deploy
    for type_ in (
        "AWS::ApiGateway::Method",
        "AWS::ApiGateway::Deployment",
        "AWS::ApiGateway::Stage",
        "AWS::Events::Rule",
    ):
        for logical_id, resource in resources(stage.service, type_).items():
            assert trigger_id in resource.get("DependsOn", []), logical_id


def test_the_api_function_checks_every_key_and_the_stage_throttles(stage: Synth) -> None:
    """No API Gateway key or usage plan: they know one key and no scopes, so a named key
    could not pass them. Every method proxies to the api function, which checks the key
    (asyncz.access); the stage's throttle guards the whole API."""
    template = stage.service
    fns = asyncz_functions(template)
    methods = resources(template, "AWS::ApiGateway::Method")
    for method in methods.values():
        props = method["Properties"]
        assert props["Integration"]["Type"] == "AWS_PROXY"
        assert fns["api"][0] in json.dumps(props["Integration"]["Uri"])
        assert props.get("ApiKeyRequired") in (None, False)
    for gone in ("AWS::ApiGateway::UsagePlan", "AWS::ApiGateway::ApiKey"):
        assert resources(template, gone) == {}
    ((_, api_stage),) = resources(template, "AWS::ApiGateway::Stage").items()
    (settings,) = api_stage["Properties"]["MethodSettings"]
    assert (settings["ThrottlingRateLimit"], settings["ThrottlingBurstLimit"]) == (
        stage.config.api_throttle_rate,
        stage.config.api_throttle_burst,
    )
    # The first key (every scope) is the api_key field of a generated secret the app reads.
    secret_ref = environment(fns["api"][1])["ASYNCZ_API_KEYS_SECRET_ARN"]
    secret = by_id(template, secret_ref["Ref"])["Properties"]["GenerateSecretString"]
    assert secret["GenerateStringKey"] == "api_key"
    assert secret["PasswordLength"] == 40
    assert secret["ExcludePunctuation"] is True


def test_dlq_alarm_notifies_sns(stage: Synth) -> None:
    template = stage.service
    alarms = {
        a["Properties"]["MetricName"]: a["Properties"]
        for a in resources(template, "AWS::CloudWatch::Alarm").values()
    }
    (topic_id,) = resources(template, "AWS::SNS::Topic")
    dlq = alarms["DLQDepth"]
    assert dlq["Namespace"] == "AsyncZ"
    assert "Dimensions" not in dlq
    assert dlq["Threshold"] == 1
    assert dlq["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert dlq["Period"] == stage.config.alarm_period_seconds
    assert dlq["AlarmActions"] == [{"Ref": topic_id}]
    oldest = alarms["OldestQueuedAgeSeconds"]
    assert oldest["Threshold"] == stage.config.oldest_queued_age_threshold_seconds
    assert oldest["AlarmActions"] == [{"Ref": topic_id}]
    outputs = template["Outputs"]
    assert outputs["AlertsTopicArn"]["Value"] == {"Ref": topic_id}
    ids = {
        k
        for k, a in resources(template, "AWS::CloudWatch::Alarm").items()
        if a["Properties"]["MetricName"] == "DLQDepth"
    }
    assert outputs["DlqAlarmName"]["Value"] == {"Ref": ids.pop()}


def test_gauge_alarms_breach_on_missing_data_and_functions_have_error_alarms(
    stage: Synth,
) -> None:
    alarms = list(resources(stage.service, "AWS::CloudWatch::Alarm").values())
    by_metric: dict[str, list[dict[str, Any]]] = {}
    for a in alarms:
        by_metric.setdefault(a["Properties"]["MetricName"], []).append(a["Properties"])
    for gauge in ("DLQDepth", "OldestQueuedAgeSeconds", "Degraded", "RecoveryStepsFailed",
                  "OutboxOldestAgeSeconds"):  # fmt: skip
        [alarm] = by_metric[gauge]
        # silence from recovery (down, or a dependency down) must not read as "all fine"
        assert alarm["TreatMissingData"] == "breaching", gauge
    assert by_metric["Degraded"][0]["Threshold"] == 1
    assert by_metric["RecoveryStepsFailed"][0]["Threshold"] == 1
    functions = {"Api", "Worker", "Fleet", "Recovery", "Migrate", "Events"}
    for kind in ("Errors", "Throttles"):
        named = {
            dim["Value"]["Ref"]
            for a in by_metric[kind]
            for dim in a["Dimensions"]
            if dim["Name"] == "FunctionName"
        }
        assert len(named) == len(functions), (kind, named)
        assert all(a["Namespace"] == "AWS/Lambda" and a["AlarmActions"] for a in by_metric[kind])


def test_alarm_period_per_stage(aws: Synth, local: Synth) -> None:
    assert aws.config.alarm_period_seconds == 60
    assert local.config.alarm_period_seconds == 10


def test_a_deployed_worker_leaves_after_5_idle_seconds(aws: Synth, local: Synth) -> None:
    # an idle second costs a busy one's price; a warm re-invocation costs ~nothing
    for synth, seconds in ((aws, "5"), (local, "30")):
        worker = asyncz_functions(synth.service)["worker"][1]
        assert environment(worker)["ASYNCZ_WORKER_IDLE_EXIT_SECONDS"] == seconds


def test_email_subscription_only_when_configured(stage: Synth) -> None:
    assert not resources(stage.service, "AWS::SNS::Subscription")


def test_dashboard_shows_jobs_queue_and_lambda_health(stage: Synth) -> None:
    ((_, dashboard),) = resources(stage.service, "AWS::CloudWatch::Dashboard").items()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for metric in (
        "JobsSubmitted",
        "JobsCompleted",
        "JobsRetried",
        "JobsDeadLettered",
        "JobDuration",
        "QueueDepth",
        "DLQDepth",
        "OldestQueuedAgeSeconds",
        "Errors",
        "Throttles",
    ):
        assert metric in body, metric


def test_every_function_knows_the_declared_queues_and_the_fleet_no_database(
    stage: Synth,
) -> None:
    fns = asyncz_functions(stage.service)
    for name in ("api", "worker", "fleet", "recovery"):
        assert environment(fns[name][1])["ASYNCZ_QUEUES"] == ",".join(stage.config.queues)
    fleet_env = environment(fns["fleet"][1])
    assert not [k for k in fleet_env if k.startswith("ASYNCZ_DATABASE")], fleet_env


def test_database_log_exports_expire(aws: Synth) -> None:
    [instance] = resources(aws.data, "AWS::RDS::DBInstance").values()
    name = instance["Properties"]["DBInstanceIdentifier"]
    groups = [
        g["Properties"]
        for g in resources(aws.data, "AWS::Logs::LogGroup").values()
        if g["Properties"].get("LogGroupName") == f"/aws/rds/instance/{name}/postgresql"
    ]
    assert len(groups) == 1 and groups[0]["RetentionInDays"] > 0


def test_a_workers_callback_urls_are_under_the_apis_own_address(aws: Synth, lean: Synth) -> None:
    # built from the API resource alone (its id or endpoint), never its deployment or stage,
    # which need the api function: the worker's environment adds no dependency cycle
    for synth, front in ((aws, "AWS::ApiGateway::RestApi"), (lean, "AWS::ApiGatewayV2::Api")):
        worker = asyncz_functions(synth.service)["worker"][1]
        url = json.dumps(environment(worker)["ASYNCZ_PUBLIC_URL"])
        [(api_id, _)] = resources(synth.service, front).items()
        assert api_id in url, url
        assert "Deployment" not in url and "Stage" not in url, url
