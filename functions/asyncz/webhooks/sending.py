"""One signed request of a delivery: the body is the CloudEvents JSON, the address the one
:mod:`asyncz.webhooks.addresses` checked (TLS still verifies the host's name), no redirect
followed. Each webhook's host has its own connection pool, so a connection to a shared
address is never reused under another name."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

import httpx

from asyncz.errors import WebhookUrlRefusedError
from asyncz.webhooks.addresses import Network, Resolver, resolve_target
from asyncz.webhooks.cipher import SecretCipher
from asyncz.webhooks.signing import SIGNATURE_HEADER, signature_header

USER_AGENT = "AsyncZ-Webhooks/1"
_MAX_ERROR = 300
_MAX_HOSTS = 1000  # clients kept (one per host); past it the oldest is closed


@dataclass(frozen=True, slots=True)
class Outcome:
    status_code: int | None
    error: str | None
    duration_ms: int


class Sender:
    def __init__(
        self, cipher: SecretCipher, *, allow_http: bool, allowed: tuple[Network, ...],
        resolve: Resolver,
    ) -> None:  # fmt: skip
        self._cipher = cipher
        self._allow_http = allow_http
        self._allowed = allowed
        self._resolve = resolve
        self._clients: dict[str, httpx.AsyncClient] = {}
        self._plain: dict[bytes, str] = {}  # ciphertext -> secret: a KMS call per secret, once

    async def _secret(self, ciphertext: bytes) -> str:
        key = bytes(ciphertext)
        if key not in self._plain:
            self._plain[key] = (await self._cipher.decrypt(key)).decode()
        return self._plain[key]

    def _client(self, host: str) -> httpx.AsyncClient:
        client = self._clients.get(host)
        if client is None:
            if len(self._clients) >= _MAX_HOSTS:
                self._clients.pop(next(iter(self._clients)))
            client = httpx.AsyncClient(follow_redirects=False, trust_env=False)
            self._clients[host] = client
        return client

    async def send(self, row: dict[str, Any], timeout: float) -> Outcome:
        """POST the delivery's event to its webhook within ``timeout`` seconds (the lookup,
        the connection and the answer); never raises for the endpoint's fault."""
        started = time.monotonic()
        event = row["event"] if isinstance(row["event"], dict) else json.loads(row["event"])
        body = json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode()
        live = [await self._secret(row["secret"])]
        if row.get("previous_secret"):
            live.append(await self._secret(row["previous_secret"]))
        try:
            # the whole request within the bound: httpx's timeouts are per phase, and an
            # endpoint that trickles its answer a byte at a time would reset them
            async with asyncio.timeout(timeout):
                target = await resolve_target(
                    row["url"], allow_http=self._allow_http, allowed=self._allowed,
                    resolve=self._resolve,
                )  # fmt: skip
                headers = {
                    "Content-Type": "application/cloudevents+json; charset=utf-8",
                    "User-Agent": USER_AGENT,
                    "Host": _host_header(row["url"]),
                    "AsyncZ-Event-Id": str(event["id"]),
                    SIGNATURE_HEADER: signature_header(live, int(time.time()), body),
                }
                response = await self._client(target.host).post(
                    target.pinned_url, content=body, headers=headers, timeout=timeout,
                    extensions={"sni_hostname": target.host},
                )  # fmt: skip
        except WebhookUrlRefusedError as exc:
            return Outcome(None, f"address refused: {exc}"[:_MAX_ERROR], _ms(started))
        except TimeoutError:
            return Outcome(None, f"no answer within {timeout:g} s", _ms(started))
        except httpx.HTTPError as exc:
            return Outcome(None, f"{type(exc).__name__}: {exc}"[:_MAX_ERROR], _ms(started))
        status = response.status_code
        error = None
        if 300 <= status < 400:
            error = "redirect not followed"
        elif not 200 <= status < 300:
            error = f"HTTP {status}"
        return Outcome(status, error, _ms(started))

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()


def _host_header(url: str) -> str:
    return httpx.URL(url).netloc.decode("ascii")


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
