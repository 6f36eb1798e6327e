"""Who a client is and what it may do: the embedded broker's authentication and authorization.

As Pulsar's broker: with ``authentication_enabled`` a CONNECT must prove a role, by a JSON Web
Token (method ``"token"``: signed with ``token_secret_key``, HS256/384/512, or with the private
half of ``token_public_key``, RS*/PS*/ES*; the role is the ``sub`` claim; an expired token is
refused) or by the client certificate of a TLS connection (method ``"tls"``: the role is the
certificate's common name). With ``authorization_enabled`` a role may produce to or consume
from a namespace only if it was granted that action there (``grants``, as ``pulsar-admin
namespaces grant-permission``) or is one of ``superuser_roles``.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "ACTIONS",
    "AuthenticationFailed",
    "Identity",
    "Security",
    "load_key",
    "parse_grant",
]

Action = Literal["produce", "consume"]
ACTIONS: tuple[Action, ...] = ("produce", "consume")

SECRET_ALGORITHMS = ("HS256", "HS384", "HS512")
PUBLIC_KEY_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512",
                         "ES256", "ES384", "ES512")


class AuthenticationFailed(Exception):
    """The credentials of a CONNECT or an AUTH_RESPONSE prove no role."""


@dataclass(frozen=True)
class Identity:
    """A proven role; ``expires_at`` (Unix seconds) when its credentials run out."""

    role: str
    method: str
    expires_at: float | None = None


def load_key(value: str | bytes) -> bytes:
    """Key material as Pulsar's ``tokenSecretKey``/``tokenPublicKey`` settings name it:
    ``data:;base64,<base64>``, ``file:///path`` (the file's bytes), or the bytes themselves."""
    if isinstance(value, bytes):
        return value
    if value.startswith("data:"):
        _, _, encoded = value.partition(",")
        return base64.b64decode(encoded)
    if value.startswith("file://"):
        return Path(value[len("file://"):]).read_bytes()
    return value.encode()


def parse_grant(text: str) -> tuple[str, str, frozenset[Action]]:
    """``tenant/namespace:role:produce,consume`` -> (namespace, role, actions)."""
    namespace, sep, rest = text.partition(":")
    role, sep2, actions_text = rest.rpartition(":")
    actions = [a.strip() for a in actions_text.split(",") if a.strip()]
    if (not sep or not sep2 or not role or namespace.count("/") != 1
            or not actions or any(a not in ACTIONS for a in actions)):
        raise ValueError(f"expected NAMESPACE:ROLE:ACTIONS (tenant/namespace, actions among "
                         f"{','.join(ACTIONS)}), got {text!r}")
    return namespace, role, frozenset(a for a in ACTIONS if a in actions)


@dataclass
class Security:
    """What the broker asks of clients (everything off by default, as the broker was).

    ``grants`` maps ``tenant/namespace`` to {role: actions}; the role ``"*"`` stands for any
    authenticated role. ``anonymous_role`` is the role of a client that sends no credentials
    (Pulsar's ``anonymousUserRole``; None refuses it). ``auth_refresh_grace_seconds`` is how
    long a client has to answer the AUTH_CHALLENGE sent when its token expires.
    """

    authentication_enabled: bool = False
    token_secret_key: str | bytes | None = None
    token_public_key: str | bytes | None = None
    token_auth_claim: str = "sub"
    tls_authentication: bool = False
    anonymous_role: str | None = None
    authorization_enabled: bool = False
    superuser_roles: Iterable[str] = ()
    grants: Mapping[str, Mapping[str, Iterable[str]]] = field(default_factory=dict)
    auth_refresh_grace_seconds: float = 60.0

    def __post_init__(self) -> None:
        self.superuser_roles = frozenset(self.superuser_roles)
        self._grants: dict[str, dict[str, frozenset[str]]] = {
            namespace: {role: frozenset(actions) for role, actions in roles.items()}
            for namespace, roles in self.grants.items()}
        self._verification_keys: list[tuple[Any, tuple[str, ...]]] = []
        if self.token_secret_key is not None or self.token_public_key is not None:
            try:
                import jwt  # noqa: F401
            except ImportError:
                raise ValueError("token authentication needs PyJWT with its crypto extra "
                                 "(the broker extra of protoframe)") from None
        if self.token_secret_key is not None:
            self._verification_keys.append((load_key(self.token_secret_key), SECRET_ALGORITHMS))
        if self.token_public_key is not None:
            self._verification_keys.append((_public_key(load_key(self.token_public_key)),
                                            PUBLIC_KEY_ALGORITHMS))
        if self.authentication_enabled and not (self._verification_keys
                                                or self.tls_authentication
                                                or self.anonymous_role):
            raise ValueError("authentication is enabled but no method is configured: give a "
                             "token key, TLS authentication or an anonymous role")

    @property
    def methods(self) -> tuple[str, ...]:
        """The authentication methods clients may use."""
        return (("token",) if self._verification_keys else ()) + \
            (("tls",) if self.tls_authentication else ())

    def grant(self, namespace: str, role: str, actions: Iterable[str]) -> None:
        """Allow ``role`` the ``actions`` on ``namespace`` (added to what it had)."""
        roles = self._grants.setdefault(namespace, {})
        roles[role] = roles.get(role, frozenset()) | frozenset(actions)

    def revoke(self, namespace: str, role: str) -> None:
        self._grants.get(namespace, {}).pop(role, None)

    # --- authentication --------------------------------------------------------------------

    def authenticate(self, method: str, data: bytes,
                     peer_certificate: Mapping[str, Any] | None) -> Identity:
        """The role ``data`` proves by ``method``; raises ``AuthenticationFailed``."""
        if method == "token" and self._verification_keys:
            return self.verify_token(data)
        if method == "tls" and self.tls_authentication:
            return Identity(_common_name(peer_certificate), "tls")
        if method in ("", "none") and self.anonymous_role is not None:
            return Identity(self.anonymous_role, "none")
        if method in ("", "none"):
            raise AuthenticationFailed("authentication is required: no credentials were sent")
        raise AuthenticationFailed(f"authentication method {method!r} is not enabled "
                                   f"(enabled: {', '.join(self.methods) or 'none'})")

    def verify_token(self, data: bytes) -> Identity:
        import jwt

        token = data.decode("utf-8", "replace").strip()
        failure = "no verification key"
        for key, algorithms in self._verification_keys:
            try:
                claims = jwt.decode(token, key, algorithms=list(algorithms),
                                    options={"verify_aud": False})
            except jwt.ExpiredSignatureError:
                raise AuthenticationFailed("the token has expired") from None
            except jwt.PyJWTError as exc:
                failure = str(exc)
                continue
            role = claims.get(self.token_auth_claim)
            if not isinstance(role, str) or not role:
                raise AuthenticationFailed(
                    f"the token has no {self.token_auth_claim!r} claim naming a role")
            expires = claims.get("exp")
            return Identity(role, "token",
                            float(expires) if isinstance(expires, int | float) else None)
        raise AuthenticationFailed(f"the token is not valid: {failure}")

    # --- authorization ---------------------------------------------------------------------

    def allows(self, role: str | None, namespace: str, action: str) -> bool:
        """``role`` may do ``action`` on ``namespace`` (``tenant/namespace``)."""
        if not self.authorization_enabled:
            return True
        if role is None:
            return False
        if role in self.superuser_roles:
            return True
        roles = self._grants.get(namespace, {})
        return action in roles.get(role, frozenset()) or action in roles.get("*", frozenset())


def seconds_until(expires_at: float) -> float:
    return max(0.0, expires_at - time.time())


def _public_key(material: bytes) -> Any:
    from cryptography.hazmat.primitives.serialization import (
        load_der_public_key,
        load_pem_public_key,
    )

    if material.lstrip().startswith(b"-----"):
        return load_pem_public_key(material)
    return load_der_public_key(material)


def _common_name(certificate: Mapping[str, Any] | None) -> str:
    """The CN of a verified peer certificate (``SSLObject.getpeercert()``'s form)."""
    if not certificate:
        raise AuthenticationFailed("TLS authentication needs a client certificate that the "
                                   "broker trusts")
    for rdn in certificate.get("subject", ()):
        for name, value in rdn:
            if name == "commonName" and value:
                return str(value)
    raise AuthenticationFailed("the client certificate has no common name")
