"""The MariaDB/MySQL example (examples/mariadb, issue #16's proof): its spec against packets
packed by hand from the public protocol documentation, hypothesis round trips of its main
layouts, its generated package in sync with the generator and type-checked, and its client
against Debian's mariadb-server (tests/support/mariadb_server.py), with the transport
recorded to show that every byte written came from generated ``encode`` and every byte read
went through the generated ``StreamDecoder`` and a generated struct's ``decode``.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import struct
import subprocess
import sys
from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Any, TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protoframe.runtime.codec.compiled import available, is_compiled, pure_python
from protoframe.runtime.errors import (
    BadMagicError,
    FrameTooLargeError,
    MalformedLengthEncodedError,
    MissingTerminatorError,
    SizeMismatchError,
    UnexpectedNullError,
)
from protoframe.runtime.io.connection import Connection
from tests.support.codec_modes import FIXTURE_PER_TEST
from tests.support.mariadb_server import MariaDB
from tests.support.paths import ROOT

EXAMPLE = ROOT / "examples" / "mariadb"
if str(EXAMPLE / "src") not in sys.path:  # the example's own package, as its project has it
    sys.path.insert(0, str(EXAMPLE / "src"))

from mariadb_example import client as mdb  # noqa: E402
from mariadb_example.proto.mariadb import frames  # noqa: E402

T = TypeVar("T")
TIMEOUT = 30.0


def header(payload: bytes, sequence_id: int) -> bytes:
    """A packet: the payload's length in 3 little-endian bytes, the sequence id, the payload."""
    return struct.pack("<I", len(payload))[:3] + bytes([sequence_id]) + payload


def lenenc(value: bytes) -> bytes:
    """A length-encoded string whose length is below 251 (one length byte)."""
    assert len(value) < 0xFB
    return bytes([len(value)]) + value


SEED_1, SEED_2 = b"abcdefgh", b"ijklmnopqrst"
GREETING_PAYLOAD = (
    b"\x0a" + b"5.5.5-10.11.6-MariaDB\x00" + struct.pack("<I", 42) + SEED_1 + b"\x00"
    + struct.pack("<HBHHB", 0xF7FE, 45, 0x0002, 0x81FF, 21) + bytes(6)
    + struct.pack("<I", 0x1D) + SEED_2 + b"\x00" + b"mysql_native_password\x00")


# ---- the spec against hand-packed packets ------------------------------------------------


def test_the_greeting_is_the_streams_first_message() -> None:
    stream = header(GREETING_PAYLOAD, 0) + header(b"\x00\x00\x00\x02\x00\x00", 2)
    decoder = frames.StreamDecoder()
    received: list[frames.Packet | frames.Greeting] = []
    for index in range(len(stream)):  # one byte at a time
        received += decoder.feed(stream[index:index + 1])
    greeting, ok = received
    assert isinstance(greeting, frames.Greeting)
    assert greeting.server_version == "5.5.5-10.11.6-MariaDB"
    assert greeting.connection_id == 42
    assert greeting.auth_plugin_data_1 == SEED_1
    assert bytes(greeting.auth_plugin_data_2 or []) == SEED_2 + b"\x00"
    assert (greeting.capabilities_lower, greeting.capabilities_upper) == (0xF7FE, 0x81FF)
    assert greeting.mariadb_capabilities == 0x1D
    assert greeting.auth_plugin_name == "mysql_native_password"
    assert greeting.encode() == header(GREETING_PAYLOAD, 0)
    assert ok == frames.Packet(sequence_id=2, payload=b"\x00\x00\x00\x02\x00\x00")
    assert decoder.buffered == 0


def test_a_greeting_of_another_protocol_version_is_refused() -> None:
    with pytest.raises(BadMagicError, match="protocol_version"):
        frames.Greeting.decode(header(b"\x09" + GREETING_PAYLOAD[1:], 0))
    with pytest.raises(MissingTerminatorError, match="server_version"):
        frames.Greeting.decode(header(b"\x0a5.5.5-no-terminator", 0))


def test_the_handshake_response_is_what_the_documentation_packs() -> None:
    scramble = bytes(range(20))
    response = frames.HandshakeResponse(
        capabilities=mdb.CAPABILITIES | mdb.CLIENT_CONNECT_WITH_DB, max_packet_size=1 << 24,
        character_set=45, mariadb_capabilities=0, username="protoframe",
        auth_response=scramble, database="db", auth_plugin_name="mysql_native_password")
    expected = (struct.pack("<IIB", mdb.CAPABILITIES | 8, 1 << 24, 45) + bytes(23)
                + b"protoframe\x00" + lenenc(scramble) + b"db\x00" + b"mysql_native_password\x00")
    assert response.encode() == expected
    assert frames.HandshakeResponse.decode(expected) == response
    without_db = (struct.pack("<IIB", mdb.CAPABILITIES, 1 << 24, 45) + bytes(23) + b"u\x00"
                  + b"\x00" + b"mysql_native_password\x00")
    assert frames.HandshakeResponse.decode(without_db).database is None


def test_commands_are_their_command_bytes() -> None:
    assert frames.ComQuery(query="SELECT 1").encode() == b"\x03SELECT 1"
    assert frames.ComPing().encode() == b"\x0e"
    assert frames.ComQuit().encode() == b"\x01"
    assert frames.Packet(sequence_id=0, payload=b"\x0e").encode() == b"\x01\x00\x00\x00\x0e"


def test_a_query_answer_is_told_by_its_first_byte() -> None:
    ok = b"\x00" + b"\xfc\x2c\x01" + b"\x07" + struct.pack("<HH", 0x0002, 1)
    answer = frames.QueryResponse.decode(ok + lenenc(b"Records: 300"))
    assert answer.ok == frames.OkPacket(affected_rows=300, last_insert_id=7, status_flags=2,
                                        warnings=1, info="Records: 300")
    assert frames.QueryResponse.decode(ok).ok == frames.OkPacket(
        affected_rows=300, last_insert_id=7, status_flags=2, warnings=1)
    err = b"\xff" + struct.pack("<H", 1064) + b"#42000" + b"You have an error"
    error = frames.QueryResponse.decode(err).error
    assert error is not None
    assert (error.error_code, error.sql_state, error.error_message) == (
        1064, "42000", "You have an error")
    assert frames.QueryResponse.decode(b"\x03") == frames.QueryResponse(column_count=3)
    assert frames.QueryResponse.decode(b"\xfc\x00\x01") == frames.QueryResponse(
        column_count=256)
    with pytest.raises(BadMagicError, match="sql_state_marker"):
        frames.QueryResponse.decode(b"\xff" + struct.pack("<H", 1064) + b"!42000" + b"x")


def test_a_row_starting_like_an_ok_packet_is_read_as_a_row_after_the_columns() -> None:
    """The reason the frame leaves its payload to the client's state: ``'' NULL 'abc'`` starts
    with 0x00, which after COM_QUERY is an OK packet's mark."""
    row = b"\x00" + b"\xfb" + lenenc(b"abc")
    assert frames.RowPacket.decode(row) == frames.RowPacket(values=[
        frames.Value(value=b""), frames.Value(value=None), frames.Value(value=b"abc")])
    with pytest.raises(UnexpectedNullError):  # as an OK packet: affected_rows cannot be NULL
        frames.QueryResponse.decode(row)
    eof = b"\xfe" + struct.pack("<HH", 0, 0x0022)
    assert frames.RowPacket.decode(eof) == frames.RowPacket(
        end=frames.EofPacket(warnings=0, status_flags=0x22))
    with pytest.raises(MalformedLengthEncodedError):
        frames.RowPacket.decode(b"\x01a" + b"\xff")
    with pytest.raises(SizeMismatchError):
        frames.EofPacket.decode(eof + b"\x00")


def test_an_error_inside_the_rows_and_an_auth_switch_are_told_by_their_first_byte() -> None:
    err = b"\xff" + struct.pack("<H", 1317) + b"#70100" + b"Query execution was interrupted"
    row = frames.RowPacket.decode(err)
    assert row.error is not None and row.values is None and row.end is None
    assert (row.error.error_code, row.error.sql_state) == (1317, "70100")
    switch = b"\xfe" + b"mysql_native_password\x00" + bytes(range(1, 21)) + b"\x00"
    result = frames.AuthResult.decode(switch)
    assert result.switch == frames.AuthSwitchRequest(
        plugin_name="mysql_native_password", plugin_data=bytes(range(1, 21)) + b"\x00")
    assert result.encode() == switch
    with pytest.raises(SizeMismatchError):  # none of OK, ERR and the switch
        frames.AuthResult.decode(b"\x01")


def test_a_column_definition_is_what_the_documentation_packs() -> None:
    data = (lenenc(b"def") + lenenc(b"protoframe") + lenenc(b"t") + lenenc(b"t")
            + lenenc(b"n") + lenenc(b"name") + b"\x0c"
            + struct.pack("<HIBHB", 45, 80, 253, 0, 0) + b"\x00\x00")
    column = frames.ColumnDefinition.decode(data)
    assert (column.schema, column.table, column.name, column.org_name) == (
        "protoframe", "t", "n", "name")
    assert (column.character_set, column.column_length, column.column_type) == (45, 80, 253)
    assert column.encode() == data
    with pytest.raises(BadMagicError, match="catalog"):
        frames.ColumnDefinition.decode(lenenc(b"abc") + data[4:])


def test_a_packet_over_the_limit_is_refused_from_its_header() -> None:
    with pytest.raises(FrameTooLargeError):
        frames.StreamDecoder(max_frame_size=100, handshake=False).feed(b"\xff\x00\x00\x00")


def test_the_scramble_is_what_the_server_checks() -> None:
    """The server's side of mysql_native_password: SHA1(reply XOR SHA1(seed + stored)) must
    be the stored SHA1(SHA1(password))."""
    seed = SEED_1 + SEED_2
    reply = mdb.native_password_scramble("secret", seed)
    stored = hashlib.sha1(hashlib.sha1(b"secret").digest()).digest()
    mask = hashlib.sha1(seed + stored).digest()
    stage1 = bytes(a ^ b for a, b in zip(reply, mask, strict=True))
    assert hashlib.sha1(stage1).digest() == stored
    assert mdb.native_password_scramble("", seed) == b""


COMPILED = {frames.AuthSwitchResponse, frames.EofPacket, frames.ComPing, frames.ComQuit,
            frames.Packet, frames.Value, frames.ErrPacket, frames.ComQuery, frames.RowPacket,
            frames.Greeting}


def test_the_compiled_and_python_codecs_agree() -> None:
    """The fixed layouts, the packet (a u24 size), a row and its values (nullable lenenc
    strings), ERR, COM_QUERY and the greeting (an adjusted size, a count by expression) take
    the compiled codec where it is built. Both read and write the same bytes."""
    values: list[Any] = [
        frames.EofPacket(warnings=1, status_flags=0x22), frames.ComPing(), frames.ComQuit(),
        frames.AuthSwitchResponse(data=b"x" * 20), frames.ComQuery(query="SELECT 1"),
        frames.Greeting.decode(header(GREETING_PAYLOAD, 0)),
        frames.RowPacket(values=[frames.Value(value=b""), frames.Value(value=None)]),
        frames.Packet(sequence_id=3, payload=b"\x03SELECT 1"), frames.Value(value=b"x" * 300),
        frames.Value(value=None)]
    for value in values:
        assert is_compiled(type(value)) == (available() and type(value) in COMPILED)
        data = value.encode()
        with pure_python():
            assert value.encode() == data
            assert type(value).decode(data) == value
        assert type(value).decode(data) == value


# ---- round trips -------------------------------------------------------------------------

u16 = st.integers(0, 0xFFFF)
lenenc_int = st.integers(0, 2**64 - 1)
text = st.text(max_size=40)


@settings(suppress_health_check=FIXTURE_PER_TEST)
@given(st.integers(0, 255), st.binary(max_size=600), st.integers(1, 40))
def test_packets_round_trip_through_the_stream(either_codec: str, sequence_id: int,
                                               payload: bytes, step: int) -> None:
    packet = frames.Packet(sequence_id=sequence_id, payload=payload)
    data = packet.encode()
    assert data == header(payload, sequence_id)
    decoder = frames.StreamDecoder(handshake=False)
    got: list[frames.Packet | frames.Greeting] = []
    for start in range(0, len(data) * 2, step):
        got += decoder.feed((data + data)[start:start + step])
    assert got == [packet, packet]


@settings(suppress_health_check=FIXTURE_PER_TEST)
@given(lenenc_int, lenenc_int, u16, u16, text)
def test_ok_packets_round_trip(either_codec: str, affected: int, last_id: int, status: int,
                               warnings: int, info: str) -> None:
    ok = frames.OkPacket(affected_rows=affected, last_insert_id=last_id, status_flags=status,
                         warnings=warnings, info=info)
    assert frames.QueryResponse.decode(ok.encode()) == frames.QueryResponse(ok=ok)


@settings(suppress_health_check=FIXTURE_PER_TEST)
@given(st.lists(st.one_of(st.none(), st.binary(max_size=300)), max_size=8))
def test_rows_round_trip(either_codec: str, values: list[bytes | None]) -> None:
    row = frames.RowPacket(values=[frames.Value(value=value) for value in values])
    data = row.encode()
    decoded = frames.RowPacket.decode(data)
    if values:
        assert decoded == row
    else:  # an empty row has no bytes: decoding gives the empty list
        assert data == b"" and decoded.values == []


@settings(suppress_health_check=FIXTURE_PER_TEST)
@given(text, text, text, st.integers(0, 0xFFFF), st.integers(0, 2**32 - 1), st.integers(0, 255))
def test_column_definitions_round_trip(either_codec: str, schema: str, table: str, name: str,
                                       charset: int, length: int, column_type: int) -> None:
    column = frames.ColumnDefinition(schema=schema, table=table, org_table=table, name=name,
                                     org_name=name, character_set=charset,
                                     column_length=length, column_type=column_type, flags=0,
                                     decimals=0)
    assert frames.ColumnDefinition.decode(column.encode()) == column


# ---- the generated package stays in sync and type-checks ----------------------------------

PROTOFRAME = os.path.join(os.path.dirname(sys.executable), "protoframe")


def test_the_generated_package_is_up_to_date() -> None:
    """`protoframe check` in the example's folder, with the installed command, as its users
    run it: the checked-in package is what this generator writes from the spec."""
    result = subprocess.run([PROTOFRAME, "check"], cwd=EXAMPLE, capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "up to date" in result.stdout + result.stderr


@pytest.mark.slow
def test_the_example_type_checks_with_its_own_settings() -> None:
    """mypy --strict with the example's pyproject.toml (its src, the generated package in
    it), finding protoframe in this repository."""
    result = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental"], cwd=EXAMPLE,
                            capture_output=True, text=True, timeout=600, check=False,
                            env={**os.environ, "MYPYPATH": str(ROOT)})
    assert result.returncode == 0, result.stdout + result.stderr


# ---- against the real server ---------------------------------------------------------------


class RecordingConnection(Connection[mdb.Received]):
    """A connection that keeps every byte it hands the transport and every byte it reads."""

    def __init__(self, protocol: mdb.PacketWire,
                 on_frame: Callable[[mdb.Received], None]) -> None:
        super().__init__(protocol, on_frame, keepalive_interval=None)
        self.written = bytearray()
        self.read = bytearray()

    def connection_made(self, transport: Any) -> None:
        write = transport.write

        def recording(data: bytes) -> None:
            self.written += data
            write(data)

        transport.write = recording
        super().connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self.read += data
        super().data_received(data)


def assert_generated_wire(client: mdb.MariaDBClient) -> None:
    """Every byte written is a generated encoding; every byte read was cut by the generated
    stream decoder into messages that encode back to exactly those bytes, and every packet's
    payload was decoded whole by a generated struct that encodes back to it."""
    connection = client.connection
    assert isinstance(connection, RecordingConnection)
    wire = client.wire
    assert bytes(connection.written) == b"".join(wire.sent)
    for data in wire.sent:
        assert frames.StreamDecoder(handshake=False).feed(data)[0].encode() == data
    assert wire.decoder.buffered == 0
    assert bytes(connection.read) == b"".join(message.encode() for message in wire.received)
    packets = [m.payload for m in wire.received if isinstance(m, frames.Packet)]
    assert packets == [payload for payload, _ in wire.payloads]
    for payload, value in wire.payloads:
        assert value.encode() == payload  # type: ignore[attr-defined]
    assert isinstance(wire.received[0], frames.Greeting)


async def connect(server: MariaDB, password: str | None = None) -> mdb.MariaDBClient:
    return await mdb.MariaDBClient.connect(
        server.host, server.port, server.user,
        server.password if password is None else password, server.database, timeout=TIMEOUT,
        connection_factory=RecordingConnection)


def run(session: Callable[[mdb.MariaDBClient], Awaitable[T]], server: MariaDB) -> T:
    async def main() -> T:
        client = await connect(server)
        try:
            result = await session(client)
        finally:
            await client.close()
        assert client.connection.closed is not None  # the server closed it on COM_QUIT
        assert_generated_wire(client)
        return result

    return asyncio.run(asyncio.wait_for(main(), 2 * TIMEOUT))


@pytest.mark.interop
def test_connect_authenticate_and_ping(mariadb_server: MariaDB) -> None:
    async def session(client: mdb.MariaDBClient) -> None:
        assert client.greeting is not None
        assert "MariaDB" in client.greeting.server_version
        await client.ping()
        await client.ping()

    run(session, mariadb_server)


@pytest.mark.interop
def test_a_wrong_password_gets_an_error_with_its_sqlstate(mariadb_server: MariaDB) -> None:
    async def main() -> None:
        with pytest.raises(mdb.MariaDBError) as failed:
            await connect(mariadb_server, password="not-" + mariadb_server.password)
        assert (failed.value.error_code, failed.value.sql_state) == (1045, "28000")

    asyncio.run(asyncio.wait_for(main(), 2 * TIMEOUT))


@pytest.mark.interop
def test_a_select_returns_rows_with_nulls_and_several_types(mariadb_server: MariaDB) -> None:
    async def session(client: mdb.MariaDBClient) -> mdb.ResultSet | mdb.OkResult:
        await client.query("DROP TABLE IF EXISTS typed_rows")
        await client.query("CREATE TABLE typed_rows (id INT PRIMARY KEY, name VARCHAR(40), "
                           "price DECIMAL(10, 2), ratio DOUBLE, raw VARBINARY(8), born DATE)")
        await client.query("INSERT INTO typed_rows VALUES "
                           "(1, 'ada', 12.50, 0.25, x'00ff', '1815-12-10'), "
                           "(2, NULL, NULL, NULL, NULL, NULL), "
                           "(3, '', -1.00, 1e300, x'', '2026-12-01'), "
                           "(4, 'zoë', 0.00, -2.5, 'ab', NULL)")
        return await client.query("SELECT name, id, price, ratio, raw, born FROM typed_rows "
                                  "ORDER BY id")

    result = run(session, mariadb_server)
    assert isinstance(result, mdb.ResultSet)
    assert [c.name for c in result.columns] == ["name", "id", "price", "ratio", "raw", "born"]
    assert result.rows == [
        ("ada", 1, Decimal("12.50"), 0.25, b"\x00\xff", "1815-12-10"),
        (None, 2, None, None, None, None),
        ("", 3, Decimal("-1.00"), 1e300, b"", "2026-12-01"),  # a row whose first byte is 0x00
        ("zoë", 4, Decimal("0.00"), -2.5, b"ab", None),
    ]


@pytest.mark.interop
def test_errors_carry_their_sqlstate_and_the_connection_goes_on(
        mariadb_server: MariaDB) -> None:
    async def session(client: mdb.MariaDBClient) -> list[tuple[int, str]]:
        errors = []
        for sql in ("SELEC 1", "SELECT * FROM no_such_table"):
            with pytest.raises(mdb.MariaDBError) as failed:
                await client.query(sql)
            errors.append((failed.value.error_code, failed.value.sql_state))
        after = await client.query("SELECT 1 AS one")
        assert isinstance(after, mdb.ResultSet) and after.rows == [(1,)]
        return errors

    assert run(session, mariadb_server) == [(1064, "42000"), (1146, "42S02")]


@pytest.mark.interop
def test_statements_without_rows_answer_ok_with_affected_rows(mariadb_server: MariaDB) -> None:
    async def session(client: mdb.MariaDBClient) -> list[mdb.ResultSet | mdb.OkResult]:
        return [await client.query("DROP TABLE IF EXISTS counted"),
                await client.query("CREATE TABLE counted (id INT AUTO_INCREMENT PRIMARY KEY, "
                                   "n INT)"),
                await client.query("INSERT INTO counted (n) VALUES (1), (2), (3)"),
                await client.query("UPDATE counted SET n = n + 1 WHERE n >= 2")]

    _, created, inserted, updated = run(session, mariadb_server)
    assert isinstance(created, mdb.OkResult) and created.affected_rows == 0
    assert isinstance(inserted, mdb.OkResult)
    assert (inserted.affected_rows, inserted.last_insert_id) == (3, 1)
    assert inserted.info == "Records: 3  Duplicates: 0  Warnings: 0"
    assert isinstance(updated, mdb.OkResult) and updated.affected_rows == 2
