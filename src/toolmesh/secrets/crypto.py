"""Encryption of secret values at rest, with ``cryptography``'s Fernet (AES-128-CBC + HMAC).

The key comes from ``TOOLMESH_SECRET_KEY`` (or a file named by ``TOOLMESH_SECRET_KEY_FILE``):
one or more Fernet keys separated by commas. The first encrypts; all of them decrypt, so a key
is rotated by putting the new one first and keeping the old one until every value has been
written again. Make a key with::

    python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from toolmesh.errors import ToolmeshError

KEY_ENV = "TOOLMESH_SECRET_KEY"
KEY_FILE_ENV = "TOOLMESH_SECRET_KEY_FILE"
#: what an encrypted value starts with (the version lets the format change later)
PREFIX = "enc:v1:"
MAKE_KEY = ('python -c "from cryptography.fernet import Fernet; '
            'print(Fernet.generate_key().decode())"')


class SecretKeyError(ToolmeshError):
    """The secret key is unusable, or a value cannot be decrypted with it."""

    type = "secret-key-error"


def is_sealed(text: str) -> bool:
    """Whether ``text`` is an encrypted value."""
    return text.startswith(PREFIX)


class SecretBox:
    """Encrypts and decrypts single values with the deployment's key(s)."""

    def __init__(self, keys: Sequence[str]) -> None:
        from cryptography.fernet import Fernet, MultiFernet

        if not keys:
            raise SecretKeyError(f"{KEY_ENV} holds no key; make one with {MAKE_KEY}")
        fernets = []
        for n, key in enumerate(keys, 1):
            try:
                fernets.append(Fernet(key.strip().encode()))
            except (ValueError, TypeError):
                raise SecretKeyError(
                    f"key {n} of {KEY_ENV} is not a Fernet key (32 url-safe base64-encoded "
                    f"bytes); make one with {MAKE_KEY}") from None
        self._fernet = MultiFernet(fernets)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> SecretBox | None:
        """The box for ``TOOLMESH_SECRET_KEY`` / ``TOOLMESH_SECRET_KEY_FILE``, or ``None``
        when neither is set."""
        env = os.environ if environ is None else environ
        text = env.get(KEY_ENV)
        if not text and env.get(KEY_FILE_ENV):
            path = Path(env[KEY_FILE_ENV]).expanduser()
            try:
                text = path.read_text()
            except OSError as e:
                raise SecretKeyError(f"cannot read {KEY_FILE_ENV} {str(path)!r}: "
                                     f"{e.strerror or e}") from None
        if not text or not text.strip():
            return None
        return cls([k for k in text.strip().split(",") if k.strip()])

    def seal(self, text: str) -> str:
        """``text`` encrypted, as ``enc:v1:<token>``."""
        return PREFIX + self._fernet.encrypt(text.encode()).decode()

    def open(self, sealed: str) -> str:
        """The text ``sealed`` holds; :class:`SecretKeyError` if no key opens it."""
        from cryptography.fernet import InvalidToken

        try:
            return self._fernet.decrypt(sealed[len(PREFIX):].encode()).decode()
        except (InvalidToken, ValueError):
            raise SecretKeyError(f"a stored secret cannot be decrypted with {KEY_ENV} (was it "
                                 "encrypted with another key?)") from None
