"""Log lines written off the caller's thread: kept in memory and written by one background
thread, one ``write`` per batch, every ``interval_s`` and at :meth:`LineBuffer.close`.

The local API Gateway front logs one access line per request on its event loop; a write and
a flush per line there cost a system call each, and a terminal that cannot keep up would
stall the loop and every request behind it. Here the loop only appends to a list.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from typing import TextIO

FLUSH_INTERVAL_S = 0.2


class LineBuffer:
    """Whole lines (each ending in a newline) for ``stream`` (``sys.stdout`` as it is at each
    flush, when not given). :meth:`write` never blocks on the stream; :meth:`close` writes
    what is left, so no line is lost at shutdown."""

    def __init__(
        self, stream: TextIO | None = None, *, interval_s: float = FLUSH_INTERVAL_S
    ) -> None:
        self._stream = stream
        self.interval_s = interval_s
        self._lines: list[str] = []
        self._lock = threading.Lock()  # guards _lines (the swap is atomic for writers)
        self._write_lock = threading.Lock()  # one batch on the stream at a time, in order
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def write(self, line: str) -> None:
        """Keep ``line`` for the next batch (the writer thread starts with the first line);
        after :meth:`close`, write it at once."""
        with self._lock:
            self._lines.append(line)
            closed = self._stop.is_set()
            if self._thread is None and not closed:
                self._thread = threading.Thread(target=self._run, name="log-writer", daemon=True)
                self._thread.start()
        if closed:
            self.flush()

    def flush(self) -> None:
        """Write what is kept now, as one write."""
        with self._write_lock:
            with self._lock:
                lines, self._lines = self._lines, []
            if not lines:
                return
            stream = self._stream or sys.stdout
            with contextlib.suppress(OSError, ValueError):  # a closed or broken output
                stream.write("".join(lines))
                stream.flush()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.flush()

    def close(self) -> None:
        """Stop the writer thread and write the lines still kept; later lines are written
        at once (nothing is dropped after close either)."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(5)
        self.flush()

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._lines)
