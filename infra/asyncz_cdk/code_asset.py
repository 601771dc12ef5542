"""The functions' code asset: the installed ``asyncz`` package plus the user's task code.

Both are copied into one content-addressed folder (no Docker, no bundling step), which
``lambda_.Code.from_asset`` then ships; a synth with unchanged sources reuses it.
"""

from __future__ import annotations

import fnmatch
import hashlib
import importlib.util
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath

PACKAGE = "asyncz"

# Never shipped from the user's task folder: tooling, build output, local state, VCS.
TASK_CODE_EXCLUDES = [
    "cdk.out",
    "cdk.json",
    "cdk.context.json",
    "node_modules",
    ".venv*",
    "venv",
    ".git",
    ".asyncz",
    ".work",
    "*.egg-info",
    "**/__pycache__",
    "**/*.pyc",
    "**/.mypy_cache",
    "**/.pytest_cache",
    "**/.ruff_cache",
    "**/tests",
]


class TaskCodeError(ValueError):
    """The task code folder or a task module is not usable."""


def package_dir() -> Path:
    """Where the ``asyncz`` package is installed (functions/asyncz in a checkout)."""
    spec = importlib.util.find_spec(PACKAGE)  # no import: infra never runs the app's code
    if spec is None or not spec.submodule_search_locations:
        raise TaskCodeError(f"the {PACKAGE!r} package is not installed in this environment")
    return Path(next(iter(spec.submodule_search_locations)))


def excluded(relative: PurePosixPath, patterns: Sequence[str]) -> bool:
    """CDK's glob rules: a pattern without ``/`` matches a name at any depth; ``**/x``
    matches ``x`` at any depth; any other pattern matches the path from the root; what
    is inside an excluded folder is excluded too."""
    parts = relative.parts
    return any(_matches(parts[:end], patterns) for end in range(1, len(parts) + 1))


def _matches(parts: tuple[str, ...], patterns: Sequence[str]) -> bool:
    for pattern in patterns:
        if "/" not in pattern:
            if fnmatch.fnmatchcase(parts[-1], pattern):
                return True
        elif pattern.startswith("**/"):
            tail = pattern[3:]
            if any(fnmatch.fnmatchcase("/".join(parts[i:]), tail) for i in range(len(parts))):
                return True
        elif fnmatch.fnmatchcase("/".join(parts), pattern.rstrip("/")):
            return True
    return False


def _files(root: Path, patterns: Sequence[str], prefix: str = "") -> Iterator[PurePosixPath]:
    """Files under ``root`` as ``prefix/relative`` paths, minus what ``patterns`` exclude."""
    for current, dirs, files in os.walk(root):
        here = PurePosixPath(prefix, Path(current).relative_to(root).as_posix())
        dirs[:] = sorted(d for d in dirs if not excluded(here / d, patterns))
        for name in sorted(files):
            if not excluded(here / name, patterns):
                yield here / name


def check_task_modules(task_code: Path | None, modules: Sequence[str]) -> None:
    """Each module names a ``.py`` file or a package in ``task_code`` (or is importable
    from the layer, which synth cannot see: then a dotted name under ``task_code`` only)."""
    for module in modules:
        if not all(part.isidentifier() for part in module.split(".")):
            raise TaskCodeError(f"task module {module!r} is not a Python module name")
        if task_code is None:
            raise TaskCodeError(f"task module {module!r} needs task_code (the folder holding it)")
        path = task_code.joinpath(*module.split("."))
        if not (path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()):
            raise TaskCodeError(
                f"task module {module!r} not found in {task_code}: expected "
                f"{path.with_suffix('.py')} or {path / '__init__.py'}"
            )


def stage_code(
    cache_dir: Path,
    *,
    package_excludes: Sequence[str],
    task_code: Path | None = None,
    task_excludes: Sequence[str] = (),
) -> Path:
    """Copy the package (minus ``package_excludes``) and ``task_code`` into
    ``cache_dir/code-<digest>`` and return that folder."""
    sources: list[tuple[Path, PurePosixPath]] = []  # (file, path in the asset)
    package = package_dir()
    # Matched as `asyncz/...`: the patterns are relative to the folder holding the package.
    for rel in _files(package, package_excludes, PACKAGE):
        sources.append((package.parent / rel, rel))
    if task_code is not None:
        if not task_code.is_dir():
            raise TaskCodeError(f"task_code {task_code} is not a folder")
        for rel in _files(task_code, [*TASK_CODE_EXCLUDES, *task_excludes]):
            if rel.parts[0] == PACKAGE:
                raise TaskCodeError(
                    f"{task_code / PACKAGE} would shadow the {PACKAGE!r} package: rename it"
                )
            sources.append((task_code / rel, rel))
    digest = hashlib.sha256()
    for path, target in sources:
        digest.update(target.as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    out = cache_dir / f"code-{digest.hexdigest()[:16]}"
    if out.is_dir():
        return out
    cache_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".code.", dir=cache_dir))
    try:
        for path, target in sources:
            dest = staging / target
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest)
        staging.chmod(0o755)
        try:
            staging.rename(out)
        except OSError:
            if not out.is_dir():  # a parallel synth made the same folder first
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out
