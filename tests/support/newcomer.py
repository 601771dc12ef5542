"""A newcomer's shell, for tests that run the docs as written: none of this test run's
``ASYNCZ_*`` variables, no active virtualenv, no pyenv version picked by the environment,
no PYTHONPATH, no Node banner silenced, and the repo's .venv not on the PATH."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent  # the repo's .venv, which runs the tests
_NOT_A_NEWCOMERS = (
    "ASYNCZ_",
    "VIRTUAL_ENV",
    "PYENV_VERSION",
    "PYTHONPATH",
    "PYTHONHOME",
    "JSII_SILENCE_WARNING",
)


def newcomer_env(*first_on_path: Path) -> dict[str, str]:
    """This process's environment as a newcomer has it; ``first_on_path`` folders go
    before the rest of the PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_NOT_A_NEWCOMERS)}
    ours = {str(VENV_BIN), str(ROOT / ".venv" / "bin")}
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and p not in ours]
    env["PATH"] = os.pathsep.join([*map(str, first_on_path), *path])
    return env


def source_copy(dest: Path) -> Path:
    """What ``pip install <checkout>`` reads of this repo (the project file, the README, the
    packages' folders), copied to ``dest``: a build writes ``build/`` and ``*.egg-info``
    into the tree it builds, so two tiers installing the repo at once from the checkout
    itself would race on those folders (the tiers run side by side)."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "cdk.out", "node_modules")
    for folder in ("functions", "infra"):
        shutil.copytree(ROOT / folder, dest / folder, ignore=skip)
    return dest
