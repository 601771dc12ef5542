"""The named SQL queries of ``sql/*.sql`` (``queries.sql``, and ``dependencies.sql`` for job
dependencies), loaded once (file reads, no I/O to servers). A name is unique across files."""

from __future__ import annotations

import re
from importlib import resources
from typing import LiteralString

_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


def _load() -> dict[str, LiteralString]:
    folder = resources.files("asyncz.store").joinpath("sql")
    queries: dict[str, LiteralString] = {}
    for file in sorted(f.name for f in folder.iterdir() if f.name.endswith(".sql")):
        _parse(folder.joinpath(file).read_text("utf-8"), queries)
    return queries


def _parse(text: str, queries: dict[str, LiteralString]) -> None:
    parts = _NAME.split(text)
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in queries:
            raise ValueError(f"query {name!r} is named twice")
        sql = "\n".join(
            line for line in body.strip().splitlines() if not line.lstrip().startswith("--")
        ).rstrip(";\n ")
        queries[name] = sql  # type: ignore[assignment]  # read from our own file


QUERIES = _load()
