"""Build the dependency layer on demand (called by the app entry and the tests)."""

from __future__ import annotations

import fcntl
import hashlib
import subprocess
import sys
from pathlib import Path

STAMP = "requirements.sha256"


def layer_dir(layers_root: Path, architecture: str) -> Path:
    """``layers/build/<architecture>``: the folder the layer asset is made from."""
    return layers_root / "build" / architecture


def is_current(layers_root: Path, architecture: str) -> bool:
    """Whether the built layer exists and was built from today's requirements.txt and
    build.sh (a change to how the layer is built rebuilds it too)."""
    built = layer_dir(layers_root, architecture)
    stamp = built / STAMP
    if not (built / "python").is_dir() or not stamp.is_file():
        return False
    inputs = (layers_root / "requirements.txt").read_bytes() + (
        layers_root / "build.sh"
    ).read_bytes()
    wanted = hashlib.sha256(inputs).hexdigest()
    return stamp.read_text().split()[0] == wanted


def ensure_layer(layers_root: Path, architecture: str) -> Path:
    """Run ``layers/build.sh <architecture>`` unless an up-to-date build exists (~4 s)."""
    if is_current(layers_root, architecture):
        return layer_dir(layers_root, architecture)
    lock_path = layers_root / "build" / f".{architecture}.ensure.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("w") as lock:
        # Parallel synths: the first builds, the others wait and then find it current.
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not is_current(layers_root, architecture):
            subprocess.run(
                [str(layers_root / "build.sh"), architecture],
                check=True,
                stdout=sys.stderr,  # keep stdout clean for `cdk synth`
            )
    return layer_dir(layers_root, architecture)
