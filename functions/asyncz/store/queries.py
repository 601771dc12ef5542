"""The named SQL queries of ``sql/queries.sql``, loaded once (a file read, no I/O to servers)."""

from __future__ import annotations

import re
from importlib import resources
from typing import LiteralString

_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


def _load() -> dict[str, LiteralString]:
    text = resources.files("asyncz.store").joinpath("sql/queries.sql").read_text("utf-8")
    parts = _NAME.split(text)
    queries: dict[str, LiteralString] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        sql = "\n".join(
            line for line in body.strip().splitlines() if not line.lstrip().startswith("--")
        ).rstrip(";\n ")
        queries[name] = sql  # type: ignore[assignment]  # read from our own file
    return queries


QUERIES = _load()
