"""A small typed asyncio WebSocket client (RFC 6455) on the generated ``websocket.frames``
and protoframe's runtime connection.

Every byte it sends is a generated ``encode`` (the ``Upgrade`` request, then masked
``Frame``s) and every byte it reads goes through the generated ``StreamDecoder`` (the
``Accepted`` response, then frames): this module holds no framing of its own. What it adds is
the protocol's logic around the messages: the Sec-WebSocket-Key and its expected
Sec-WebSocket-Accept (RFC 6455 4.1, 4.2.2), a fresh masking key per frame (5.3), reassembly
of fragmented messages (5.4), answering pings and the closing handshake (5.5.1, 7). The
rules of control frames (5.5: never fragmented, at most 125 bytes) are the spec's
``require:``: the generated codec refuses to encode or decode a frame that breaks them.

    async with await WebSocketClient.connect("127.0.0.1", 8765) as ws:
        await ws.send_text("hello")
        message = await ws.receive()          # Message(opcode=Opcode.TEXT, data=b"hello")
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType

from protoframe.runtime.errors import ConnectionClosed
from protoframe.runtime.io.connection import Connection
from websocket_app.proto.websocket.frames import (
    Accepted,
    CloseBody,
    Frame,
    Opcode,
    StreamDecoder,
    Upgrade,
)

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455 1.3
NORMAL_CLOSURE = 1000  # RFC 6455 7.4.1

# What crosses the connection: the handshake's two messages, then frames.
WireMessage = Frame | Accepted | Upgrade


class WebSocketError(Exception):
    """The server broke the protocol: a failed handshake or a frame that RFC 6455 forbids."""


@dataclass(frozen=True)
class Message:
    """A whole data message: the opcode of its first frame (TEXT or BINARY) and its payload,
    the fragments joined."""

    opcode: Opcode
    data: bytes

    @property
    def text(self) -> str:
        return self.data.decode()


@dataclass
class Wire:
    """What crossed the socket, recorded at the transport: every write and every read."""

    written: list[bytes] = field(default_factory=list)
    read: list[bytes] = field(default_factory=list)


def accept_for(key: str) -> str:
    """The Sec-WebSocket-Accept a server must answer ``key`` with (RFC 6455 4.2.2)."""
    return base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()


def header_lines(headers: str) -> dict[str, str]:
    """The header lines of a handshake's ``headers`` field, by lower-case name."""
    found: dict[str, str] = {}
    for line in headers.split("\r\n"):
        name, sep, value = line.partition(":")
        if sep:
            found[name.strip().lower()] = value.strip()
    return found


class _Protocol:
    """The sans-IO side: the generated decoder and encoders behind ``Connection``."""

    def __init__(self, max_frame_size: int) -> None:
        self.decoder = StreamDecoder(max_frame_size, to_server=False)

    def receive_data(self, data: bytes) -> Sequence[WireMessage]:
        return self.decoder.feed(data)

    def send(self, message: WireMessage) -> bytes:
        return message.encode()


class _Recorded(Connection[WireMessage]):
    """A connection that records what its transport writes and what it reads."""

    def __init__(self, protocol: _Protocol, wire: Wire) -> None:
        super().__init__(protocol, keepalive_interval=None, name="websocket")
        self.wire = wire

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        write = transport.write
        wire = self.wire

        def recorded(data: bytes | bytearray | memoryview) -> None:
            wire.written.append(bytes(data))
            write(data)

        transport.write = recorded  # type: ignore[method-assign]
        super().connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self.wire.read.append(bytes(data))
        super().data_received(data)


class WebSocketClient:
    """One client connection; create it with ``connect``."""

    def __init__(self, connection: Connection[WireMessage], protocol: _Protocol,
                 inbox: asyncio.Queue[WireMessage | ConnectionClosed]) -> None:
        self._connection = connection
        self._protocol = protocol
        self._inbox = inbox
        self.closed_with: CloseBody | None = None  # the server's close, once it came
        self.accepted: Accepted | None = None

    @classmethod
    async def connect(cls, host: str, port: int, target: str = "/", *,
                      timeout: float = 10.0, wire: Wire | None = None,
                      max_frame_size: int = 16 << 20) -> WebSocketClient:
        """Open a TCP connection and make the opening handshake; raises ``WebSocketError``
        when the server does not accept it as RFC 6455 4.1 says it must (``wire``, if
        given, records every byte written and read)."""
        protocol = _Protocol(max_frame_size)
        inbox: asyncio.Queue[WireMessage | ConnectionClosed] = asyncio.Queue()
        conn = _Recorded(protocol, wire if wire is not None else Wire())
        conn.on_frame = inbox.put_nowait
        conn.on_close(inbox.put_nowait)
        await conn.connect(host, port, timeout=timeout)
        client = cls(conn, protocol, inbox)
        key = base64.b64encode(secrets.token_bytes(16)).decode()
        conn.write(Upgrade(target=target, headers="\r\n".join([
            f"Host: {host}:{port}", "Upgrade: websocket", "Connection: Upgrade",
            f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13"])))
        answer = await asyncio.wait_for(client._next(), timeout)
        if not isinstance(answer, Accepted) or answer.status != "101":
            conn.close()
            raise WebSocketError(f"the server did not switch protocols: {answer!r}")
        headers = header_lines(answer.headers)
        if headers.get("upgrade", "").lower() != "websocket" or \
                headers.get("sec-websocket-accept") != accept_for(key):
            conn.close()
            raise WebSocketError(f"the server's handshake does not accept the key: {headers}")
        client.accepted = answer
        return client

    async def __aenter__(self) -> WebSocketClient:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self.closed_with is None and self._connection.is_open:
            await self.close()
        self._connection.close()

    async def _next(self) -> WireMessage:
        got = await self._inbox.get()
        if isinstance(got, ConnectionClosed):
            raise got
        return got

    async def _send(self, opcode: Opcode, payload: bytes, fin: bool = True) -> None:
        # RFC 6455 5.3: a fresh, unpredictable key for every frame a client sends.
        key = int.from_bytes(secrets.token_bytes(4), "big")
        self._connection.write(Frame(fin=fin, opcode=opcode, masking_key=key, payload=payload))
        await self._connection.drain()

    async def send_text(self, text: str) -> None:
        await self._send(Opcode.TEXT, text.encode())

    async def send_binary(self, data: bytes) -> None:
        await self._send(Opcode.BINARY, data)

    async def send_fragments(self, opcode: Opcode, parts: Sequence[bytes]) -> None:
        """One message in ``len(parts)`` frames (RFC 6455 5.4): the first with ``opcode``,
        the others continuations, FIN on the last only."""
        if opcode not in (Opcode.TEXT, Opcode.BINARY) or not parts:
            raise ValueError("a fragmented message is TEXT or BINARY, in one part or more")
        for i, part in enumerate(parts):
            await self._send(opcode if i == 0 else Opcode.CONTINUATION, part,
                             fin=i == len(parts) - 1)

    async def ping(self, payload: bytes = b"", timeout: float = 10.0) -> bytes:
        """Send a ping and return the payload of the pong that answers it (5.5.2, 5.5.3);
        call it between messages (a data frame arriving first is a ``WebSocketError``)."""
        await self._send(Opcode.PING, payload)  # over 125 bytes: RequirementUnmetError
        async with asyncio.timeout(timeout):
            frame = await self._read_frame()
        if frame.opcode != Opcode.PONG:
            raise WebSocketError(f"a frame other than a pong answered a ping: {frame}")
        return frame.payload

    async def _read_frame(self) -> Frame:
        """The next frame (control frames' rules are the spec's ``require:``, checked by the
        generated decoder); pings are answered here."""
        while True:
            got = await self._next()
            if not isinstance(got, Frame):
                raise WebSocketError(f"a second handshake message: {got!r}")
            if got.masking_key is not None:
                raise WebSocketError("a server frame is masked (RFC 6455 5.1)")
            if got.opcode == Opcode.PING:  # 5.5.2: answered with its payload
                await self._send(Opcode.PONG, got.payload)
                continue
            return got

    async def receive(self, timeout: float = 30.0) -> Message:
        """The next whole data message, its fragments joined (an unsolicited pong is skipped,
        as 5.5.3 allows); raises ``ConnectionClosed`` when the server closes instead."""
        parts: list[bytes] = []
        first: Opcode | None = None
        async with asyncio.timeout(timeout):
            while True:
                frame = await self._read_frame()
                if frame.opcode == Opcode.PONG:
                    continue
                if frame.opcode == Opcode.CLOSE:
                    self.closed_with = self._close_body(frame)
                    raise ConnectionClosed(f"closed by the server: {self.closed_with}")
                if (frame.opcode == Opcode.CONTINUATION) != (first is not None):
                    raise WebSocketError(f"a frame out of its message's order (5.4): {frame}")
                first = first if first is not None else frame.opcode
                parts.append(frame.payload)
                if frame.fin:
                    return Message(first, b"".join(parts))

    @staticmethod
    def _close_body(frame: Frame) -> CloseBody:
        if not frame.payload:
            return CloseBody(code=1005, reason="")  # 7.4.1: no status code was present
        return CloseBody.decode(frame.payload)

    async def close(self, code: int = NORMAL_CLOSURE, reason: str = "",
                    timeout: float = 10.0) -> CloseBody:
        """The closing handshake (RFC 6455 7.1.2): send a Close with ``code`` and ``reason``,
        read until the server's Close, and return its status code and reason."""
        await self._send(Opcode.CLOSE, CloseBody(code=code, reason=reason).encode())
        async with asyncio.timeout(timeout):
            while self.closed_with is None:
                frame = await self._read_frame()
                if frame.opcode == Opcode.CLOSE:
                    self.closed_with = self._close_body(frame)
            # 7.1.1: the server closes the TCP connection first.
            await self._connection.wait_closed()
        return self.closed_with

    @property
    def decoder(self) -> StreamDecoder:
        """The generated decoder this client reads with (``buffered``: bytes not yet used)."""
        return self._protocol.decoder
