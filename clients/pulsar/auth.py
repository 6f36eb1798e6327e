"""Pulsar authentication plug-ins, on the runtime's ``Authentication`` interface.

The client sends ``method_name`` as CONNECT's ``auth_method_name`` and ``auth_data()`` as its
``auth_data``; when the broker sends AUTH_CHALLENGE (credentials about to expire, or a
multi-step method) the client answers with ``challenge(data)``.
"""

from __future__ import annotations

from collections.abc import Callable

from protoframe.runtime.io.auth import Authentication, NoAuthentication

__all__ = [
    "Authentication",
    "AuthenticationBasic",
    "AuthenticationTLS",
    "AuthenticationToken",
    "NoAuthentication",
]


class AuthenticationToken(Authentication):
    """JSON Web Token authentication: method ``"token"``, data the token's bytes.

    ``token`` is the token itself or a function returning the current one (read again on every
    connect and challenge, so a rotated token is picked up without a new client).
    """

    def __init__(self, token: str | Callable[[], str]) -> None:
        if isinstance(token, str) and token.startswith("file:"):
            path = token[len("file:"):]
            token = _file_reader(path)
        self._token = token

    @property
    def method_name(self) -> str:
        return "token"

    def token(self) -> str:
        return self._token() if callable(self._token) else self._token

    def auth_data(self) -> bytes:
        return self.token().strip().encode()

    def __repr__(self) -> str:
        return "AuthenticationToken(<redacted>)"


class AuthenticationBasic(Authentication):
    """HTTP-basic style credentials: method ``"basic"``, data ``user:password``."""

    def __init__(self, username: str, password: str, method: str = "basic") -> None:
        self._username = username
        self._password = password
        self._method = method

    @property
    def method_name(self) -> str:
        return self._method

    def auth_data(self) -> bytes:
        return f"{self._username}:{self._password}".encode()

    def __repr__(self) -> str:
        return f"AuthenticationBasic({self._username!r}, <redacted>)"


class AuthenticationTLS(Authentication):
    """TLS client-certificate authentication: method ``"tls"``, no data; the certificate
    ``certificate_path`` and key ``private_key_path`` go on the client's TLS context (the
    broker takes the role from the certificate), so the service URL must be ``pulsar+ssl://``.
    """

    def __init__(self, certificate_path: str, private_key_path: str) -> None:
        self.certificate_path = certificate_path
        self.private_key_path = private_key_path

    @property
    def method_name(self) -> str:
        return "tls"

    def auth_data(self) -> bytes:
        return b""

    def __repr__(self) -> str:
        return f"AuthenticationTLS({self.certificate_path!r}, <key>)"


def _file_reader(path: str) -> Callable[[], str]:
    def read() -> str:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    return read
