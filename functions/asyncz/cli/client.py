"""How the CLI reaches the API: an :class:`asyncz.client.Client` built from the flags and
the environment, with the key ``asyncz dev`` wrote when it talks to the local stack."""

from __future__ import annotations

import argparse
import os

from asyncz.client import Client
from asyncz.client.endpoint import DEFAULT_API_URL, local_api_key

__all__ = ["DEFAULT_API_URL", "CliError", "api_key_for", "make_client"]


class CliError(Exception):
    """A failure to report as ``error: ...`` with a non-zero exit."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def api_key_for(api_url: str, given: str | None) -> str | None:
    """``--api-key``, else ``ASYNCZ_API_KEY``; for a local URL, else the key ``asyncz dev``
    uses (``ASYNCZ_DEV_API_KEY``, else ``<data dir>/api-key``)."""
    if given:
        return given
    return os.environ.get("ASYNCZ_API_KEY") or local_api_key(api_url)


def make_client(args: argparse.Namespace) -> Client:
    url = args.api_url or os.environ.get("ASYNCZ_API_URL") or DEFAULT_API_URL
    if not url.startswith(("http://", "https://")):
        raise CliError(f"the API URL must be http(s): {url}", 2)
    return Client(url, api_key_for(url, args.api_key), timeout=args.http_timeout, retries=2)
