"""A small asyncio MariaDB/MySQL client on the generated codecs and protoframe's runtime.

Every byte it writes is a generated ``Packet``'s ``encode()``, whose payload is a generated
struct's ``encode()``; every byte it reads goes through the generated ``StreamDecoder``
(the greeting first, then packets), and every payload is decoded by the generated struct the
conversation's state calls for:

=====================================  =================================================
state                                  payload decoded as
=====================================  =================================================
after connecting                       ``Greeting`` (the stream decoder's first message)
after the handshake response           ``AuthResult`` (OK, ERR or an auth switch)
after COM_QUERY                        ``QueryResponse`` (OK, ERR or a column count)
the column count's N packets           ``ColumnDefinition``, then one ``EofPacket``
after the column definitions           ``RowPacket`` (a row, ERR, or the ending EOF)
after COM_PING                         ``OkPacket``
=====================================  =================================================

The state, the sequence ids, the capability choice, the password scramble and turning text
values into Python values are this module's; no framing is. The connection is
``protoframe.runtime.io.connection.Connection`` driving ``PacketWire``, a sans-IO object
around the generated decoder and encoders that also keeps what it encoded and decoded, so a
test can check the wire against the generated code.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Protocol, TypeVar

from mariadb_example.proto.mariadb import frames
from protoframe.runtime.errors import ConnectionClosed
from protoframe.runtime.io.connection import Connection

__all__ = [
    "CAPABILITIES",
    "Column",
    "MariaDBClient",
    "MariaDBError",
    "OkResult",
    "PacketWire",
    "ResultSet",
    "native_password_scramble",
]

# Capability flags (the public protocol documentation's CLIENT_* values).
CLIENT_MYSQL = 1  # MySQL's CLIENT_LONG_PASSWORD: set, so no MariaDB extended capabilities
CLIENT_LONG_FLAG = 1 << 2
CLIENT_CONNECT_WITH_DB = 1 << 3
CLIENT_PROTOCOL_41 = 1 << 9
CLIENT_TRANSACTIONS = 1 << 13
CLIENT_SECURE_CONNECTION = 1 << 15
CLIENT_PLUGIN_AUTH = 1 << 19
CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA = 1 << 21
CLIENT_DEPRECATE_EOF = 1 << 24

#: What the client asks for. Not CLIENT_DEPRECATE_EOF: the column definitions and the rows
#: then each end with a 5-byte EOF packet (``EofPacket``), never with an OK packet marked
#: 0xfe, so a row packet is told from its end by its first byte (see ``RowPacket``). Not
#: CLIENT_SESSION_TRACK, CLIENT_MULTI_RESULTS or CLIENT_LOCAL_FILES: one statement, one answer.
CAPABILITIES = (CLIENT_MYSQL | CLIENT_LONG_FLAG | CLIENT_PROTOCOL_41 | CLIENT_TRANSACTIONS
                | CLIENT_SECURE_CONNECTION | CLIENT_PLUGIN_AUTH
                | CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA)
#: What the server must offer for this client to work.
REQUIRED = CLIENT_PROTOCOL_41 | CLIENT_SECURE_CONNECTION | CLIENT_PLUGIN_AUTH \
    | CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA

NATIVE_PASSWORD = "mysql_native_password"
UTF8MB4_GENERAL_CI = 45
BINARY_CHARSET = 63
MAX_PACKET_SIZE = 1 << 24

INTEGER_TYPES = frozenset({1, 2, 3, 8, 9, 13})  # TINY, SHORT, LONG, LONGLONG, INT24, YEAR
FLOAT_TYPES = frozenset({4, 5})  # FLOAT, DOUBLE
DECIMAL_TYPES = frozenset({0, 246})  # DECIMAL, NEWDECIMAL
# VARCHAR, BIT, ENUM, SET, the BLOBs, VAR_STRING, STRING: bytes when their charset is binary.
STRING_TYPES = frozenset({15, 16, 247, 248, 249, 250, 251, 252, 253, 254})

Received = frames.Packet | frames.Greeting
T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class MariaDBError(Exception):
    """An ERR packet: the server's error number, SQLSTATE and message."""

    def __init__(self, error: frames.ErrPacket) -> None:
        super().__init__(f"({error.error_code}, {error.sql_state}) {error.error_message}")
        self.error_code = error.error_code
        self.sql_state = error.sql_state
        self.message = error.error_message


class Decodable(Protocol[T_co]):
    """A generated struct class: ``decode(payload)`` takes the whole payload."""

    def decode(self, data: bytes) -> T_co: ...


@dataclass
class PacketWire:
    """The sans-IO protocol object ``Connection`` drives: bytes in through the generated
    ``StreamDecoder``, packets out through the generated ``encode``. It keeps every message
    encoded (``sent``) and decoded (``received``) and every payload with the struct decoded
    from it (``payloads``), so that a test can compare them with the bytes on the wire."""

    decoder: frames.StreamDecoder = field(default_factory=frames.StreamDecoder)
    sent: list[bytes] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)
    payloads: list[tuple[bytes, object]] = field(default_factory=list)

    def receive_data(self, data: bytes) -> Sequence[Received]:
        messages = self.decoder.feed(data)
        self.received.extend(messages)
        return messages

    def send(self, frame: Received) -> bytes:
        data = frame.encode()
        self.sent.append(data)
        return data


@dataclass(frozen=True)
class Column:
    """A result set's column: its name and what its values are."""

    name: str
    column_type: int
    character_set: int
    definition: frames.ColumnDefinition


Row = tuple[object, ...]


@dataclass(frozen=True)
class ResultSet:
    """The answer to a query that returns rows."""

    columns: list[Column]
    rows: list[Row]
    warnings: int
    status_flags: int


@dataclass(frozen=True)
class OkResult:
    """The answer to a statement that returns no rows."""

    affected_rows: int
    last_insert_id: int
    warnings: int
    status_flags: int
    info: str


def native_password_scramble(password: str, seed: bytes) -> bytes:
    """mysql_native_password's answer: SHA1(password) XOR SHA1(seed + SHA1(SHA1(password)));
    empty for an empty password."""
    if not password:
        return b""
    stage1 = hashlib.sha1(password.encode()).digest()
    stage2 = hashlib.sha1(stage1).digest()
    mask = hashlib.sha1(seed + stage2).digest()
    return bytes(a ^ b for a, b in zip(stage1, mask, strict=True))


def convert(value: bytes | None, column: Column) -> object:
    """A text-protocol value as Python: int, float, Decimal, bytes (a string column of the
    binary character set: BINARY, VARBINARY, BLOB) or str (others, dates and times as text)."""
    if value is None:
        return None
    if column.column_type in INTEGER_TYPES:
        return int(value)
    if column.column_type in FLOAT_TYPES:
        return float(value)
    if column.column_type in DECIMAL_TYPES:
        return Decimal(value.decode("ascii"))
    if column.column_type in STRING_TYPES and column.character_set == BINARY_CHARSET:
        return value
    return value.decode("utf-8")


@dataclass(frozen=True)
class _Closed:
    """Put in the inbox when the connection ends."""

    reason: ConnectionClosed


ConnectionFactory = Callable[[PacketWire, Callable[[Received], None]], Connection[Received]]


class MariaDBClient:
    """One authenticated connection; ``connect`` makes it. Not for concurrent use: one
    command at a time, as the protocol has it."""

    def __init__(self, connection: Connection[Received], wire: PacketWire,
                 inbox: asyncio.Queue[Received | _Closed], timeout: float) -> None:
        self.connection = connection
        self.wire = wire
        self.timeout = timeout
        self.greeting: frames.Greeting | None = None
        self._inbox = inbox
        self._sequence = 0

    @classmethod
    async def connect(cls, host: str, port: int, user: str, password: str,
                      database: str | None = None, *, timeout: float = 10.0,
                      connection_factory: ConnectionFactory | None = None) -> MariaDBClient:
        """Connect, read the greeting, authenticate with mysql_native_password; raise
        ``MariaDBError`` when the server refuses, ``ConnectionClosed`` when it goes away."""
        wire = PacketWire()
        inbox: asyncio.Queue[Received | _Closed] = asyncio.Queue()
        factory = connection_factory or Connection
        connection = factory(wire, inbox.put_nowait)
        connection.on_close(lambda exc: inbox.put_nowait(_Closed(exc)))
        await connection.connect(host, port, timeout=timeout)
        client = cls(connection, wire, inbox, timeout)
        try:
            await client._authenticate(user, password, database)
        except BaseException:
            connection.abort()
            raise
        return client

    # ---- reading and writing ---------------------------------------------------------------

    async def _receive(self) -> Received:
        if self._inbox.empty():
            message = await asyncio.wait_for(self._inbox.get(), self.timeout)
        else:  # a result set's packets mostly have arrived already: no timer for each
            message = self._inbox.get_nowait()
        if isinstance(message, _Closed):
            raise message.reason
        return message

    async def _payload(self, layout: Decodable[T]) -> T:
        """The next packet's payload decoded as ``layout``, checking its sequence id."""
        packet = await self._receive()
        if not isinstance(packet, frames.Packet):
            raise ConnectionClosed("a second greeting from the server")
        if packet.sequence_id != self._sequence:
            raise ConnectionClosed(f"packet {packet.sequence_id} out of sequence: expected "
                                   f"{self._sequence}")
        self._sequence = (self._sequence + 1) & 0xFF
        value = layout.decode(packet.payload)
        self.wire.payloads.append((packet.payload, value))
        return value

    async def _send(self, payload: bytes, *, new_command: bool = False) -> None:
        if new_command:
            self._sequence = 0
        frame = frames.Packet(sequence_id=self._sequence, payload=payload)
        self._sequence = (self._sequence + 1) & 0xFF
        await self.connection.send_frame(frame)

    # ---- the handshake ---------------------------------------------------------------------

    async def _authenticate(self, user: str, password: str, database: str | None) -> None:
        greeting = await self._receive()
        if not isinstance(greeting, frames.Greeting):
            raise ConnectionClosed("the server did not start with its greeting")
        self.greeting = greeting
        offered = greeting.capabilities_lower | (greeting.capabilities_upper << 16)
        if offered & REQUIRED != REQUIRED:
            raise ConnectionClosed(f"the server lacks capabilities {REQUIRED & ~offered:#x}")
        seed = greeting.auth_plugin_data_1 + bytes(greeting.auth_plugin_data_2 or [])[:12]
        capabilities = CAPABILITIES | (CLIENT_CONNECT_WITH_DB if database is not None else 0)
        self._sequence = 1
        response = frames.HandshakeResponse(
            capabilities=capabilities & offered, max_packet_size=MAX_PACKET_SIZE,
            character_set=UTF8MB4_GENERAL_CI, mariadb_capabilities=0, username=user,
            auth_response=native_password_scramble(password, seed), database=database,
            auth_plugin_name=NATIVE_PASSWORD)
        await self._send(response.encode())
        result = await self._payload(frames.AuthResult)
        if result.switch is not None:
            if result.switch.plugin_name != NATIVE_PASSWORD:
                raise ConnectionClosed(f"the server asks for the {result.switch.plugin_name} "
                                       "authentication plugin, which this client lacks")
            answer = native_password_scramble(password, result.switch.plugin_data[:20])
            await self._send(frames.AuthSwitchResponse(data=answer).encode())
            result = await self._payload(frames.AuthResult)
        if result.error is not None:
            raise MariaDBError(result.error)
        if result.ok is None:
            raise ConnectionClosed("the server answered the authentication with neither OK "
                                   "nor ERR")

    # ---- commands --------------------------------------------------------------------------

    async def query(self, sql: str) -> ResultSet | OkResult:
        """COM_QUERY: the rows of a result set, or what a statement without rows did; raise
        ``MariaDBError`` for an ERR packet (at the start or in the middle of the rows)."""
        await self._send(frames.ComQuery(query=sql).encode(), new_command=True)
        first = await self._payload(frames.QueryResponse)
        if first.error is not None:
            raise MariaDBError(first.error)
        if first.ok is not None:
            ok = first.ok
            return OkResult(ok.affected_rows, ok.last_insert_id, ok.warnings, ok.status_flags,
                            ok.info or "")
        assert first.column_count is not None  # present whenever ok and error are not
        columns = []
        for _ in range(first.column_count):
            definition = await self._payload(frames.ColumnDefinition)
            columns.append(Column(definition.name, definition.column_type,
                                  definition.character_set, definition))
        await self._payload(frames.EofPacket)
        rows: list[Row] = []
        while True:
            packet = await self._payload(frames.RowPacket)
            if packet.error is not None:
                raise MariaDBError(packet.error)
            if packet.end is not None:
                return ResultSet(columns, rows, packet.end.warnings, packet.end.status_flags)
            values = packet.values or []
            if len(values) != len(columns):
                raise ConnectionClosed(f"a row of {len(values)} values for {len(columns)} "
                                       "columns")
            rows.append(tuple(convert(value.value, column)
                              for value, column in zip(values, columns, strict=True)))

    async def ping(self) -> None:
        """COM_PING, answered by OK."""
        await self._send(frames.ComPing().encode(), new_command=True)
        await self._payload(frames.OkPacket)

    async def close(self) -> None:
        """COM_QUIT, then wait for the server to close the connection."""
        if self.connection.is_open:
            await self._send(frames.ComQuit().encode(), new_command=True)
            try:
                await asyncio.wait_for(self.connection.wait_closed(), self.timeout)
            finally:
                self.connection.close()

