"""This checkout's reader of ``/proc/<pid>/stat`` (``asyncz.local.procs``), loaded from its
file: ``compare_trees --bench-from-after`` runs these scripts with the tree it measures on
``sys.path``, whose package may predate the reader (the module needs psycopg, nothing of
``asyncz``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "functions" / "asyncz" / "local" / "procs.py"
_spec = importlib.util.spec_from_file_location("_asyncz_bench_procs", _PATH)
assert _spec is not None and _spec.loader is not None
_procs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_procs)

cpu_seconds = _procs.cpu_seconds
stat_fields = _procs.stat_fields
