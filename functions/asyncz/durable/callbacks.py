"""A durable task's callbacks (docs/durable.md, "Callbacks"): ``ctx.callback(name,
timeout=)`` opens a wait of kind ``callback`` at once, so the token it hands out works from
that moment (a vendor may answer before the task asks for the answer), and ``cb.wait()``
takes its outcome: the ``result`` posted to ``/callbacks/{token}``, a
:class:`CallbackFailedError` for a posted ``error``, a :class:`CallbackTimeoutError` when
the timeout passes first; not yet there, the attempt suspends until one of them comes.

The token is the credential, single-use. It is not stored: the step holds its SHA-256 (the
routing key ``POST /callbacks/{token}`` finds it by), and a replay derives the same token
again, an HMAC-SHA256 under the deployment's key (migration 0022) of the job, its replay
generation and the callback's name, so ``cb.url`` is the same on every replay and a replay
that starts the job over makes new tokens."""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from asyncz.durable.history import COMPLETED, StoredStep
from asyncz.durable.waiting import Settle, WaitCall, begin, expire
from asyncz.errors import FinalTaskError

if TYPE_CHECKING:
    from asyncz.durable.journal import Journal

TOKEN_PREFIX = "cb_"  # noqa: S105 (what a token starts with, not a secret)
KIND = "callback"


class CallbackFailedError(FinalTaskError):
    """The callback's sender posted an error (``{"error": …}``)."""

    code = "callback_failed"


class CallbackTimeoutError(FinalTaskError):
    """No one posted to the callback before its timeout (heartbeats included)."""

    code = "callback_timed_out"


def callback_token(key: bytes, job_id: str, generation: int, name: str) -> str:
    mac = hmac.new(key, f"{job_id}\x1f{generation}\x1f{name}".encode(), hashlib.sha256)
    return TOKEN_PREFIX + base64.urlsafe_b64encode(mac.digest()).rstrip(b"=").decode()


def token_hash(token: str) -> str:
    """What a callback's step stores and ``POST /callbacks/{token}`` looks it up by."""
    return hashlib.sha256(token.encode()).hexdigest()


def outcome(name: str, value: Any) -> Any:
    """A callback's stored outcome as the task gets it from ``cb.wait()``."""
    if isinstance(value, dict):
        if "result" in value:
            return value["result"]
        if "error" in value:
            raise CallbackFailedError(f"callback {name!r} failed: {value['error']}")
    raise CallbackTimeoutError(f"callback {name!r} timed out: nothing was posted to its URL")


def callback_call(name: str, timeout: float) -> WaitCall:
    return WaitCall(name, KIND, timeout, f"callback {name!r}", terms={"timeout": timeout},
                    on_timeout={"timed_out": True},
                    decode=lambda value: outcome(name, value))  # fmt: skip


@dataclass(slots=True)
class Callback:
    """What ``ctx.callback`` returns: ``token`` and ``url`` (``None`` when the deployment
    has no public URL: ``ASYNCZ_PUBLIC_URL``) to hand to whoever answers, and ``wait()``."""

    name: str
    token: str
    url: str | None
    _journal: Journal
    _call: WaitCall
    _seq: int

    def wait(self) -> Any:
        """The posted result (``await`` it in an async task); suspends until it comes."""
        if self._journal.is_async:
            return self._settle()
        return self._journal.from_thread(self._settle())

    async def _settle(self) -> Any:
        journal = self._journal
        journal.check_open()
        row = await journal.store.peek(journal.lease.job_id, self._seq)
        if row is None:
            journal.lost(self.name)
        if row["status"] == COMPLETED:
            return self._call.decode(row["result"])
        return await expire(journal, self._call, self._seq, row["wait_until"])


def opener(public_url: str | None) -> Settle:
    """The journal's ``then`` for a callback's step: store its wait when new, and give the
    task its :class:`Callback` (the URL under ``public_url``)."""

    async def opened(journal: Any, call: WaitCall, after: str | None,
                     stored: StoredStep | None) -> Callback:  # fmt: skip
        lease = journal.lease
        token = callback_token(await journal.store.callback_key(), lease.job_id,
                               lease.attempt_base, call.name)  # fmt: skip
        if stored is None:
            keyed = WaitCall(call.name, KIND, call.timeout, call.about, token_hash(token),
                             call.terms, call.on_timeout, call.decode)  # fmt: skip
            _, _, seq = await begin(journal, keyed, after)
        else:
            seq = stored.seq
        url = f"{public_url.rstrip('/')}/callbacks/{token}" if public_url else None
        return Callback(call.name, token, url, journal, call, seq)

    return opened
