"""``pulsar+ssl://``: the client over TLS, through a TLS-terminating forwarder to the broker."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest

from protoframe.clients.pulsar import ConnectError, PulsarClient
from protoframe.clients.pulsar.broker import EmbeddedBroker
from protoframe.clients.pulsar.broker.session import Session
from protoframe.generated.pulsar import pulsar_api as pb


async def tls_forwarder(cert: Path, key: Path, port: int) -> asyncio.Server:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(str(cert), str(key))

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(1 << 16):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    return await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)


def test_produce_and_consume_over_tls(certificate: tuple[Path, Path],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    cert, key = certificate
    connects: list[pb.CommandConnect] = []
    original = Session.on_connect

    def spy(self: Session, body: pb.CommandConnect, frame: object) -> None:
        connects.append(body)
        original(self, body, frame)  # type: ignore[arg-type]

    monkeypatch.setattr(Session, "on_connect", spy)

    async def scenario() -> None:
        async with EmbeddedBroker(port=0) as broker_url:
            port = int(broker_url.rsplit(":", 1)[1])
            forwarder = await tls_forwarder(cert, key, port)
            tls_port = forwarder.sockets[0].getsockname()[1]
            url = f"pulsar+ssl://127.0.0.1:{tls_port}"
            async with PulsarClient(url, tls_trust_certs_file_path=str(cert),
                                    tls_validate_hostname=True) as client:
                producer = await client.create_producer("secure", compression_type="ZSTD")
                consumer = await client.subscribe("secure", "s", initial_position="earliest")
                sent = await producer.send(b"over tls", properties={"a": "b"})
                msg = await asyncio.wait_for(consumer.receive(), 5)
                assert msg.data() == b"over tls" and msg.message_id() == sent
                await consumer.acknowledge(msg)
                # Every connection the client made is TLS, to the forwarder; the broker's
                # plain address from the lookup was reached through it, never in the clear.
                connections = client._pool.connections()
                assert connections
                for cnx in connections:
                    assert cnx.physical == url
                    transport = cnx.conn.transport
                    assert transport is not None
                    assert transport.get_extra_info("ssl_object") is not None
                assert any(c.proxy_to_broker_url == broker_url.removeprefix("pulsar://")
                           for c in connects)
            # Without the CA the handshake fails, and says so.
            async with PulsarClient(url, operation_timeout_seconds=2) as untrusting:
                with pytest.raises(ConnectError, match="could not connect"):
                    await untrusting.create_producer("secure")
            forwarder.close()
            await forwarder.wait_closed()

    asyncio.run(asyncio.wait_for(scenario(), 30))
