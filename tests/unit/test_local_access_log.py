"""The front's access log: buffered off the event loop, one write per batch, nothing lost at
close (the gateway's own close included)."""

from __future__ import annotations

import io
import json
import threading
import time
import urllib.request
from typing import Any

import pytest

from asyncz.local.apigateway.gateway import Gateway
from asyncz.local.linebuffer import LineBuffer

pytestmark = pytest.mark.unit


class _Stream(io.StringIO):
    """Records each write call, and can hold writes back (a terminal that does not keep up)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []
        self.open_gate = threading.Event()
        self.open_gate.set()

    def write(self, text: str) -> int:
        self.open_gate.wait(30)
        self.writes.append(text)
        return super().write(text)


def _wait_for(check: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_lines_reach_the_stream_on_the_timer_as_one_write_per_batch() -> None:
    stream = _Stream()
    buf = LineBuffer(stream, interval_s=0.05)
    stream.open_gate.clear()  # the writer blocks on the stream; writers must not
    buf.write("a\n")
    _wait_for(lambda: buf.pending == 0)  # the writer took "a" and waits on the stream
    for i in range(100):
        buf.write(f"line {i}\n")  # returns although the stream is stuck
    assert buf.pending == 100
    stream.open_gate.set()
    _wait_for(lambda: "line 99\n" in stream.getvalue())
    assert stream.writes == ["a\n", "".join(f"line {i}\n" for i in range(100))]
    buf.close()


def test_close_writes_every_kept_line_and_later_lines_at_once() -> None:
    stream = _Stream()
    buf = LineBuffer(stream, interval_s=3600)  # the timer never fires in this test
    for i in range(1000):
        buf.write(f"{i}\n")
    assert stream.writes == []
    buf.close()
    assert stream.writes == ["".join(f"{i}\n" for i in range(1000))]
    buf.write("after\n")
    assert stream.getvalue().endswith("999\nafter\n")


def test_a_closed_output_does_not_break_the_writer() -> None:
    stream = io.StringIO()
    buf = LineBuffer(stream, interval_s=3600)
    buf.write("x\n")
    stream.close()
    buf.close()  # no exception: the line has nowhere to go


class _Backend:
    async def invoke(self, event: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        return {"ok": True, "result": {"statusCode": 202, "body": "{}", "headers": {}}}

    def close(self) -> None:
        pass


def test_gateway_close_writes_the_access_lines_of_every_request(
    capsys: pytest.CaptureFixture[str],
) -> None:
    gateway = Gateway(_Backend(), port=0)
    gateway.access_lines.interval_s = 3600  # only close() writes them
    gateway.start()
    try:
        for _ in range(20):
            req = urllib.request.Request(gateway.url + "/jobs", data=b"{}", method="POST")
            with urllib.request.urlopen(req, timeout=5) as resp:
                assert resp.status == 202
        assert capsys.readouterr().out == ""
    finally:
        gateway.close()
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [(x["component"], x["message"], x["status"]) for x in lines] == [
        ("gateway", "POST /jobs 202", 202)
    ] * 20
