"""The official client over TLS against Apache Pulsar's standalone (tests/support/real_pulsar.py
listens with TLS, its certificate for 127.0.0.1 from a CA made at its start): the same setup our
client's TLS tests use (tests/clients/pulsar/test_tls.py) works for the official one, so what our
tests prove is about TLS as Pulsar serves it, not about our own reading of it."""

from __future__ import annotations

import pulsar
import pytest

from tests.support.real_pulsar import RealPulsar, Tls

LOGGER = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)


def tls_of(real: RealPulsar) -> Tls:
    if real.tls is None:
        pytest.skip("the standalone has no TLS: the openssl command is not installed")
    return real.tls


def test_official_client_produces_and_consumes_over_tls_with_a_token(
        real_pulsar: RealPulsar) -> None:
    tls = tls_of(real_pulsar)
    real_pulsar.delete_all_topics()
    client = pulsar.Client(tls.url, tls_trust_certs_file_path=str(tls.ca_file),
                           tls_validate_hostname=True,
                           authentication=pulsar.AuthenticationToken(real_pulsar.token()),
                           operation_timeout_seconds=30, logger=LOGGER)
    try:
        consumer = client.subscribe("official-tls", "s",
                                    initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer("official-tls")
        sent = producer.send(b"over tls")
        msg = consumer.receive(30_000)
        assert msg.data() == b"over tls" and msg.message_id() == sent
        consumer.acknowledge(msg)
    finally:
        client.close()


def test_official_client_without_the_ca_is_refused(real_pulsar: RealPulsar) -> None:
    tls = tls_of(real_pulsar)
    client = pulsar.Client(tls.url, operation_timeout_seconds=5, connection_timeout_ms=5000,
                           logger=LOGGER)
    try:
        with pytest.raises(pulsar.PulsarException):
            client.create_producer("official-tls-untrusted")
    finally:
        client.close()
