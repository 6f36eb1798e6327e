"""``AuthenticationOauth2``: the client-credentials flow against a token server the test starts
(tests/support/token_server.py), on both brokers: the token server signs with the broker's
secret (the embedded broker's, or the standalone's HS256 one), our client gets a token, connects,
and renews it before it expires; the expired first token is refused by then. On the embedded
broker the first connection also survives the token's expiry by answering AUTH_CHALLENGE."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jwt
import pytest

from protoframe.clients.pulsar import (
    AuthenticationError,
    AuthenticationOauth2,
    AuthenticationToken,
    PulsarClient,
)
from protoframe.clients.pulsar.broker import BrokerThread, EmbeddedBroker, Security
from protoframe.clients.pulsar.broker.guarded_session import GuardedSession
from protoframe.clients.pulsar.oauth2 import OAuth2Error
from tests.clients.pulsar.scenarios import Target
from tests.support.token_server import TokenServer

SECRET = b"oauth2-test-secret-of-at-least-32-bytes"
LIFETIME = 3.0  # seconds: long enough to connect on a loaded machine, short enough to wait out


def signer(secret: bytes) -> Callable[[dict[str, Any]], str]:
    return lambda claims: jwt.encode(claims, secret, algorithm="HS256")


async def wait_for(condition: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def credentials_flow(url: str, server: TokenServer,
                           sessions: Callable[[], list[GuardedSession]] | None) -> None:
    auth = AuthenticationOauth2(json.dumps({
        "issuer_url": server.issuer_url, "client_id": server.client_id,
        "client_secret": server.client_secret, "audience": "urn:pulsar:test",
        "scope": "produce consume"}))
    async with PulsarClient(url, auth=auth, operation_timeout_seconds=30) as client:
        producer = await client.create_producer("oauth2")
        consumer = await client.subscribe("oauth2", "s", initial_position="earliest")
        await producer.send(b"with an access token")
        assert (await asyncio.wait_for(consumer.receive(), 30)).data() == \
            b"with an access token"
        first, expires = server.issued[0]
        (request,) = server.requests
        assert request == {"grant_type": "client_credentials", "client_id": "test-client",
                           "client_secret": "test-secret", "audience": "urn:pulsar:test",
                           "scope": "produce consume"}
        await wait_for(lambda: time.time() > expires + 1, LIFETIME + 30)
        if sessions is not None:
            # The broker challenged the expired token; the client fetched a new one and kept
            # its connection.
            (session,) = sessions()
            await wait_for(lambda: session.refreshes >= 1, 30)
            await producer.send(b"after the challenge")
            assert (await asyncio.wait_for(consumer.receive(), 30)).data() == \
                b"after the challenge"
            assert sessions() == [session]
    # The first token is expired: it alone would be refused now.
    async with PulsarClient(url, auth=AuthenticationToken(first),
                            operation_timeout_seconds=30) as stale:
        with pytest.raises(AuthenticationError):
            await stale.create_producer("oauth2")
    # The plug-in renewed it (when due, or when challenged) before connecting again.
    fetched = auth.fetches
    async with PulsarClient(url, auth=auth, operation_timeout_seconds=30) as client:
        producer = await client.create_producer("oauth2")
        await producer.send(b"with a renewed token")
    assert auth.token() != first
    assert auth.fetches >= (2 if sessions is not None else fetched + 1)
    assert len(server.issued) == len(server.requests)


@pytest.mark.slow  # waits out a token's lifetime
def test_oauth2_client_credentials_and_renewal(target: Target) -> None:
    if target.real is not None:
        real = target.real
        real.delete_all_topics()
        with TokenServer(signer(real.secret), role="oauth2-app", lifetime=LIFETIME) as server:
            asyncio.run(asyncio.wait_for(credentials_flow(real.url, server, None), 180))
        return

    async def embedded() -> None:
        security = Security(authentication_enabled=True, token_secret_key=SECRET,
                            authorization_enabled=True,
                            grants={"public/default": {"oauth2-app": ["produce", "consume"]}})
        broker = EmbeddedBroker(port=0, security=security)
        url = await broker.start()
        try:
            with TokenServer(signer(SECRET), role="oauth2-app", lifetime=LIFETIME) as server:
                await credentials_flow(url, server, lambda: [
                    s for s in broker.sessions
                    if isinstance(s, GuardedSession) and not s.closed])
        finally:
            await broker.stop()

    asyncio.run(asyncio.wait_for(embedded(), 120))


def test_oauth2_parameters_and_errors(tmp_path: Path) -> None:
    with TokenServer(signer(SECRET), role="r", audience="aud") as server:
        key_file = tmp_path / "credentials.json"
        key_file.write_text(json.dumps({"type": "client_credentials",
                                        "client_id": server.client_id,
                                        "client_secret": server.client_secret}))
        # The official clients' credentials file, named by private_key.
        auth = AuthenticationOauth2(json.dumps({
            "issuer_url": server.issuer_url, "private_key": f"file://{key_file}",
            "audience": "aud"}))
        token = auth.token()
        assert jwt.decode(token, SECRET, algorithms=["HS256"])["sub"] == "r"
        assert auth.token() == token and auth.fetches == 1  # no expiry yet: kept
        assert auth.method_name == "token" and auth.auth_data() == token.encode()
        wrong = AuthenticationOauth2(issuer_url=server.issuer_url,
                                     client_id=server.client_id, client_secret="wrong",
                                     audience="aud")
        with pytest.raises(OAuth2Error, match="HTTP 401.*invalid_client"):
            wrong.token()
        assert "wrong" not in repr(wrong)
    with pytest.raises(ValueError, match="needs issuer_url"):
        AuthenticationOauth2(json.dumps({"client_secret": "s"}))


def test_an_unreachable_token_endpoint_fails_the_connect() -> None:
    with TokenServer(signer(SECRET), role="r") as server:
        issuer = server.issuer_url
    auth = AuthenticationOauth2(issuer_url=issuer, client_id="c", client_secret="s", timeout=5)

    async def main() -> None:
        async with EmbeddedBroker(port=0) as url, \
                PulsarClient(url, auth=auth, operation_timeout_seconds=5) as client:
            with pytest.raises(Exception, match="openid-configuration"):
                await client.create_producer("t")

    asyncio.run(asyncio.wait_for(main(), 30))


@pytest.mark.interop  # the official client
def test_the_official_client_uses_the_same_token_server(target: Target) -> None:
    """The official ``AuthenticationOauth2`` with the same parameters and token server: what it
    produces, our OAuth2 client consumes."""
    import pulsar

    def scenario(url: str, secret: bytes) -> None:
        with TokenServer(signer(secret), role="oauth2-app") as server:
            params = json.dumps({"issuer_url": server.issuer_url, "client_id": server.client_id,
                                 "client_secret": server.client_secret, "audience": "a"})
            quiet = logging.getLogger("pulsar.official")
            quiet.setLevel(logging.ERROR)
            official = pulsar.Client(url, authentication=pulsar.AuthenticationOauth2(params),
                                     operation_timeout_seconds=30, logger=quiet)
            try:
                official.create_producer("oauth2-official").send(b"from the official client")
            finally:
                official.close()
            assert server.requests and server.requests[0]["grant_type"] == "client_credentials"

            async def consume() -> bytes:
                async with PulsarClient(url, auth=AuthenticationOauth2(params),
                                        operation_timeout_seconds=30) as ours:
                    consumer = await ours.subscribe("oauth2-official", "s",
                                                    initial_position="earliest")
                    return (await asyncio.wait_for(consumer.receive(), 30)).data()

            assert asyncio.run(consume()) == b"from the official client"

    if target.real is not None:
        target.real.delete_all_topics()
        scenario(target.real.url, target.real.secret)
        return
    security = Security(authentication_enabled=True, token_secret_key=SECRET)
    with BrokerThread(port=0, security=security) as broker:
        scenario(broker.url, SECRET)
