"""Cold-start benchmark: import + first invocation of each Lambda handler module, each in a
FRESH process, beside a bare FastAPI + Mangum hello-world handler in the same run; plus the
size of the code asset and of the dependency layer.

Per sample, a new interpreter imports the handler module (timed), invokes it once (timed:
this is where settings are read, the app or service is built and Postgres/Redis connect)
and once more (warm). Samples are interleaved across handlers; medians are reported.

- api: ``POST /jobs`` (an echo job) through ``asyncz.api.handler.handler``.
- worker: ``asyncz.worker.handler.handler`` with an empty queue and
  ``ASYNCZ_WORKER_IDLE_EXIT_SECONDS=0.05``, so the first invocation includes one ~50 ms
  empty BZPOPMIN before it returns.
- fleet: ``asyncz.fleet.handler.handler`` with no backlog (no worker invoke).
- recovery: ``asyncz.recovery.handler.handler`` with gauges not published (no AWS call).
- hello: ``tests.perf.hello_handler.handler`` (FastAPI + pydantic + Mangum, one async route).

    .venv/bin/python -m tests.perf.bench_coldstart --repeat 5 [--build-layer]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from tests.perf.common import API_KEY, bench_env, command, load_line, machine, prepare

ROOT = Path(__file__).resolve().parents[2]
HANDLERS = {
    "hello (FastAPI+Mangum floor)": ("tests.perf.hello_handler", "api"),
    "api": ("asyncz.api.handler", "api"),
    "worker": ("asyncz.worker.handler", "worker"),
    "fleet": ("asyncz.fleet.handler", "fleet"),
    "recovery": ("asyncz.recovery.handler", "recovery"),
}

CHILD = r"""
import importlib, json, resource, sys, time
from tests.support.apigw import FakeContext, rest_event
module, kind, api_key = sys.argv[1], sys.argv[2], sys.argv[3]
if kind == "api":
    event = rest_event("POST", "/jobs", raw_body=b'{"task": "echo", "payload": {"n": 1}}',
                       api_key=api_key, headers={"Content-Type": "application/json"})
else:
    event = {}
t0 = time.perf_counter()
mod = importlib.import_module(module)
t1 = time.perf_counter()
first = mod.handler(event, FakeContext(function_name="asyncz-" + kind,
                                       timeout_s=900))
t2 = time.perf_counter()
mod.handler(event, FakeContext(function_name="asyncz-" + kind, timeout_s=900))
t3 = time.perf_counter()
if kind == "api":
    assert first["statusCode"] == 202, first
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print("COLDSTART " + json.dumps({"import_ms": (t1 - t0) * 1000, "first_ms": (t2 - t1) * 1000,
      "warm_ms": (t3 - t2) * 1000, "rss_mb": rss}))
"""


def sample(module: str, kind: str, no_pyc: bool = False) -> dict[str, float]:
    extra = {}
    if no_pyc:  # as deployed: no .pyc in the layer or the asset, and /opt is read-only
        extra = {
            "PYTHONPYCACHEPREFIX": tempfile.mkdtemp(prefix="asyncz-nopyc-"),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    env = bench_env(
        **extra,
        ASYNCZ_WORKER_IDLE_EXIT_SECONDS="0.05",
        ASYNCZ_WORKER_FUNCTION_NAME="asyncz-bench-worker",
        POWERTOOLS_METRICS_DISABLED="false",
        POWERTOOLS_METRICS_NAMESPACE="AsyncZBench",
        PYTHONPATH=f"{ROOT}:{ROOT / 'functions'}",
    )
    try:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, module, kind, API_KEY],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        if no_pyc:
            shutil.rmtree(extra["PYTHONPYCACHEPREFIX"], ignore_errors=True)
    for line in out.stdout.splitlines():
        if line.startswith("COLDSTART "):
            return json.loads(line[len("COLDSTART ") :])
    raise SystemExit(f"{module} failed:\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}")


def tree_size(root: Path, skip_dirs: tuple[str, ...] = ("__pycache__",)) -> tuple[int, int, int]:
    """(files, bytes unzipped, bytes zipped with deflate) of a tree, caches excluded."""
    files = total = 0
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(root.rglob("*")):
            if any(part in skip_dirs for part in path.parts) or path.suffix == ".pyc":
                continue
            if path.is_file():
                files += 1
                total += path.stat().st_size
                zf.write(path, path.relative_to(root))
    return files, total, len(buf.getvalue())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument(
        "--build-layer",
        action="store_true",
        help="run layers/build.sh x86_64 first (else measure the existing build)",
    )
    args = ap.parse_args()
    os.environ.update(bench_env())
    print(f"# cold-start benchmark — {machine()}")
    print(f"# {load_line()} (shared machine: other test suites may be running)")
    print(f"# command: {command('tests.perf.bench_coldstart', sys.argv[1:])}")
    print(
        f"# each sample a fresh `python -c` process; median of {args.repeat}, interleaved. "
        "'.pyc warm': bytecode caches present; 'no .pyc': PYTHONPYCACHEPREFIX set to an "
        "empty folder and nothing written, as in Lambda where the layer and asset ship "
        "without .pyc on a read-only file system (an upper bound: the stdlib is compiled "
        "too, which the Lambda runtime has cached)"
    )
    prepare()
    for no_pyc in (False, True):
        results: dict[str, list[dict[str, float]]] = {name: [] for name in HANDLERS}
        for _ in range(args.repeat):
            for name, (module, kind) in HANDLERS.items():
                prepare()  # same empty queue for every sample
                results[name].append(sample(module, kind, no_pyc))
        first = next(iter(HANDLERS))
        base = statistics.median(s["import_ms"] + s["first_ms"] for s in results[first])
        print()
        print(f"bytecode: {'no .pyc (as deployed)' if no_pyc else '.pyc warm'}")
        print()
        print(
            "| handler | import ms | first invocation ms | import + first ms | warm ms | "
            "max RSS MB | ratio to hello |"
        )
        print("|---|---|---|---|---|---|---|")
        for name, samples in results.items():
            med = {k: statistics.median(s[k] for s in samples) for k in samples[0]}
            both = statistics.median(s["import_ms"] + s["first_ms"] for s in samples)
            print(
                f"| {name} | {med['import_ms']:.0f} | {med['first_ms']:.0f} | {both:.0f} | "
                f"{med['warm_ms']:.1f} | {med['rss_mb']:.0f} | {both / base:.2f} |",
                flush=True,
            )

    if args.build_layer:
        subprocess.run([str(ROOT / "layers" / "build.sh"), "x86_64"], check=True)
    print()
    print("| asset | files | unzipped MB | zipped MB |")
    print("|---|---|---|---|")
    code = tree_size(
        ROOT / "functions", ("__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache")
    )
    print(
        f"| code asset (`functions/`, caches excluded) | {code[0]} | {code[1] / 1e6:.2f} | "
        f"{code[2] / 1e6:.2f} |"
    )
    layer = ROOT / "layers" / "build" / "x86_64" / "python"
    if layer.is_dir():
        lay = tree_size(layer)
        print(
            f"| layer (`layers/build/x86_64/python`) | {lay[0]} | {lay[1] / 1e6:.1f} | "
            f"{lay[2] / 1e6:.1f} |"
        )
    else:
        print("| layer | not built (pass --build-layer) | | |")
    print(f"# {load_line()} at the end")


if __name__ == "__main__":
    main()
