"""Where a webhook may send (SSRF): ``https`` (``http`` only where the deployment allows),
and every address its host resolves to public unless a network the deployment names allows
it. Checked at registration and again at every delivery, and the request goes to the
address checked (never a second lookup), so a DNS rebind between the two cannot slip in."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

from asyncz.errors import WebhookUrlRefusedError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
# host, port -> every address the name resolves to (tests inject their own)
Resolver = Callable[[str, int], Awaitable[list[str]]]
MAX_URL_LENGTH = 2048


@dataclass(frozen=True, slots=True)
class Target:
    """A URL pinned to the address that was checked."""

    url: str  # as registered
    host: str  # the name: Host header and TLS server name
    address: str  # what the connection goes to
    pinned_url: str  # the URL with the address in place of the name


def parse_networks(text: str) -> tuple[Network, ...]:
    """``"127.0.0.0/8, ::1/128"`` as networks; ValueError naming a bad one."""
    return tuple(
        ipaddress.ip_network(p.strip(), strict=False) for p in text.split(",") if p.strip()
    )


def check_url(url: str, *, allow_http: bool) -> SplitResult:
    """The URL split, or :class:`WebhookUrlRefusedError` saying why it cannot be one."""
    if len(url) > MAX_URL_LENGTH:
        raise WebhookUrlRefusedError(f"a webhook URL is at most {MAX_URL_LENGTH} characters")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        raise WebhookUrlRefusedError("the webhook URL cannot be parsed") from None
    schemes = ("https", "http") if allow_http else ("https",)
    if parts.scheme not in schemes:
        raise WebhookUrlRefusedError(
            f"a webhook URL must use {' or '.join(schemes)} (this deployment's rule)"
        )
    if not parts.hostname:
        raise WebhookUrlRefusedError("the webhook URL names no host")
    if parts.username or parts.password:
        raise WebhookUrlRefusedError("a webhook URL carries no credentials: sign, don't embed")
    return parts


def refused(address: IPAddress, allowed: Sequence[Network]) -> bool:
    """Whether a webhook may not reach ``address``: not public (private, loopback,
    link-local, shared, reserved, unspecified) or multicast, outside ``allowed``."""
    mapped = getattr(address, "ipv4_mapped", None)
    if mapped is not None:  # ::ffff:10.0.0.1 is 10.0.0.1
        address = mapped
    if any(address in net for net in allowed if net.version == address.version):
        return False
    return not address.is_global or address.is_multicast


async def system_resolver(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
    )
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


async def resolve_target(
    url: str, *, allow_http: bool, allowed: Sequence[Network],
    resolve: Resolver = system_resolver,
) -> Target:  # fmt: skip
    """Check ``url`` and every address its host resolves to; the first as the target."""
    parts = check_url(url, allow_http=allow_http)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        addresses = [ipaddress.ip_address(host)]
    except ValueError:
        try:
            addresses = [
                ipaddress.ip_address(a.split("%", 1)[0]) for a in await resolve(host, port)
            ]
        except OSError:
            raise WebhookUrlRefusedError(f"the webhook's host {host!r} does not resolve") from None
    if not addresses:
        raise WebhookUrlRefusedError(f"the webhook's host {host!r} does not resolve")
    bad = [a for a in addresses if refused(a, allowed)]
    if bad:
        raise WebhookUrlRefusedError(
            f"the webhook's host {host!r} resolves to {bad[0]}, an address webhooks may not "
            "reach (private, loopback, link-local, multicast or reserved)"
        )
    address = addresses[0]
    literal = f"[{address}]" if address.version == 6 else str(address)
    netloc = literal if parts.port is None else f"{literal}:{parts.port}"
    return Target(url, host, str(address), parts._replace(netloc=netloc).geturl())
