"""``pulsar+ssl://``: the client over TLS, on both brokers: the embedded one on its TLS
listener (``tls_port``), Apache Pulsar on its own TLS port (its certificate for 127.0.0.1 from
a CA made at its start, tests/support/real_pulsar.py); and token authentication over TLS."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from protoframe.clients.pulsar import (
    AuthenticationError,
    AuthenticationToken,
    ConnectError,
    PulsarClient,
)
from protoframe.clients.pulsar.broker import EmbeddedBroker, Security
from protoframe.clients.pulsar.broker.session import Session
from protoframe.generated.pulsar import pulsar_api as pb
from tests.clients.pulsar.scenarios import Target
from tests.support.real_pulsar import hs256_token

EMBEDDED_SECRET = b"embedded-tls-test-secret-of-32-bytes"


async def produce_and_consume(url: str, ca_file: Path, **options: Any) -> None:
    """One message each way over ``url``, every connection of the client TLS to ``url``; and
    without the CA the handshake fails, and says so."""
    async with PulsarClient(url, tls_trust_certs_file_path=str(ca_file),
                            tls_validate_hostname=True, **options) as client:
        producer = await client.create_producer("secure", compression_type="ZSTD")
        consumer = await client.subscribe("secure", "s", initial_position="earliest")
        sent = await producer.send(b"over tls", properties={"a": "b"})
        msg = await asyncio.wait_for(consumer.receive(), 30)
        assert msg.data() == b"over tls" and msg.message_id() == sent
        await consumer.acknowledge(msg)
        # Every connection the client made is TLS, to the URL given: the broker's address
        # from the lookup was reached through it, never in the clear.
        connections = client._pool.connections()
        assert connections
        for cnx in connections:
            assert cnx.physical == url
            transport = cnx.conn.transport
            assert transport is not None
            assert transport.get_extra_info("ssl_object") is not None
    async with PulsarClient(url, operation_timeout_seconds=2) as untrusting:
        with pytest.raises(ConnectError, match="could not connect"):
            await untrusting.create_producer("secure")


def test_produce_and_consume_over_tls(target: Target, certificate: tuple[Path, Path],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    if target.real is not None:
        tls = target.real.tls
        if tls is None:
            pytest.skip("the standalone has no TLS: the openssl command is not installed")
        target.real.delete_all_topics()
        asyncio.run(asyncio.wait_for(produce_and_consume(tls.url, tls.ca_file), 120))
        return
    cert, key = certificate
    connects: list[pb.CommandConnect] = []
    original = Session.on_connect

    def spy(self: Session, body: pb.CommandConnect, frame: object) -> None:
        connects.append(body)
        original(self, body, frame)  # type: ignore[arg-type]

    monkeypatch.setattr(Session, "on_connect", spy)

    async def scenario() -> None:
        broker = EmbeddedBroker(port=0, tls_port=0, tls_certificate_file_path=cert,
                                tls_key_file_path=key)
        await broker.start()
        try:
            assert broker.tls_url.startswith("pulsar+ssl://127.0.0.1:")
            await produce_and_consume(broker.tls_url, cert)
            # The lookups named the broker's TLS address: no connection asked to be proxied.
            assert connects
            assert all(not c.proxy_to_broker_url for c in connects)
        finally:
            await broker.stop()

    asyncio.run(asyncio.wait_for(scenario(), 30))


async def with_token(url: str, ca_file: Path, token: str) -> None:
    async with PulsarClient(url, tls_trust_certs_file_path=str(ca_file),
                            auth=AuthenticationToken(token),
                            operation_timeout_seconds=10) as client:
        producer = await client.create_producer("secure-token")
        consumer = await client.subscribe("secure-token", "s", initial_position="earliest")
        await producer.send(b"with a token")
        assert (await asyncio.wait_for(consumer.receive(), 30)).data() == b"with a token"


def tls_and_token(target: Target, certificate: tuple[Path, Path],
                  token: Callable[[Target], str]) -> None:
    """``with_token`` over TLS on the target broker, with the token ``token`` makes for it."""
    if target.real is not None:
        tls = target.real.tls
        if tls is None:
            pytest.skip("the standalone has no TLS: the openssl command is not installed")
        target.real.delete_all_topics()
        asyncio.run(asyncio.wait_for(with_token(tls.url, tls.ca_file, token(target)), 120))
        return
    cert, key = certificate

    async def scenario() -> None:
        security = Security(authentication_enabled=True, token_secret_key=EMBEDDED_SECRET)
        broker = EmbeddedBroker(port=0, tls_port=0, tls_certificate_file_path=cert,
                                tls_key_file_path=key, security=security)
        await broker.start()
        try:
            await with_token(broker.tls_url, cert, token(target))
        finally:
            await broker.stop()

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_a_valid_token_over_tls_is_accepted(target: Target,
                                            certificate: tuple[Path, Path]) -> None:
    # Each broker's token signed with its secret.
    tls_and_token(target, certificate,
                  lambda t: hs256_token(EMBEDDED_SECRET, "tls-tester") if t.real is None
                  else t.real.token("tls-tester"))


def test_a_bogus_token_over_tls_is_refused(target: Target,
                                          certificate: tuple[Path, Path]) -> None:
    with pytest.raises(AuthenticationError):
        tls_and_token(target, certificate, lambda t: "not.a.token")
