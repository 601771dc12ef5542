"""``servers.json`` in the local runner's data folder: per embedded server its port and the
process that owns it, read and written under a file lock (used by :mod:`asyncz.local.servers`)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from asyncz.local.procs import pid_alive, process_start_ticks

STATE_FILE = "servers.json"


class State:
    """``servers.json``: per server its port and owner (pid + start ticks), under a file lock."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / STATE_FILE
        self.lock_path = data_dir / ".servers.lock"
        self.data: dict[str, Any] = {}

    @contextlib.contextmanager
    def locked(self) -> Iterator[State]:
        with open(self.lock_path, "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                self.load()
                yield self
                self.save()
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def load(self) -> dict[str, Any]:
        try:
            self.data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            self.data = {}
        return self.data

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=2, sort_keys=True))
        tmp.replace(self.path)

    def server(self, name: str) -> dict[str, Any]:
        entry: dict[str, Any] = self.data.setdefault(name, {})
        return entry

    def owner_alive(self, name: str) -> bool:
        """Whether another live process owns server ``name``."""
        entry = self.data.get(name) or {}
        pid = entry.get("owner_pid")
        if not isinstance(pid, int) or pid == os.getpid() or not pid_alive(pid):
            return False
        return entry.get("owner_ticks") in (None, process_start_ticks(pid))

    def set_owner(self, name: str, port: int, *, owned: bool) -> None:
        entry = self.server(name)
        entry["port"] = port
        entry.pop("stopping", None)
        if owned:
            entry["owner_pid"] = os.getpid()
            entry["owner_ticks"] = process_start_ticks(os.getpid())

    def release(self, name: str) -> None:
        entry = self.server(name)
        if entry.get("owner_pid") == os.getpid():
            entry.pop("stopping", None)
            entry.pop("owner_pid", None)
            entry.pop("owner_ticks", None)
