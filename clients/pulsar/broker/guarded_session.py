"""A session that checks credentials and permissions (``security.Security``) and knows the
broker's TLS listener.

CONNECT with credentials that prove no role is answered with ERROR(AuthenticationError) and the
connection closed; PRODUCER and SUBSCRIBE a role may not do get ERROR(AuthorizationError), as
from Pulsar. When a token runs out the client gets AUTH_CHALLENGE and must answer with a valid
token for the same role within the grace period (or at once, if it did not announce
``supports_auth_refresh``), or the connection is closed. Lookups name the broker's TLS address
(``brokerServiceUrlTls``) beside the plain one when it has a TLS listener.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Any

from protoframe.generated.pulsar import frames
from protoframe.generated.pulsar.pulsar_api import (
    AuthData,
    BaseCommand,
    CommandAuthChallenge,
    CommandAuthResponse,
    CommandConnect,
    CommandError,
    CommandLookupTopicResponse,
    CommandProducer,
    CommandSubscribe,
    ServerError,
)

from .commands import SERVER_VERSION
from .security import AuthenticationFailed, Identity, Security, seconds_until
from .session import Session
from .state import BrokerState
from .topics import UINT64_MASK

log = logging.getLogger(__name__)

Type = BaseCommand.Type

__all__ = ["GuardedSession"]

# What AUTH_CHALLENGE carries: Pulsar's broker sends this to ask for fresh credentials.
REFRESH_CHALLENGE = b"refresh"
# Pulsar's protocol version that introduced AUTH_CHALLENGE.
AUTH_CHALLENGE_PROTOCOL_VERSION = 14


class GuardedSession(Session):
    """``Session`` with authentication, authorization and a TLS address for lookups."""

    def __init__(self, state: BrokerState, *, security: Security | None,
                 service_url: str | None = None, tls_port: int | None = None,
                 plain_port: int | None = None) -> None:
        super().__init__(state, service_url=service_url)
        self.security = security
        self.tls_port = tls_port
        self.plain_port = plain_port
        self.tls_service_url = ""
        self.identity: Identity | None = None
        self.refreshes = 0
        self._supports_refresh = False
        self._expiry: asyncio.TimerHandle | None = None
        self._grace: asyncio.TimerHandle | None = None

    @property
    def role(self) -> str | None:
        return self.identity.role if self.identity is not None else None

    @property
    def over_tls(self) -> bool:
        transport = self.connection.transport
        return transport is not None and transport.get_extra_info("ssl_object") is not None

    def connection_made(self) -> None:
        super().connection_made()
        transport = self.connection.transport
        assert transport is not None
        local = transport.get_extra_info("sockname")
        host = local[0] if isinstance(local, tuple) else "127.0.0.1"
        host = f"[{host}]" if ":" in host else host
        if self.tls_port is not None:
            self.tls_service_url = f"pulsar+ssl://{host}:{self.tls_port}"
        if self.over_tls and self.advertised_url is None and self.plain_port is not None:
            self.service_url = f"pulsar://{host}:{self.plain_port}"

    def _peer_certificate(self) -> dict[str, Any] | None:
        transport = self.connection.transport
        ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
        if not isinstance(ssl_object, ssl.SSLObject | ssl.SSLSocket):
            return None
        return ssl_object.getpeercert() or None

    # --- authentication --------------------------------------------------------------------

    def on_connect(self, body: CommandConnect, frame: frames.Frame) -> None:
        security = self.security
        if security is not None and security.authentication_enabled:
            try:
                self.identity = security.authenticate(
                    body.auth_method_name or "", body.auth_data or b"",
                    self._peer_certificate())
            except AuthenticationFailed as exc:
                self._refuse_credentials(f"Unable to authenticate: {exc}")
                return
            flags = body.feature_flags
            self._supports_refresh = bool(flags is not None and flags.supports_auth_refresh)
            log.debug("connection %s: role %r by %s", self.peer, self.identity.role,
                      self.identity.method)
            self._watch_expiry()
        super().on_connect(body, frame)

    def _refuse_credentials(self, message: str) -> None:
        # Pulsar answers with an ERROR that names no request (-1) and closes the connection.
        self._emit_unchecked(BaseCommand(type_=Type.ERROR, error=CommandError(
            request_id=UINT64_MASK, error=ServerError.AuthenticationError, message=message)))
        self.abort(message, logging.INFO)

    def _watch_expiry(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        identity = self.identity
        if identity is None or identity.expires_at is None:
            return
        loop = asyncio.get_running_loop()
        self._expiry = loop.call_later(seconds_until(identity.expires_at), self._expired)

    def _expired(self) -> None:
        self._expiry = None
        if self.closed or self.security is None or self.identity is None:
            return
        if not self._supports_refresh:
            self._refuse_credentials("the credentials have expired")
            return
        self._emit_unchecked(BaseCommand(type_=Type.AUTH_CHALLENGE, authChallenge=(
            CommandAuthChallenge(
                server_version=SERVER_VERSION,
                challenge=AuthData(auth_method_name=self.identity.method,
                                   auth_data=REFRESH_CHALLENGE),
                protocol_version=AUTH_CHALLENGE_PROTOCOL_VERSION))))
        loop = asyncio.get_running_loop()
        self._grace = loop.call_later(self.security.auth_refresh_grace_seconds, self._no_answer)

    def _no_answer(self) -> None:
        self._grace = None
        self._refuse_credentials("the credentials have expired and the client sent no new ones")

    def on_auth_response(self, body: CommandAuthResponse, frame: frames.Frame) -> None:
        if self._grace is None or self.security is None or self.identity is None:
            super().on_auth_response(body, frame)
            return
        self._grace.cancel()
        self._grace = None
        response = body.response
        method = (response.auth_method_name if response is not None else None) or ""
        data = (response.auth_data if response is not None else None) or b""
        try:
            identity = self.security.authenticate(method, data, self._peer_certificate())
        except AuthenticationFailed as exc:
            self._refuse_credentials(f"Unable to authenticate: {exc}")
            return
        if identity.role != self.identity.role:
            self._refuse_credentials(f"the new credentials are for role {identity.role!r}, "
                                     f"not {self.identity.role!r}")
            return
        self.identity = identity
        self.refreshes += 1
        self._watch_expiry()

    def cleanup(self) -> None:
        for timer in (self._expiry, self._grace):
            if timer is not None:
                timer.cancel()
        self._expiry = self._grace = None
        super().cleanup()

    # --- authorization ---------------------------------------------------------------------

    def _refusal(self, topic: str, action: str) -> str:
        """Why this role may not ``action`` on ``topic`` ("" if it may)."""
        if self.security is None or not self.security.authorization_enabled:
            return ""
        name, _ = self._topic_name(topic)
        if name is None:
            return ""  # the topic's own error answers
        namespace = "/".join(name.split("://", 1)[1].split("/")[:2])
        if self.security.allows(self.role, namespace, action):
            return ""
        return f"role {self.role!r} is not authorized to {action} on {name}"

    def on_producer(self, body: CommandProducer, frame: frames.Frame) -> None:
        refusal = self._refusal(body.topic, "produce")
        if refusal:
            self._error(body.request_id, ServerError.AuthorizationError, refusal)
            return
        super().on_producer(body, frame)

    def on_subscribe(self, body: CommandSubscribe, frame: frames.Frame) -> None:
        refusal = self._refusal(body.topic, "consume")
        if refusal:
            self._error(body.request_id, ServerError.AuthorizationError, refusal)
            return
        super().on_subscribe(body, frame)

    # --- lookups ---------------------------------------------------------------------------

    def _emit(self, command: BaseCommand) -> None:
        answer = command.lookupTopicResponse
        if (answer is not None and self.tls_service_url
                and answer.response == CommandLookupTopicResponse.LookupType.Connect):
            answer.brokerServiceUrlTls = self.tls_service_url
        super()._emit(command)
