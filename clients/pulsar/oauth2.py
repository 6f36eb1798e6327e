"""OAuth 2.0 client credentials for Pulsar: ``AuthenticationOauth2``.

As the official clients: the parameters are a JSON object (``issuer_url``, ``client_id`` and
``client_secret`` or a ``private_key`` credentials file holding them, ``audience``, ``scope``);
the token endpoint is found at ``<issuer_url>/.well-known/openid-configuration`` (or given as
``token_endpoint``); the access token it issues goes to the broker as method ``"token"``. A
token is renewed once ``refresh_fraction`` of its ``expires_in`` has passed, so the broker sees
a fresh one on every connect and when it challenges an expiring one.
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from protoframe.runtime.io.auth import Authentication

__all__ = ["AuthenticationOauth2", "OAuth2Error"]

DISCOVERY_PATH = "/.well-known/openid-configuration"


class OAuth2Error(Exception):
    """The token endpoint could not be reached or refused the credentials."""


class AuthenticationOauth2(Authentication):
    """The client-credentials flow (RFC 6749 section 4.4).

    ``auth_params_string`` is the official client's JSON parameters; keyword arguments, when
    given, override its fields. ``tls_trust_certs_file_path`` is the CA an ``https`` issuer is
    verified with (default: the system store). ``refresh_fraction`` of a token's lifetime
    passes before it is renewed; ``timeout`` bounds each HTTP request.
    """

    def __init__(self, auth_params_string: str | None = None, *,
                 issuer_url: str | None = None, client_id: str | None = None,
                 client_secret: str | None = None, audience: str | None = None,
                 scope: str | None = None, private_key: str | None = None,
                 token_endpoint: str | None = None,
                 tls_trust_certs_file_path: str | None = None,
                 refresh_fraction: float = 0.8, timeout: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        params: dict[str, Any] = json.loads(auth_params_string) if auth_params_string else {}
        overrides = {"issuer_url": issuer_url, "client_id": client_id,
                     "client_secret": client_secret, "audience": audience, "scope": scope,
                     "private_key": private_key, "token_endpoint": token_endpoint}
        params.update({k: v for k, v in overrides.items() if v is not None})
        if params.get("private_key"):
            params = {**_credentials_file(str(params["private_key"])), **{
                k: v for k, v in params.items() if k not in ("client_id", "client_secret")}}
        self.issuer_url = str(params.get("issuer_url") or "").rstrip("/")
        self.client_id = str(params.get("client_id") or "")
        self._client_secret = str(params.get("client_secret") or "")
        self.audience = params.get("audience")
        self.scope = params.get("scope")
        self._token_endpoint = params.get("token_endpoint")
        if not self.client_id or not (self.issuer_url or self._token_endpoint):
            raise ValueError("AuthenticationOauth2 needs issuer_url (or token_endpoint) and "
                             "client_id/client_secret (or private_key)")
        if not 0 < refresh_fraction <= 1:
            raise ValueError(f"refresh_fraction must be in (0, 1], got {refresh_fraction}")
        self.refresh_fraction = refresh_fraction
        self.timeout = timeout
        self._clock = clock
        self._context = (ssl.create_default_context(cafile=tls_trust_certs_file_path)
                         if tls_trust_certs_file_path else None)
        self._lock = threading.Lock()
        self._token = ""
        self._renew_at: float | None = None
        self.fetches = 0

    @property
    def method_name(self) -> str:
        return "token"

    async def prepare(self, challenge: bytes | None = None) -> None:
        # A challenge means the broker holds our token for expired (its clock, not ours).
        if challenge is not None or self._stale():
            await asyncio.to_thread(self.token, challenge is not None)

    def auth_data(self) -> bytes:
        return self.token().encode()

    def token(self, renew: bool = False) -> str:
        """The current access token, fetched first if there is none, it is due or ``renew``."""
        with self._lock:
            if renew or self._stale():
                self._fetch()
            return self._token

    def _stale(self) -> bool:
        return not self._token or (self._renew_at is not None
                                   and self._clock() >= self._renew_at)

    def token_endpoint(self) -> str:
        if self._token_endpoint is None:
            document = self._request(urllib.request.Request(self.issuer_url + DISCOVERY_PATH))
            endpoint = document.get("token_endpoint")
            if not isinstance(endpoint, str) or not endpoint:
                raise OAuth2Error(f"{self.issuer_url}{DISCOVERY_PATH} names no token_endpoint")
            self._token_endpoint = endpoint
        return str(self._token_endpoint)

    def _fetch(self) -> None:
        form = {"grant_type": "client_credentials", "client_id": self.client_id,
                "client_secret": self._client_secret}
        if self.audience:
            form["audience"] = str(self.audience)
        if self.scope:
            form["scope"] = str(self.scope)
        started = self._clock()
        answer = self._request(urllib.request.Request(
            self.token_endpoint(), data=urllib.parse.urlencode(form).encode(), method="POST",
            headers={"Content-Type": "application/x-www-form-urlencoded",
                     "Accept": "application/json"}))
        token = answer.get("access_token")
        if not isinstance(token, str) or not token:
            raise OAuth2Error(f"the token endpoint answered no access_token: "
                              f"{answer.get('error') or answer}")
        expires_in = answer.get("expires_in")
        self._token = token
        # Counted from before the request: the token's life began no earlier than that.
        self._renew_at = (started + float(expires_in) * self.refresh_fraction
                          if isinstance(expires_in, int | float) else None)
        self.fetches += 1

    def _request(self, request: urllib.request.Request) -> Mapping[str, Any]:
        try:
            with urllib.request.urlopen(request, timeout=self.timeout,
                                        context=self._context) as response:
                document = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:200]
            raise OAuth2Error(f"{request.full_url}: HTTP {exc.code}: {detail}") from None
        except (OSError, ValueError) as exc:
            raise OAuth2Error(f"{request.full_url}: {exc}") from exc
        if not isinstance(document, dict):
            raise OAuth2Error(f"{request.full_url}: expected a JSON object")
        return document

    def __repr__(self) -> str:
        return f"AuthenticationOauth2({self.issuer_url or self._token_endpoint!r}, " \
               f"client_id={self.client_id!r}, <redacted>)"


def _credentials_file(location: str) -> dict[str, Any]:
    """The official clients' key file (``{"client_id": ..., "client_secret": ...}``), named
    by a path, ``file://`` URL or ``data:application/json;base64,`` URL."""
    if location.startswith("data:"):
        header, _, body = location.partition(",")
        text = base64.b64decode(body).decode() if header.endswith(";base64") \
            else urllib.parse.unquote(body)
    else:
        text = Path(location.removeprefix("file://")).read_text(encoding="utf-8")
    document = json.loads(text)
    if not isinstance(document, dict):
        raise ValueError("the OAuth2 credentials file must hold a JSON object")
    return document
