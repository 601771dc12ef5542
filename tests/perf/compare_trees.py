"""The same benchmark on two checkouts, alternated ABBA (so neither side always runs right
after the other's load and autovacuum), each on a bench database of its own: before/after
figures from one run.

    git worktree add /tmp/before <commit> && (cd /tmp/before && scripts/setup)
    .venv/bin/python -m tests.perf.compare_trees --before /tmp/before --after . --pairs 3 \\
        -- tests.perf.bench_drain --jobs 10000 --rounds 1

Each run's table rows (lines starting with ``|``, past the header) are printed with the side
that made them, with its per-round notes (``# round …``); the benchmark's own output says what
its columns are. ``--bench-from-after`` runs the after tree's script on both sides (each
with its own package), for an option the before tree's script lacks:

    .venv/bin/python -m tests.perf.compare_trees --before /tmp/before --after . --pairs 1 \\
        --bench-from-after -- tests.perf.bench_drain --jobs 10000 --rounds 1 --cpu

Both trees' packages are byte-compiled first, as a user's Python caches them on a first run
(a machine that sets ``PYTHONDONTWRITEBYTECODE`` would otherwise compile every module in
every process, and only the side whose setup compiles them would be spared it).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from tests.perf.common import DB, command, load_line, machine


def run_side(tree: Path, side: str, bench: list[str], scripts: Path | None) -> list[str]:
    """The benchmark's table rows (past its header) and per-round notes (``# round``), run in
    ``tree`` with its own package; from the ``scripts`` checkout's ``tests`` when given."""
    env = dict(os.environ)
    env["ASYNCZ_BENCH_DATABASE_URL"] = DB.rsplit("/", 1)[0] + f"/asyncz_bench_{side}"
    module, *args = bench
    run = ["-m", *bench]
    if scripts is not None:  # its tests package first; `asyncz` is still the tree's own
        code = (f"import runpy, sys; sys.path.insert(0, {str(scripts)!r}); sys.argv[1:] = "
                f"{args!r}; runpy.run_module({module!r}, run_name='__main__')")  # fmt: skip
        run = ["-c", code]
    out = subprocess.run(
        [str(tree / ".venv/bin/python"), *run],
        cwd=tree, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if out.returncode:
        raise SystemExit(f"{side} ({tree}) failed:\n{out.stderr[-3000:]}")
    lines = out.stdout.splitlines()
    rows = [ln for ln in lines if ln.startswith("|")][2:]  # past the header and its rule
    return [ln for ln in lines if ln in rows or ln.startswith("# round")]


def compile_package(tree: Path) -> None:
    subprocess.run(
        [str(tree / ".venv/bin/python"), "-m", "compileall", "-q",
         "--invalidation-mode", "checked-hash", "functions/asyncz"],
        cwd=tree, check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", type=Path, required=True)
    ap.add_argument("--after", type=Path, required=True)
    ap.add_argument("--pairs", type=int, default=3, help="ABBA blocks (4 runs each)")
    ap.add_argument(
        "--bench-from-after",
        action="store_true",
        help="run the after tree's benchmark script on both sides (the before tree's lacks an "
        "option); each side still runs its own package",
    )
    ap.add_argument("bench", nargs=argparse.REMAINDER, help="-- module and its arguments")
    args = ap.parse_args()
    bench = [a for a in args.bench if a != "--"]
    print(f"# before/after, ABBA — {machine()}")
    print(f"# command: {command('tests.perf.compare_trees', sys.argv[1:])}")
    for side, tree in (("before", args.before), ("after", args.after)):
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=tree,
                              capture_output=True, text=True).stdout.strip()  # fmt: skip
        print(f"# {side}: {tree} at {head}")
        compile_package(tree)
    scripts = args.after.resolve() if args.bench_from_after else None
    for _ in range(args.pairs):
        for side in ("before", "after", "after", "before"):
            tree = args.before if side == "before" else args.after
            load = load_line().split(" (")[0]
            for line in run_side(tree.resolve(), side, bench, scripts):
                print(f"{side:6} {load} {line}", flush=True)


if __name__ == "__main__":
    main()
