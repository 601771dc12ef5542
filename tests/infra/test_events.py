"""The lifecycle events' infrastructure: the events function and its minute's rule always;
the EventBridge endpoint, the bus grant and the wakes only when a bus is configured (off by
default: they cost money); the outbox's triggers on only where a sink delivers what they
write. cdk-nag runs in every synthesis here (tests/infra/conftest.py)."""

from __future__ import annotations

from typing import Any

import pytest

from asyncz_cdk.config import aws_stage
from tests.support.synth import Synth, synthesize
from tests.support.templates import (
    actions,
    as_list,
    asyncz_functions,
    environment,
    resources,
    role_of,
    statements_of_role,
)

pytestmark = pytest.mark.infra


@pytest.fixture(scope="module")
def with_bus(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The default stage publishing to a bus of its own."""
    config = aws_stage(overrides={"event_bus": "own"})
    return synthesize(config, tmp_path_factory.mktemp("cdk-events"))


def _endpoints(data: dict[str, Any]) -> list[str]:
    names = []
    for endpoint in resources(data, "AWS::EC2::VPCEndpoint").values():
        service = endpoint["Properties"]["ServiceName"]
        names.append(str(service if isinstance(service, str) else service["Fn::Join"][1][-1]))
    return names


def _grants(stage: Synth, name: str) -> list[dict[str, Any]]:
    fn = asyncz_functions(stage.service)[name][1]
    return statements_of_role(stage.service, role_of(fn))


def _puts(stage: Synth) -> dict[str, list[Any]]:
    """Function name -> the resources of its events:PutEvents statements."""
    found: dict[str, list[Any]] = {}
    for name in asyncz_functions(stage.service):
        for statement in _grants(stage, name):
            if any(a in ("events:PutEvents", "events:*", "*") for a in actions(statement)):
                found.setdefault(name, []).extend(as_list(statement["Resource"]))
    return found


def test_the_events_function_and_its_minute_rule_are_always_there(aws: Synth) -> None:
    fns = asyncz_functions(aws.service)
    logical_id, fn = fns["events"]
    rules = resources(aws.service, "AWS::Events::Rule").values()
    targets = {t["Arn"]["Fn::GetAtt"][0] for r in rules for t in r["Properties"]["Targets"]}
    assert logical_id in targets
    assert [r["Properties"]["ScheduleExpression"] for r in rules
            if r["Properties"]["Targets"][0]["Arn"]["Fn::GetAtt"][0] == logical_id] == [
        "rate(1 minute)"]  # fmt: skip
    assert "ASYNCZ_EVENT_BUS" not in environment(fn)


def test_by_default_no_endpoint_no_put_events_and_no_wake(aws: Synth) -> None:
    assert not any("events" in e for e in _endpoints(aws.data))
    assert _puts(aws) == {}
    assert not resources(aws.service, "AWS::Events::EventBus")
    fns = asyncz_functions(aws.service)
    for name in ("worker", "api", "recovery"):
        assert "ASYNCZ_EVENTS_FUNCTION_NAME" not in environment(fns[name][1])


def test_a_bus_brings_its_endpoint_and_put_events_on_that_bus_only(with_bus: Synth) -> None:
    assert sum("events" in e for e in _endpoints(with_bus.data)) == 1
    [bus_id] = resources(with_bus.service, "AWS::Events::EventBus")
    bus_arn = {"Fn::GetAtt": [bus_id, "Arn"]}
    assert _puts(with_bus) == {"events": [bus_arn]}
    fns = asyncz_functions(with_bus.service)
    assert environment(fns["events"][1])["ASYNCZ_EVENT_BUS"] == bus_arn


def test_with_a_bus_the_functions_that_end_jobs_may_wake_the_events_function(
    with_bus: Synth,
) -> None:
    fns = asyncz_functions(with_bus.service)
    events_id = fns["events"][0]
    for name in ("worker", "api", "recovery"):
        assert environment(fns[name][1])["ASYNCZ_EVENTS_FUNCTION_NAME"] == {"Ref": events_id}
        invokes = [s for s in _grants(with_bus, name) if "lambda:InvokeFunction" in actions(s)]
        assert {"Fn::GetAtt": [events_id, "Arn"]} in [
            r for s in invokes for r in as_list(s["Resource"])]  # fmt: skip
    assert "ASYNCZ_EVENTS_FUNCTION_NAME" not in environment(fns["fleet"][1])


@pytest.fixture(scope="module")
def with_webhooks(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The default stage delivering webhooks, with no bus."""
    config = aws_stage(overrides={"webhooks": True})
    return synthesize(config, tmp_path_factory.mktemp("cdk-webhooks"))


def _outbox(stage: Synth) -> str:
    """What the migration sets the outbox's triggers to (asyncz.store.migrations.set_outbox)."""
    return str(environment(asyncz_functions(stage.service)["migrate"][1])["ASYNCZ_OUTBOX"])


def test_with_no_sink_the_migration_turns_the_outbox_off(aws: Synth) -> None:
    assert _outbox(aws) == "off"  # no row written for a sweep to forget


def test_a_bus_or_webhooks_keep_the_outbox_on(with_bus: Synth, with_webhooks: Synth) -> None:
    assert (_outbox(with_bus), _outbox(with_webhooks)) == ("on", "on")


def test_the_migration_switches_the_outbox_once_the_events_function_is_updated(
    with_bus: Synth,
) -> None:
    """A deploy that adds a sink writes events only once the function that delivers them has
    it (before, its sweep would forget them)."""
    events_id = asyncz_functions(with_bus.service)["events"][0]
    [trigger] = resources(with_bus.service, "Custom::Trigger").values()
    assert events_id in trigger.get("DependsOn", [])
