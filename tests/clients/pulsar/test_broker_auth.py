"""The embedded broker's authentication and authorization (clients/pulsar/broker/security.py):
tokens signed with a secret (HS256) or a key pair (RS256, ES256), refused when bogus, expired
or signed with another key; grants per namespace for produce and consume, superusers; a token
that expires on an open connection is challenged (AUTH_CHALLENGE) and must be renewed."""

from __future__ import annotations

import argparse
import asyncio
import base64
import time
from collections.abc import Callable
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from protoframe.clients.pulsar import (
    AuthenticationError,
    AuthenticationToken,
    AuthorizationError,
    PulsarClient,
)
from protoframe.clients.pulsar.broker import EmbeddedBroker, Security
from protoframe.clients.pulsar.broker.guarded_session import GuardedSession
from protoframe.clients.pulsar.broker.security import parse_grant
from protoframe.clients.pulsar.broker.security_options import add_security_options, security_of

SECRET = b"embedded-broker-test-secret-of-32-bytes!"
CLI_SECRET = b"a-command-line-secret-of-32-bytes"
GRANTS = {"public/default": {"writer": ["produce"], "reader": ["consume"],
                             "app": ["produce", "consume"]}}


def hs256(subject: str, expires_in: float | None = None, secret: bytes = SECRET) -> str:
    claims: dict[str, Any] = {"sub": subject}
    if expires_in is not None:
        claims["exp"] = int(time.time() + expires_in)
    return jwt.encode(claims, secret, algorithm="HS256")


def secured(**overrides: Any) -> Security:
    options: dict[str, Any] = {"authentication_enabled": True, "token_secret_key": SECRET,
                               "authorization_enabled": True, "superuser_roles": ["admin"],
                               "grants": GRANTS}
    options.update(overrides)
    return Security(**options)


async def round_trip(url: str, auth: Any, topic: str = "guarded") -> None:
    async with PulsarClient(url, auth=auth, operation_timeout_seconds=10) as client:
        producer = await client.create_producer(topic)
        consumer = await client.subscribe(topic, "s", initial_position="earliest")
        sent = await producer.send(b"allowed")
        msg = await asyncio.wait_for(consumer.receive(), 10)
        assert msg.data() == b"allowed" and msg.message_id() == sent


def run(scenario: Callable[[str], Any], security: Security, timeout: float = 30) -> None:
    async def main() -> None:
        async with EmbeddedBroker(port=0, security=security) as url:
            await scenario(url)

    asyncio.run(asyncio.wait_for(main(), timeout))


def test_a_valid_token_may_do_what_its_role_was_granted() -> None:
    run(lambda url: round_trip(url, AuthenticationToken(hs256("app"))), secured())
    run(lambda url: round_trip(url, AuthenticationToken(hs256("admin", 600))), secured())


@pytest.mark.parametrize("token", [
    pytest.param(lambda: "not.a.token", id="bogus"),
    pytest.param(lambda: hs256("app", expires_in=-30), id="expired"),
    pytest.param(lambda: hs256("app", secret=b"another-secret-of-thirty-two-bytes!!"),
                 id="wrong-key"),
    pytest.param(lambda: jwt.encode({"exp": int(time.time()) + 60}, SECRET), id="no-role"),
])
def test_bad_tokens_are_refused_at_connect(token: Callable[[], str]) -> None:
    async def scenario(url: str) -> None:
        async with PulsarClient(url, auth=AuthenticationToken(token()),
                                operation_timeout_seconds=10) as client:
            with pytest.raises(AuthenticationError, match="Unable to authenticate"):
                await client.create_producer("guarded")

    run(scenario, secured())


def test_no_credentials_are_refused_unless_there_is_an_anonymous_role() -> None:
    async def refused(url: str) -> None:
        async with PulsarClient(url, operation_timeout_seconds=10) as client:
            with pytest.raises(AuthenticationError, match="no credentials"):
                await client.create_producer("guarded")

    async def anonymous(url: str) -> None:
        async with PulsarClient(url, operation_timeout_seconds=10) as client:
            await client.create_producer("guarded")
            with pytest.raises(AuthorizationError, match="'guest' is not authorized to consume"):
                await client.subscribe("guarded", "s")

    run(refused, secured())
    run(anonymous, secured(anonymous_role="guest",
                           grants={"public/default": {"guest": ["produce"]}}))


def test_roles_get_authorization_errors_for_what_they_were_not_granted() -> None:
    async def scenario(url: str) -> None:
        async with PulsarClient(url, auth=AuthenticationToken(hs256("writer")),
                                operation_timeout_seconds=10) as writer, \
                PulsarClient(url, auth=AuthenticationToken(hs256("reader")),
                             operation_timeout_seconds=10) as reader, \
                PulsarClient(url, auth=AuthenticationToken(hs256("stranger")),
                             operation_timeout_seconds=10) as stranger:
            producer = await writer.create_producer("guarded")
            with pytest.raises(AuthorizationError, match="'writer' is not authorized to "
                               "consume on persistent://public/default/guarded"):
                await writer.subscribe("guarded", "s")
            consumer = await reader.subscribe("guarded", "s", initial_position="earliest")
            with pytest.raises(AuthorizationError, match="not authorized to produce"):
                await reader.create_producer("guarded")
            await producer.send(b"from the writer")
            assert (await asyncio.wait_for(consumer.receive(), 10)).data() == b"from the writer"
            with pytest.raises(AuthorizationError):
                await stranger.create_producer("guarded")
            with pytest.raises(AuthorizationError):
                await stranger.subscribe("guarded", "s2")
            # Grants are per namespace: the writer may not produce elsewhere.
            with pytest.raises(AuthorizationError):
                await writer.create_producer("persistent://public/other/t")

    run(scenario, secured())


def test_authentication_without_authorization_lets_every_role_do_everything() -> None:
    run(lambda url: round_trip(url, AuthenticationToken(hs256("stranger"))),
        secured(authorization_enabled=False))


def key_pair(kind: str) -> tuple[Any, bytes]:
    private: Any = (rsa.generate_private_key(public_exponent=65537, key_size=2048)
                    if kind == "RS256" else ec.generate_private_key(ec.SECP256R1()))
    public = private.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return private, public


@pytest.mark.parametrize("algorithm", ["RS256", "ES256"])
def test_tokens_signed_with_a_key_pair(algorithm: str, tmp_path: Any) -> None:
    private, public = key_pair(algorithm)
    other, _ = key_pair(algorithm)
    key_file = tmp_path / "public.key"
    key_file.write_bytes(public)  # DER, as pulsar tokens create-key-pair writes it
    security = secured(token_secret_key=None, token_public_key=f"file://{key_file}")
    good = jwt.encode({"sub": "app", "exp": int(time.time()) + 600}, private,
                      algorithm=algorithm)
    forged = jwt.encode({"sub": "app"}, other, algorithm=algorithm)
    secret_signed = hs256("app")

    async def scenario(url: str) -> None:
        await round_trip(url, AuthenticationToken(good))
        for token in (forged, secret_signed):
            async with PulsarClient(url, auth=AuthenticationToken(token),
                                    operation_timeout_seconds=10) as client:
                with pytest.raises(AuthenticationError):
                    await client.create_producer("guarded")

    run(scenario, security)


def guarded_sessions(broker: EmbeddedBroker) -> list[GuardedSession]:
    return [s for s in broker.sessions if isinstance(s, GuardedSession)]


async def wait_for(condition: Callable[[], bool], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


@pytest.mark.slow  # waits for a token to expire
def test_an_expiring_token_is_challenged_and_renewed_on_the_same_connection() -> None:
    issued: list[str] = []

    def fresh() -> str:
        issued.append(hs256("app", expires_in=1.5))
        return issued[-1]

    async def main() -> None:
        broker = EmbeddedBroker(port=0, security=secured())
        url = await broker.start()
        try:
            async with PulsarClient(url, auth=AuthenticationToken(fresh),
                                    operation_timeout_seconds=10) as client:
                producer = await client.create_producer("renewed")
                consumer = await client.subscribe("renewed", "s", initial_position="earliest")
                (session,) = guarded_sessions(broker)
                await wait_for(lambda: session.refreshes >= 1)
                assert len(issued) >= 2 and not session.closed
                await producer.send(b"after the refresh")
                msg = await asyncio.wait_for(consumer.receive(), 10)
                assert msg.data() == b"after the refresh"
                assert guarded_sessions(broker) == [session]
        finally:
            await broker.stop()

    asyncio.run(asyncio.wait_for(main(), 30))


@pytest.mark.slow  # waits for a token to expire
def test_a_challenge_answered_with_an_expired_token_closes_the_connection() -> None:
    async def main() -> None:
        broker = EmbeddedBroker(port=0, security=secured(auth_refresh_grace_seconds=10))
        url = await broker.start()
        try:
            stale = hs256("app", expires_in=1)
            async with PulsarClient(url, auth=AuthenticationToken(stale),
                                    operation_timeout_seconds=10) as client:
                await client.create_producer("stale")
                (session,) = guarded_sessions(broker)
                await wait_for(lambda: session.closed)
                assert session.refreshes == 0
        finally:
            await broker.stop()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_grants_and_security_from_the_command_line() -> None:
    parser = argparse.ArgumentParser()
    add_security_options(parser)
    args = parser.parse_args([
        "--authentication-enabled",
        "--token-secret-key", f"data:;base64,{base64.b64encode(CLI_SECRET).decode()}",
        "--authorization-enabled", "--superuser-role", "admin",
        "--grant", "public/default:app:produce,consume", "--grant", "t/ns:*:consume"])
    security = security_of(args)
    assert security is not None and security.methods == ("token",)
    assert security.allows("admin", "any/where", "produce")
    assert security.allows("app", "public/default", "consume")
    assert not security.allows("app", "t/other", "consume")
    assert security.allows("anyone", "t/ns", "consume")
    assert not security.allows("anyone", "t/ns", "produce")
    assert security.verify_token(hs256("app", secret=CLI_SECRET).encode()).role == "app"
    assert security_of(parser.parse_args([])) is None
    with pytest.raises(ValueError, match="NAMESPACE:ROLE:ACTIONS"):
        parse_grant("public/default:app:delete")
    with pytest.raises(ValueError, match="no method"):
        Security(authentication_enabled=True)
