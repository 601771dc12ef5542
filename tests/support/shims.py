"""Commands a newcomer's machine may have on its PATH that a developer's has not."""

from __future__ import annotations

from pathlib import Path

_BROKEN_SHIM = """#!/bin/sh
echo "pyenv: $(basename "$0"): command not found" >&2
exit 127
"""


def broken_python312(folder: Path) -> Path:
    """``folder/python3.12``: a pyenv shim for a version that is not selected (it exists,
    and exits 127); put ``folder`` first on the PATH."""
    folder.mkdir(parents=True, exist_ok=True)
    shim = folder / "python3.12"
    shim.write_text(_BROKEN_SHIM)
    shim.chmod(0o755)
    return shim
