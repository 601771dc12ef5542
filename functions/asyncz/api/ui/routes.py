"""Routes of the dashboard, the docs and the chart's series.

The pages and their assets need no key (the guard lets ``/ui``, ``/docs`` and their
``assets/`` through); the data calls the pages make carry ``x-api-key`` like any client's.
Pages get a strict Content-Security-Policy: scripts only from this origin and never inline,
no framing, no sniffing.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.responses import Response
from pydantic import BaseModel

from asyncz.service import JobService

STATIC = Path(__file__).parent / "static"
_COMMON = "default-src 'none'; script-src 'self'; img-src 'self' data:; connect-src 'self'; "
_TAIL = "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
UI_CSP = _COMMON + "style-src 'self'; " + _TAIL
# Swagger UI sets style attributes from its scripts: styles may be inline, scripts never.
DOCS_CSP = _COMMON + "style-src 'self' 'unsafe-inline'; " + _TAIL
SWAGGER_PACKAGE = "fastapi_swagger"

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}


@dataclass(frozen=True, slots=True)
class Asset:
    body: bytes
    media_type: str


def _asset(path: Path) -> Asset:
    return Asset(path.read_bytes(), _TYPES[path.suffix])


def swagger_dir() -> Path:
    """Swagger UI's files in the ``fastapi-swagger`` wheel (found without importing it)."""
    spec = importlib.util.find_spec(SWAGGER_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"{SWAGGER_PACKAGE} (Swagger UI's files) is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "resources"


@cache
def ui_assets() -> dict[str, Asset]:
    """The dashboard's files by name, read once per sandbox."""
    return {p.name: _asset(p) for p in STATIC.iterdir() if p.suffix in _TYPES}


@cache
def docs_assets() -> dict[str, Asset]:
    files = swagger_dir()
    return {
        "swagger-ui-bundle.js": _asset(files / "swagger-ui-bundle.js"),
        "swagger-ui.css": _asset(files / "swagger-ui.css"),
        "docs.js": _asset(STATIC / "docs.js"),
    }


def _headers(csp: str | None, cache_seconds: int) -> dict[str, str]:
    headers = {
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "X-Frame-Options": "DENY",
        "Cache-Control": f"max-age={cache_seconds}" if cache_seconds else "no-cache",
    }
    if csp:
        headers["Content-Security-Policy"] = csp
    return headers


def _serve(asset: Asset | None, csp: str | None = None, cache_seconds: int = 0) -> Response:
    if asset is None:
        return Response(
            b'{"error":"not_found","message":"no such file"}',
            status_code=404,
            media_type="application/json",
            headers=_headers(None, 0),
        )
    return Response(asset.body, media_type=asset.media_type, headers=_headers(csp, cache_seconds))


class SeriesPoint(BaseModel):
    minute: str
    completed: int
    failed: int
    dead: int


class Series(BaseModel):
    minutes: list[SeriesPoint]


def mount_ui(app: FastAPI, service: Callable[[], Awaitable[JobService]]) -> None:
    """Add ``/ui``, ``/docs`` and ``GET /stats/series`` to ``app``."""
    router = APIRouter()

    @router.get("/ui", include_in_schema=False)
    async def ui_page() -> Response:
        return _serve(ui_assets()["index.html"], UI_CSP)

    @router.get("/ui/", include_in_schema=False)
    async def ui_slash() -> Response:
        # relative, so it stays under API Gateway's stage prefix
        return Response(status_code=307, headers={"Location": "../ui", **_headers(None, 0)})

    @router.get("/ui/assets/{name}", include_in_schema=False)
    async def ui_asset(name: str) -> Response:
        return _serve(ui_assets().get(name), UI_CSP, cache_seconds=60)

    @router.get("/docs", include_in_schema=False)
    async def docs_page() -> Response:
        return _serve(ui_assets()["docs.html"], DOCS_CSP)

    @router.get("/docs/assets/{name}", include_in_schema=False)
    async def docs_asset(name: str) -> Response:
        return _serve(docs_assets().get(name), DOCS_CSP, cache_seconds=300)

    @router.get(
        "/stats/series",
        response_model=Series,
        summary="Completed and failed attempts, dead jobs: per minute, last hour",
    )
    async def series() -> Any:
        return Series(minutes=[SeriesPoint(**p) for p in await (await service()).series()])

    app.include_router(router)
