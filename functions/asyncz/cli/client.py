"""The CLI's HTTP client: the API over the standard library, errors as :class:`CliError`."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

DEFAULT_API_URL = "http://127.0.0.1:8000"
TERMINAL = {"completed", "dead", "cancelled"}


class CliError(Exception):
    """A failure to report as ``error: ...`` with a non-zero exit."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


# --------------------------------------------------------------------------- HTTP client


class ApiClient:
    """A minimal JSON client for the AsyncZ API (urllib; ``x-api-key`` auth)."""

    def __init__(self, base_url: str, api_key: str | None, timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: dict[str, Any] | None = None,
    ) -> Any:
        params = {k: v for k, v in (query or {}).items() if v is not None}
        url = self.base_url + path + ("?" + urllib.parse.urlencode(params) if params else "")
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method)  # noqa: S310 - http(s) only
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.api_key:
            req.add_header("x-api-key", self.api_key)
        if not url.startswith(("http://", "https://")):
            raise CliError(f"the API URL must be http(s): {self.base_url}", 2)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:  # noqa: S310
                raw = resp.read()
        except urllib.error.HTTPError as err:
            raise CliError(_http_error(err)) from err
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            raise CliError(
                f"cannot reach the API at {self.base_url} ({reason}); is `asyncz dev` running?"
            ) from err
        return json.loads(raw) if raw else None

    def pages(self, path: str, query: dict[str, Any], follow: bool) -> Iterator[dict[str, Any]]:
        """Items of a cursor-paginated listing; all pages when ``follow``."""
        query = dict(query)
        while True:
            page = self.request("GET", path, query=query)
            yield from page.get("items") or []
            cursor = page.get("next_cursor")
            if not follow or not cursor:
                return
            query["cursor"] = cursor


def _http_error(err: urllib.error.HTTPError) -> str:
    try:
        body = json.loads(err.read() or b"{}")
    except ValueError:
        body = {}
    if isinstance(body, dict):
        code = body.get("error") or err.reason
        message = body.get("message") or ""
        if isinstance(message, list | dict):
            message = json.dumps(message)
        return f"HTTP {err.code} {code}: {message}".rstrip(": ")
    return f"HTTP {err.code}"
