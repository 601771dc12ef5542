"""The EventBridge sink against moto: PutEvents in batches of up to 10 entries to the
configured bus, each entry's detail the CloudEvent with our id; the entries EventBridge
refused (FailedEntryCount) sent again, alone, until none is refused, else the batch raised."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from asyncz.outbox.eventbridge import EventBridgePublishError, EventBridgeSink
from asyncz.outbox.sink import Envelope

pytestmark = pytest.mark.unit


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name, value in (("AWS_ACCESS_KEY_ID", "x"), ("AWS_SECRET_ACCESS_KEY", "x"),
                        ("AWS_DEFAULT_REGION", "us-east-1")):  # fmt: skip
        monkeypatch.setenv(name, value)
    with mock_aws():
        yield


def _events(n: int) -> list[Envelope]:
    return [Envelope(id=f"00000000-0000-0000-0000-{i:012d}", type="asyncz.job.dead",
                     time="2026-12-06T12:00:00+00:00", data={"job_id": f"job-{i}"})
            for i in range(n)]  # fmt: skip


class Counting:
    """The real (moto) client, each PutEvents call's entries recorded; ``refuse`` entries
    (by our event id) are answered as failed that many times."""

    def __init__(self, refuse: dict[str, int] | None = None) -> None:
        self.client = boto3.client("events")
        self.calls: list[list[str]] = []
        self.refuse = dict(refuse or {})

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        ids = [json.loads(e["Detail"])["id"] for e in Entries]
        self.calls.append(ids)
        passed = [e for e, i in zip(Entries, ids, strict=True) if not self.refuse.get(i)]
        answer = self.client.put_events(Entries=passed) if passed else {"Entries": []}
        real = iter(answer["Entries"])
        entries = []
        for i in ids:
            if self.refuse.get(i):
                self.refuse[i] -= 1
                entries.append({"ErrorCode": "ThrottlingException", "ErrorMessage": "slow down"})
            else:
                entries.append(next(real))
        failed = sum(1 for e in entries if "ErrorCode" in e)
        return {"FailedEntryCount": failed, "Entries": entries}


def _queue_behind_a_rule(bus: str) -> tuple[Any, str]:
    events, sqs = boto3.client("events"), boto3.client("sqs")
    if bus != "default":
        events.create_event_bus(Name=bus)
    url = sqs.create_queue(QueueName="dead-jobs")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"]  # fmt: skip
    events.put_rule(Name="dead", EventBusName=bus,
                    EventPattern=json.dumps({"source": ["asyncz"],
                                             "detail-type": ["asyncz.job.dead"]}))  # fmt: skip
    events.put_targets(Rule="dead", EventBusName=bus, Targets=[{"Id": "q", "Arn": arn}])
    return sqs, url


def _received(sqs: Any, url: str) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages"):
        got.extend(json.loads(m["Body"]) for m in batch)
        sqs.delete_message_batch(QueueUrl=url, Entries=[
            {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(batch)])
    return got


@pytest.mark.parametrize("bus", ["asyncz-events", "default"])
def test_events_go_in_batches_of_ten_and_reach_a_rule_with_our_id_inside(
    aws: None, bus: str
) -> None:
    sqs, url = _queue_behind_a_rule(bus)
    client = Counting()
    asyncio.run(EventBridgeSink(bus, client=client).publish(_events(23)))
    assert [len(c) for c in client.calls] == [10, 10, 3]
    got = _received(sqs, url)
    assert len(got) == 23
    assert {g["detail-type"] for g in got} == {"asyncz.job.dead"}
    assert {g["source"] for g in got} == {"asyncz"}
    assert sorted(g["detail"]["id"] for g in got) == [e.id for e in _events(23)]
    assert got[0]["detail"]["specversion"] == "1.0"


def test_only_the_refused_entries_are_sent_again(aws: None) -> None:
    sqs, url = _queue_behind_a_rule("asyncz-events")
    events = _events(4)
    client = Counting(refuse={events[1].id: 1, events[3].id: 2})
    sink = EventBridgeSink("asyncz-events", client=client, pause=lambda s: None)
    asyncio.run(sink.publish(events))
    assert client.calls == [[e.id for e in events], [events[1].id, events[3].id], [events[3].id]]
    assert sorted(g["detail"]["id"] for g in _received(sqs, url)) == [e.id for e in events]


def test_entries_still_refused_after_the_tries_fail_the_batch(aws: None) -> None:
    _queue_behind_a_rule("asyncz-events")
    events = _events(2)
    client = Counting(refuse={events[0].id: 99})
    sink = EventBridgeSink("asyncz-events", client=client, attempts=3, pause=lambda s: None)
    with pytest.raises(EventBridgePublishError, match=r"1 of 2 events refused.*Throttling"):
        asyncio.run(sink.publish(events))
    assert len(client.calls) == 3
