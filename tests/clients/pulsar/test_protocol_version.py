"""What our Pulsar client says about the protocol: the version it offers (the spec's newest
``ProtocolVersion``) and what it does with a command type it does not know (closes the
connection, as Pulsar's own client does), against a scripted broker on 127.0.0.1."""

from __future__ import annotations

import asyncio
import ssl
import struct

from protoframe.clients.pulsar.connection import PROTOCOL_VERSION, ClientConnection
from protoframe.generated.pulsar import pulsar_api as pb
from protoframe.generated.pulsar.commands import PROTOCOL_VERSION as SPEC_VERSION
from protoframe.generated.pulsar.frames import Frame, StreamDecoder
from protoframe.runtime.codec.protowire import varint_bytes
from protoframe.runtime.errors import ConnectionClosed, UnknownCommandTypeError
from protoframe.runtime.io.auth import Authentication, NoAuthentication

T = pb.BaseCommand.Type
TIMEOUT = 30.0  # a loaded machine: generous, never relied on for timing


class Options:
    authentication: Authentication = NoAuthentication()
    operation_timeout = TIMEOUT
    connection_timeout = TIMEOUT
    keepalive_interval = 0.0

    def ssl_context(self) -> ssl.SSLContext | None:
        return None


def raw_frame(command: bytes) -> bytes:
    return struct.pack(">II", len(command) + 4, len(command)) + command


async def scripted_broker(after_connected: bytes, offered: list[int]
                          ) -> tuple[asyncio.Server, str]:
    """A broker that answers CONNECT (noting the version offered), then sends
    ``after_connected`` and keeps the connection open."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder = StreamDecoder()
        frames: list[Frame] = []
        while not frames:
            data = await reader.read(65536)
            if not data:
                return
            frames += decoder.feed(data)
        connect = frames[0].command.connect
        assert connect is not None
        offered.append(connect.protocol_version)
        writer.write(Frame(command=pb.BaseCommand(type_=T.CONNECTED, connected=pb.CommandConnected(
            server_version="scripted", protocol_version=connect.protocol_version))).encode())
        writer.write(after_connected)
        await writer.drain()
        await reader.read()  # until the client closes
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"pulsar://127.0.0.1:{port}"


def test_the_client_offers_the_specs_newest_protocol_version() -> None:
    newest = max(v.value for v in pb.ProtocolVersion)
    assert PROTOCOL_VERSION == SPEC_VERSION == newest

    async def main() -> list[int]:
        offered: list[int] = []
        server, url = await scripted_broker(b"", offered)
        async with server:
            cnx = ClientConnection(Options(), url, url)
            await asyncio.wait_for(cnx.open(), TIMEOUT)
            assert cnx.protocol_version == newest
            cnx.close()
        return offered

    assert asyncio.run(main()) == [newest]


def test_an_unknown_command_type_closes_the_connection_with_a_typed_error() -> None:
    # Pulsar's Java client cannot parse a BaseCommand whose type its enum lacks; the exception
    # reaches ClientCnx.exceptionCaught, which logs it and closes the connection. Ours does the
    # same, and what fails the application's requests says which command type it was.
    ping = pb.BaseCommand(type_=T.PING, ping=pb.CommandPing()).encode()[2:]
    unknown = raw_frame(b"\x08" + varint_bytes(1000) + ping)

    async def main() -> ConnectionClosed:
        closed: asyncio.Future[ConnectionClosed] = asyncio.get_running_loop().create_future()
        server, url = await scripted_broker(unknown, [])
        async with server:
            cnx = ClientConnection(Options(), url, url)

            def on_close(_: ClientConnection, exc: ConnectionClosed) -> None:
                if not closed.done():
                    closed.set_result(exc)

            cnx.on_close(on_close)
            await asyncio.wait_for(cnx.open(), TIMEOUT)
            reason = await asyncio.wait_for(closed, TIMEOUT)
            assert not cnx.is_open
        return reason

    reason = asyncio.run(main())
    cause = reason.__cause__
    assert isinstance(cause, UnknownCommandTypeError), repr(reason)
    assert cause.command_type == 1000
    assert "1000" in str(reason)
