"""Where a client sends its requests and with which key: those given, else the environment,
else the local stack (its URL, and the key ``asyncz dev`` wrote, found the same way by the
Python client and the CLI and never sent to any other host)."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

DEFAULT_API_URL = "http://127.0.0.1:8000"
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "0.0.0.0"})  # noqa: S104 - a name


def default_data_dir(start: Path | None = None) -> Path:
    """``.asyncz`` in the project root (the nearest folder up with a pyproject.toml or .git),
    else in the current folder."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "pyproject.toml").is_file() or (folder / ".git").exists():
            return folder / ".asyncz"
    return here / ".asyncz"


def local_api_key(api_url: str) -> str | None:
    """For a local ``api_url``: ``ASYNCZ_DEV_API_KEY``, else ``<data dir>/api-key``
    (``ASYNCZ_DEV_DATA_DIR``, else :func:`default_data_dir`); for any other URL, None."""
    if (urlsplit(api_url).hostname or "") not in LOCAL_HOSTS:
        return None
    if os.environ.get("ASYNCZ_DEV_API_KEY", "").strip():
        return os.environ["ASYNCZ_DEV_API_KEY"].strip()
    data_dir = Path(os.environ.get("ASYNCZ_DEV_DATA_DIR") or default_data_dir())
    try:
        return (data_dir / "api-key").read_text().strip() or None
    except OSError:
        return None


def resolve(base_url: str | None, api_key: str | None) -> tuple[str, str | None]:
    """The URL and key a client uses: those given, else ``ASYNCZ_API_URL`` and
    ``ASYNCZ_API_KEY``, else :data:`DEFAULT_API_URL` and, for a local URL, its key."""
    url = base_url or os.environ.get("ASYNCZ_API_URL") or DEFAULT_API_URL
    if api_key is None:
        api_key = os.environ.get("ASYNCZ_API_KEY") or local_api_key(url)
    return url.rstrip("/"), api_key
