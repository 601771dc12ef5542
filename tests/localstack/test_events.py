"""Lifecycle events through LocalStack's EventBridge: the stage publishes to a bus of its own
(localstack/deploy.sh, ``event_bus=own``); a rule on it routes ``asyncz.job.dead`` to an SQS
queue, and a dead job's event arrives there, once, with our id inside ``detail``."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from tests.support.localstack import Stack, _client

pytestmark = pytest.mark.localstack


def _queue_behind_a_dead_jobs_rule(bus_arn: str) -> tuple[Any, str, str]:
    events, sqs = _client("events"), _client("sqs")
    name = f"asyncz-dead-{uuid.uuid4().hex[:8]}"
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"]  # fmt: skip
    pattern = {"source": ["asyncz"], "detail-type": ["asyncz.job.dead"]}
    events.put_rule(Name=name, EventBusName=bus_arn, EventPattern=json.dumps(pattern))
    events.put_targets(Rule=name, EventBusName=bus_arn, Targets=[{"Id": "queue", "Arn": arn}])
    return sqs, url, name


def _messages(sqs: Any, url: str, seconds: float) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        batch = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
        for message in batch.get("Messages", []):
            got.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return got


def test_a_dead_jobs_event_reaches_an_sqs_queue_through_a_rule_once(stack: Stack) -> None:
    sqs, url, rule = _queue_behind_a_dead_jobs_rule(stack.outputs["EventBusArn"])
    job_id: str | None = None
    try:
        job_id = stack.submit("fail", {"message": "dead on purpose"}, max_retries=0)
        job = stack.wait_job_with_fleet(job_id, {"dead", "completed"}, timeout=90)
        assert job["status"] == "dead", job
        mine: list[dict[str, Any]] = []
        deadline = time.monotonic() + 120  # the wake, else the events function's minute
        while not mine and time.monotonic() < deadline:
            mine = [m for m in _messages(sqs, url, 5) if m["detail"]["data"]["job_id"] == job_id]
        assert len(mine) == 1, "the dead job's event did not arrive"
        [event] = mine
        assert event["detail-type"] == "asyncz.job.dead" and event["source"] == "asyncz"
        assert event["detail"]["type"] == "asyncz.job.dead" and event["detail"]["id"]
        stack.invoke("EventsFunctionName")  # a sweep finds nothing left to send
        again = [m for m in _messages(sqs, url, 10) if m["detail"]["data"]["job_id"] == job_id]
        assert again == [], "delivered twice"
    finally:
        if job_id is not None:  # the other tests count the DLQ from zero
            stack.http.delete(f"/dlq/{job_id}")
        events = _client("events")
        events.remove_targets(Rule=rule, EventBusName=stack.outputs["EventBusArn"], Ids=["queue"])
        events.delete_rule(Name=rule, EventBusName=stack.outputs["EventBusArn"])
        sqs.delete_queue(QueueUrl=url)
