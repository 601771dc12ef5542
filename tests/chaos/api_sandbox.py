"""One api Lambda sandbox as a process: reads one request per stdin line, answers per line.

Input ``{"method", "target", "body"}``; output ``{"status", "body", "seconds"}``. The real
handler (``asyncz.api.handler.handler``) gets API Gateway REST proxy events, as in AWS, and
keeps its pools across calls like a warm sandbox. A crash point kills the whole process.
"""

from __future__ import annotations

import json
import os
import sys
import time


def main() -> int:
    # The protocol keeps the real stdout; everything else printed (Powertools logs JSON to
    # stdout) goes to stderr, so a log line can never be mistaken for a reply.
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    from asyncz.api.handler import handler
    from tests.support.apigw import call

    key = os.environ["ASYNCZ_CHAOS_API_KEY"]
    for line in sys.stdin:
        msg = json.loads(line)
        started = time.monotonic()
        reply = call(handler, msg["method"], msg["target"], body=msg.get("body"), api_key=key)
        try:
            body = reply.json()
        except ValueError:
            body = reply.body.decode(errors="replace")
        out = {"status": reply.status, "body": body, "seconds": time.monotonic() - started}
        replies.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
