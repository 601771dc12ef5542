"""The api's gate: who a request's key is, whether its scopes allow the route, and its
request rate. Runs in the input guard before any body is read; costs no database round
trip (the sandbox's :class:`asyncz.access.KeyRing` is in memory) and, for a key with a
rate limit, one Redis script call.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Mapping

from asyncz.access import (
    KeyRing,
    Principal,
    Scope,
    own_job_read,
    route_scope,
)
from asyncz.api.guards import UNAUTHORIZED, is_public
from asyncz.api.replies import Reply, error_reply
from asyncz.errors import AsyncZError
from asyncz.ports import JobBroker

log = logging.getLogger("asyncz.api")
CALLBACKS = "/callbacks/"  # POST /callbacks/{token}: no key (asyncz.api.routes.callbacks)

KEYS_UNAVAILABLE = error_reply(
    503, "key_check_unavailable",
    "the API keys could not be read (database unavailable); try again shortly",
)  # fmt: skip


def forbidden(principal: Principal, scope: Scope) -> Reply:
    return error_reply(
        403, "forbidden", f"the key {principal.name!r} lacks the {scope.value!r} scope",
        scope=scope.value, key=principal.name,
    )  # fmt: skip


def rate_limited(principal: Principal, wait_seconds: float) -> Reply:
    count, period = principal.rate or (0, 0)
    return too_many(f"the key {principal.name!r} may make {count} requests per {period} s",
                    wait_seconds)  # fmt: skip


def callbacks_limited(rate: tuple[int, int], wait_seconds: float) -> Reply:
    return too_many(f"callbacks are limited to {rate[0]} requests per {rate[1]} s", wait_seconds)


def too_many(message: str, wait_seconds: float) -> Reply:
    retry = max(1, math.ceil(wait_seconds))
    return Reply(429, {"error": "rate_limited", "message": message, "retry_after": retry},
                 {"retry-after": str(retry)})  # fmt: skip


class AccessGate:
    """``await gate(method, path, headers)``: a refusal (Reply), else the principal (or
    ``None`` on a public path)."""

    def __init__(self, ring: KeyRing, broker: Callable[[], Awaitable[JobBroker]],
                 callback_rate: tuple[int, int] = (100, 1)) -> None:  # fmt: skip
        self.ring = ring
        self._broker = broker
        self.callback_rate = callback_rate

    async def __call__(
        self, method: str, path: str, headers: Mapping[str, str]
    ) -> Reply | Principal | None:
        if is_public(path):
            return None
        if path.startswith(CALLBACKS):  # the token is the credential: a deployment-wide rate
            wait = await self._take("callbacks", self.callback_rate)
            return None if wait <= 0 else callbacks_limited(self.callback_rate, wait)
        key = headers.get("x-api-key")
        if not key:
            return UNAUTHORIZED
        if self.ring.stale:
            await self.ring.refresh()
        principal = await self.ring.find(key)
        if principal is None:
            return UNAUTHORIZED if self.ring.loaded else KEYS_UNAVAILABLE
        need = route_scope(method, path)
        if need is not None and not principal.may(need):
            reads_own = (
                need is Scope.READ and principal.may(Scope.SUBMIT) and own_job_read(method, path)
            )
            if not reads_own:
                return forbidden(principal, need)
        if principal.rate is not None:
            wait = await self._take(principal.key_id, principal.rate)
            if wait > 0:
                return rate_limited(principal, wait)
        return principal

    async def _take(self, bucket: str, rate: tuple[int, int]) -> float:
        try:
            return await (await self._broker()).take_request(bucket, *rate)
        except AsyncZError:  # Redis down: the limit cannot be counted; let it in
            log.warning("request rate limit of %s not counted (Redis unavailable)", bucket)
            return 0.0

    def known(self, key: str) -> bool:
        """A key among the loaded ones (no I/O): the handler's check before refusing a body
        Mangum could not decode."""
        return self.ring.lookup(key) is not None
