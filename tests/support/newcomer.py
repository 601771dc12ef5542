"""A newcomer's shell, for tests that run the docs as written: none of this test run's
``ASYNCZ_*`` variables, no active virtualenv, no pyenv version picked by the environment,
no PYTHONPATH, no Node banner silenced, and the repo's .venv not on the PATH."""

from __future__ import annotations

import os
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
