"""The operator dashboard (``/ui``) and the API docs (``/docs``), served by the api Lambda.

Static files shipped in the package (``static/``, Swagger UI from the ``fastapi-swagger``
wheel): no CDN, no build step. Every URL the pages use is relative, so they work the same
at ``/ui`` locally and at ``/<stage>/ui`` behind API Gateway.
"""

from asyncz.api.ui.routes import DOCS_CSP, UI_CSP, mount_ui

__all__ = ["DOCS_CSP", "UI_CSP", "mount_ui"]
