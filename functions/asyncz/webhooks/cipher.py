"""Signing secrets at rest: encrypted by KMS in AWS, else by AES-GCM (``cryptography``)
under the deployment's own key in ``asyncz_secrets`` (migration 0024). Both bind the
ciphertext to its purpose, so a ciphertext copied elsewhere does not decrypt as one."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

PURPOSE = b"asyncz-webhook-secret"
_NONCE_BYTES = 12


class SecretCipher(Protocol):
    async def encrypt(self, plaintext: bytes) -> bytes: ...
    async def decrypt(self, ciphertext: bytes) -> bytes: ...


class LocalCipher:
    """AES-256-GCM under the key ``load`` returns (read once, at first use): a random nonce
    before each ciphertext."""

    def __init__(self, load: Callable[[], Awaitable[bytes]]) -> None:
        self._load = load
        self._aead: Any = None

    async def _cipher(self) -> Any:
        if self._aead is None:
            # only where there is no KMS (asyncz dev, tests): the Lambda layer leaves it out
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM

            self._aead = AESGCM(await self._load())
        return self._aead

    async def encrypt(self, plaintext: bytes) -> bytes:
        nonce = os.urandom(_NONCE_BYTES)
        return nonce + (await self._cipher()).encrypt(nonce, plaintext, PURPOSE)  # type: ignore[no-any-return]

    async def decrypt(self, ciphertext: bytes) -> bytes:
        nonce, sealed = ciphertext[:_NONCE_BYTES], ciphertext[_NONCE_BYTES:]
        return (await self._cipher()).decrypt(nonce, sealed, PURPOSE)  # type: ignore[no-any-return]


class KmsCipher:
    """KMS ``Encrypt``/``Decrypt`` of the secret itself (32 bytes: far below KMS's 4 KB),
    with an encryption context naming its purpose. ``client`` is a boto3 KMS client."""

    def __init__(self, client: Any, key_id: str) -> None:
        self._client = client
        self._key_id = key_id
        self._context = {"purpose": PURPOSE.decode()}

    async def encrypt(self, plaintext: bytes) -> bytes:
        out = await asyncio.to_thread(
            self._client.encrypt, KeyId=self._key_id, Plaintext=plaintext,
            EncryptionContext=self._context,
        )  # fmt: skip
        return bytes(out["CiphertextBlob"])

    async def decrypt(self, ciphertext: bytes) -> bytes:
        out = await asyncio.to_thread(
            self._client.decrypt, CiphertextBlob=ciphertext, EncryptionContext=self._context
        )
        return bytes(out["Plaintext"])
