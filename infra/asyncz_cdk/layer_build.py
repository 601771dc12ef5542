"""Build the dependency layer with pip, without Docker, for the functions' architecture.

pip downloads only binary wheels for CPython 3.12 on manylinux for the target architecture
(whatever the host is), into a content-addressed folder that later synths reuse. Our own
pinned runtime (``lambda-requirements.txt``) and the user's task requirements resolve in
one pip run, so a conflict between them fails the build instead of shadowing a package.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

# Bump when the way the layer is built changes: every cached build is rebuilt.
BUILD_VERSION = "2"
STAMP = "requirements.sha256"
RUNTIME_REQUIREMENTS = Path(__file__).with_name("lambda-requirements.txt")
PLATFORMS = {"x86_64": "x86_64", "arm64": "aarch64"}
# The Lambda runtime ships these; aws-xray-sdk pulls a second copy (~25 MB) that would
# shadow the runtime's.
RUNTIME_PROVIDED = ("boto3", "botocore", "s3transfer")

_MISSING = re.compile(
    r"(?:No matching distribution found for|"
    r"Could not find a version that satisfies the requirement)\s+(\S+)"
)


class LayerBuildError(RuntimeError):
    """pip could not assemble the layer from binary wheels (names the requirement)."""


def _platform(architecture: str) -> str:
    try:
        return PLATFORMS[architecture]
    except KeyError:
        raise ValueError(f"architecture={architecture!r}: use x86_64 or arm64") from None


def build_key(requirements: Sequence[Path], architecture: str) -> str:
    """A digest of what the layer is built from: the requirement files, arch, builder."""
    digest = hashlib.sha256(f"{BUILD_VERSION}\0{architecture}\0".encode())
    for path in requirements:
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def is_current(out_dir: Path, key: str) -> bool:
    """Whether ``out_dir`` holds a finished build made from ``key``."""
    stamp = out_dir / STAMP
    return (out_dir / "python").is_dir() and stamp.is_file() and stamp.read_text().strip() == key


_IS_CPYTHON_312 = "import sys; print(sys.implementation.name, sys.version_info[:2] == (3, 12))"


def _python312(candidates: Sequence[str] = ()) -> str | None:
    """The first of ``candidates`` (default: this Python, then ``python3.12`` on the PATH)
    that runs and is CPython 3.12. A name that exists but does not run (a pyenv shim for a
    version not installed) is passed over, never trusted."""
    for candidate in candidates or (sys.executable, "python3.12"):
        path = shutil.which(candidate)
        if path is None:
            continue
        try:
            probe = subprocess.run(
                [path, "-c", _IS_CPYTHON_312], capture_output=True, text=True, timeout=60
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if probe.returncode == 0 and probe.stdout.split() == ["cpython", "True"]:
            return path
    return None


def _explain(stderr: str, requirements: Sequence[Path], architecture: str) -> str:
    missing = _MISSING.search(stderr)
    files = ", ".join(str(p) for p in requirements)
    if missing:
        name = missing.group(1).rstrip(";,")
        return (
            f"task dependency {name!r} has no binary wheel for CPython 3.12 on manylinux "
            f"{architecture} (the layer is built with pip --only-binary, without Docker). "
            f"Pin a version of {name!r} that publishes a manylinux or pure-Python "
            f"(py3-none-any) wheel, or build the wheel yourself and list it in {files} by "
            f"path (or with --find-links). pip said:\n{stderr.strip()[-1500:]}"
        )
    return f"pip could not build the layer from {files}:\n{stderr.strip()[-3000:]}"


def build_layer(requirements: Sequence[Path], architecture: str, out_dir: Path) -> Path:
    """Install ``requirements`` into ``out_dir/python`` for ``architecture``; return ``out_dir``.

    Skipped when ``out_dir`` is already current; parallel builds of the same folder wait
    for the first one. Raises :class:`LayerBuildError` naming a requirement without a wheel.
    """
    plat = _platform(architecture)
    key = build_key(requirements, architecture)
    if is_current(out_dir, key):
        return out_dir
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with (out_dir.parent / f".{out_dir.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_current(out_dir, key):
            return out_dir
        staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
        try:
            _install(requirements, plat, staging / "python", architecture)
            (staging / STAMP).write_text(key + "\n")
            staging.chmod(0o755)
            # Swap in at the end so a reader never sees a half-built tree.
            shutil.rmtree(out_dir, ignore_errors=True)
            staging.rename(out_dir)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return out_dir


def _install(requirements: Sequence[Path], plat: str, target: Path, architecture: str) -> None:
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-input",
        "--platform",
        f"manylinux2014_{plat}",
        "--platform",
        f"manylinux_2_28_{plat}",
        "--implementation",
        "cp",
        "--python-version",
        "3.12",
        "--only-binary=:all:",
        "--no-compile",
        "--target",
        str(target),
    ]
    for path in requirements:
        command += ["-r", str(path.resolve())]
    # Relative paths inside the last (the user's) requirements file mean its own folder.
    result = subprocess.run(
        command, capture_output=True, text=True, cwd=requirements[-1].resolve().parent
    )
    if result.returncode != 0:
        raise LayerBuildError(_explain(result.stderr, requirements, architecture))
    for name in RUNTIME_PROVIDED:
        for path in [target / name, *target.glob(f"{name}-*.dist-info")]:
            shutil.rmtree(path, ignore_errors=True)
    shutil.rmtree(target / "bin", ignore_errors=True)
    for cache in list(target.rglob("__pycache__")):
        shutil.rmtree(cache, ignore_errors=True)
    _compile_bytecode(target)


def _compile_bytecode(target: Path, candidates: Sequence[str] = ()) -> bool:
    """Ship bytecode compiled by the runtime's Python, hash-checked: CDK copies the asset (new
    mtimes) and /opt is read-only, so without it every cold start compiles everything. With
    no CPython 3.12 that runs here, the layer ships without it (correct, slower cold starts)."""
    python = _python312(candidates)
    if python is None:
        print("layer: no Python 3.12 here; shipping without bytecode", file=sys.stderr)
        return False
    compile_all = [python, "-m", "compileall", "-q", "-j0", "--invalidation-mode"]
    done = subprocess.run(
        [*compile_all, "unchecked-hash", str(target)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    if done.returncode != 0:
        for cache in list(target.rglob("__pycache__")):
            shutil.rmtree(cache, ignore_errors=True)
        print(
            f"layer: {python} could not compile the layer ({done.stderr.strip()[-500:]}); "
            "shipping without bytecode",
            file=sys.stderr,
        )
        return False
    return True


def cached_layer(requirements: Sequence[Path], architecture: str, cache_dir: Path) -> Path:
    """Build (or reuse) the layer in ``cache_dir/layer-<arch>-<digest>``."""
    key = build_key(requirements, architecture)
    return build_layer(requirements, architecture, cache_dir / f"layer-{architecture}-{key[:16]}")


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m asyncz_cdk.layer_build ARCH OUT [REQUIREMENTS...]`` (layers/build.sh)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("architecture", choices=sorted(PLATFORMS))
    parser.add_argument("out", type=Path)
    parser.add_argument("requirements", type=Path, nargs="*")
    args = parser.parse_args(argv)
    try:
        build_layer([RUNTIME_REQUIREMENTS, *args.requirements], args.architecture, args.out)
    except LayerBuildError as error:
        sys.exit(f"layer: {error}")


if __name__ == "__main__":
    main()
