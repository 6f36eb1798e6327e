"""TLS client-certificate authentication (``AuthenticationTLS``, method ``"tls"``): the role is
the certificate's common name. On the embedded broker's TLS listener with authorization, and on
the standalone (interop/pulsar/standalone.conf has AuthenticationProviderTls); and the official
client's token and TLS plug-ins against the embedded broker's TLS listener."""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
import pytest

from protoframe.clients.pulsar import (
    AuthenticationError,
    AuthenticationTLS,
    AuthenticationToken,
    AuthorizationError,
    ConnectError,
    PulsarClient,
)
from protoframe.clients.pulsar.broker import (
    BrokerProcess,
    BrokerThread,
    EmbeddedBroker,
    Security,
)
from protoframe.clients.pulsar.broker.guarded_session import GuardedSession
from tests.support.certificates import Authority, make_authority
from tests.support.real_pulsar import RealPulsar, free_port

SECRET = b"tls-auth-test-secret-of-at-least-32-bytes"


@dataclass
class Certificates:
    ca_file: Path
    server: tuple[Path, Path]
    alice: tuple[Path, Path]
    mallory: tuple[Path, Path]
    rogue: tuple[Path, Path]  # CN=alice, signed by a CA the broker does not trust


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    directory = tmp_path_factory.mktemp("tls-auth")
    authority = make_authority(directory)
    rogue_authority = make_authority(directory, "rogue-ca")
    if authority is None or rogue_authority is None:
        pytest.skip("the openssl command is not installed")
    return Certificates(authority.ca_file, authority.issue("broker", "localhost", server=True),
                        authority.issue("alice", "alice"), authority.issue("mallory", "mallory"),
                        rogue_authority.issue("rogue", "alice"))


def security() -> Security:
    return Security(authentication_enabled=True, tls_authentication=True,
                    token_secret_key=SECRET, authorization_enabled=True,
                    grants={"public/default": {"alice": ["produce", "consume"],
                                               "token-app": ["produce", "consume"]}})


def broker_options(certs: Certificates) -> dict[str, Any]:
    return {"tls_port": 0, "tls_certificate_file_path": certs.server[0],
            "tls_key_file_path": certs.server[1], "tls_trust_certs_file_path": certs.ca_file,
            "security": security()}


def tls_auth(pair: tuple[Path, Path]) -> AuthenticationTLS:
    return AuthenticationTLS(str(pair[0]), str(pair[1]))


async def round_trip(url: str, ca_file: Path, auth: Any, topic: str = "by-certificate",
                     check: Callable[[], None] | None = None) -> None:
    async with PulsarClient(url, auth=auth, tls_trust_certs_file_path=str(ca_file),
                            operation_timeout_seconds=30) as client:
        producer = await client.create_producer(topic)
        consumer = await client.subscribe(topic, "s", initial_position="earliest")
        sent = await producer.send(b"signed by the CA")
        msg = await asyncio.wait_for(consumer.receive(), 30)
        assert msg.data() == b"signed by the CA" and msg.message_id() == sent
        if check is not None:
            check()


async def refused(url: str, ca_file: Path | None, auth: Any,
                  error: type[Exception] | tuple[type[Exception], ...]) -> None:
    async with PulsarClient(url, auth=auth, operation_timeout_seconds=5,
                            tls_trust_certs_file_path=str(ca_file) if ca_file else None) as c:
        with pytest.raises(error):
            await c.create_producer("by-certificate")


def test_client_certificate_authentication_on_the_embedded_broker(
        certificates: Certificates) -> None:
    certs = certificates

    async def main() -> None:
        broker = EmbeddedBroker(port=0, **broker_options(certs))
        await broker.start()
        try:
            def authenticated_as_alice() -> None:
                sessions = [s for s in broker.sessions if isinstance(s, GuardedSession)]
                assert sessions and {(s.role, s.over_tls) for s in sessions} == {("alice", True)}

            await round_trip(broker.tls_url, certs.ca_file, tls_auth(certs.alice),
                             check=authenticated_as_alice)
            # Authenticated as mallory, who was granted nothing.
            await refused(broker.tls_url, certs.ca_file, tls_auth(certs.mallory),
                          AuthorizationError)
            # A certificate of another CA fails the handshake, whatever its name.
            await refused(broker.tls_url, certs.ca_file, tls_auth(certs.rogue), ConnectError)
            # No certificate to show: the plain listener has none.
            await refused(broker.url, None, tls_auth(certs.alice), AuthenticationError)
        finally:
            await broker.stop()

    asyncio.run(asyncio.wait_for(main(), 60))


@pytest.mark.interop
def test_client_certificate_authentication_on_the_standalone(real_pulsar: RealPulsar) -> None:
    real = real_pulsar
    if real.tls is None:
        pytest.skip("the standalone has no TLS: the openssl command is not installed")
    real.delete_all_topics()
    directory = real.directory / "tls"
    authority = Authority(directory, directory / "ca.pem", directory / "ca.key")
    alice = authority.issue("client-alice", "alice")
    rogue = make_authority(directory / "rogue", "rogue-ca")
    assert rogue is not None
    stranger = rogue.issue("rogue", "alice")
    tls = real.tls

    async def main() -> None:
        await round_trip(tls.url, tls.ca_file, tls_auth(alice))
        await refused(tls.url, tls.ca_file, tls_auth(stranger), (ConnectError,
                                                                  AuthenticationError))

    asyncio.run(asyncio.wait_for(main(), 180))


@pytest.fixture
def tls_broker(certificates: Certificates) -> Iterator[BrokerThread]:
    with BrokerThread(port=0, **broker_options(certificates)) as broker:
        yield broker


def official_round_trip(url: str, ca_file: Path, authentication: Any,
                        timeout: int = 10) -> None:
    import pulsar

    quiet = logging.getLogger("pulsar.official")
    quiet.setLevel(logging.CRITICAL)
    client = pulsar.Client(url, authentication=authentication, logger=quiet,
                           tls_trust_certs_file_path=str(ca_file),
                           tls_validate_hostname=False, operation_timeout_seconds=timeout)
    try:
        producer = client.create_producer("official-secured")
        consumer = client.subscribe("official-secured", "s",
                                    initial_position=pulsar.InitialPosition.Earliest)
        producer.send(b"official over tls")
        msg = consumer.receive(timeout_millis=10_000)
        assert msg.data() == b"official over tls"
        consumer.acknowledge(msg)
    finally:
        client.close()


@pytest.mark.interop
def test_official_client_with_a_token_on_the_embedded_tls_listener(
        tls_broker: BrokerThread, certificates: Certificates) -> None:
    import pulsar

    token = jwt.encode({"sub": "token-app", "exp": int(time.time()) + 600}, SECRET)
    official_round_trip(tls_broker.broker.tls_url, certificates.ca_file,
                        pulsar.AuthenticationToken(token))
    with pytest.raises(pulsar.PulsarException):
        official_round_trip(tls_broker.broker.tls_url, certificates.ca_file,
                            pulsar.AuthenticationToken("not.a.token"), timeout=3)


@pytest.mark.interop
def test_official_client_with_a_certificate_on_the_embedded_tls_listener(
        tls_broker: BrokerThread, certificates: Certificates) -> None:
    import pulsar

    cert, key = certificates.alice
    official_round_trip(tls_broker.broker.tls_url, certificates.ca_file,
                        pulsar.AuthenticationTLS(str(cert), str(key)))
    cert, key = certificates.mallory
    with pytest.raises(pulsar.PulsarException):
        official_round_trip(tls_broker.broker.tls_url, certificates.ca_file,
                            pulsar.AuthenticationTLS(str(cert), str(key)), timeout=3)


@pytest.mark.slow  # starts the broker command in a process of its own
def test_the_broker_command_listens_with_tls_and_checks_tokens(
        certificates: Certificates) -> None:
    certs = certificates
    tls_port = free_port()
    secret = base64.b64encode(SECRET).decode()
    options = ("--tls-port", str(tls_port), "--tls-certificate-file", str(certs.server[0]),
               "--tls-key-file", str(certs.server[1]), "--tls-trust-certs-file",
               str(certs.ca_file), "--authentication-enabled", "--tls-authentication",
               "--token-secret-key", f"data:;base64,{secret}", "--authorization-enabled",
               "--grant", "public/default:token-app:produce,consume")
    token = jwt.encode({"sub": "token-app"}, SECRET)
    url = f"pulsar+ssl://127.0.0.1:{tls_port}"

    async def main() -> None:
        await round_trip(url, certs.ca_file, AuthenticationToken(token))
        await refused(url, certs.ca_file, AuthenticationToken("not.a.token"),
                      AuthenticationError)
        # alice's certificate authenticates her, but this broker granted her nothing.
        await refused(url, certs.ca_file, tls_auth(certs.alice), AuthorizationError)

    with BrokerProcess(port=0, extra_args=options):
        asyncio.run(asyncio.wait_for(main(), 60))
