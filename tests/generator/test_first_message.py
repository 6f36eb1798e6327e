"""``first:``: a first message with a layout of its own, which the stream decoder returns
before any frame: PostgreSQL's StartupMessage (an Int32 length that counts itself, no type
byte), AMQP 0-9-1's protocol header ("AMQP" 0 0 9 1, a fixed 8 bytes) and a MySQL-style server
greeting, against bytes packed by hand from those protocols' documentation, byte by byte
through the stream, with bad first messages refused by their own errors, and the specs it is
refused in (with machines and interactions: test_first_machines.py)."""

from __future__ import annotations

import struct
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protoframe.generator.build import generate
from protoframe.generator.errors import SpecErrors
from protoframe.runtime.errors import (
    BadMagicError,
    FrameTooLargeError,
    LengthTooSmallError,
    SizeMismatchError,
)
from tests.support.generate import assert_type_checks, generate_text, import_generated, write_spec

PG = """\
protocol: pgs
doc: PostgreSQL-style messages after a StartupMessage.
byte_order: big
structs:
  Startup:
    doc: The StartupMessage, which has no type byte.
    fields:
      - {name: length, type: i32, size_of: rest, includes: self}
      - {name: version, type: u32}
      - {name: params, type: bytes, size: rest}
  Query:
    doc: A simple query.
    fields:
      - {name: sql, type: bytes, size: rest}
  Sync:
    doc: No body.
    fields: []
first:
  to_server: Startup
frame:
  name: Message
  fields:
    - {name: type, type: u8}
    - {name: length, type: i32, size_of: rest, includes: self}
    - name: body
      type: switch
      on: type
      cases: {"'Q'": Query, "'S'": Sync}
"""

AMQ = """\
protocol: amq
doc: AMQP-style frames after a protocol header; the server greets first.
byte_order: big
structs:
  ProtocolHeader:
    doc: '"AMQP" 0 0 9 1.'
    fields:
      - {name: magic, type: u32, const: 0x414d5150}
      - {name: zero, type: u8, const: 0}
      - {name: major, type: u8}
      - {name: minor, type: u8}
      - {name: revision, type: u8}
  Greeting:
    doc: A MySQL-style greeting packet (a little-endian u24 length and a sequence id).
    fields:
      - {name: length, type: u24, order: little, size_of: rest}
      - {name: sequence, type: u8}
      - {name: protocol_version, type: u8, const: 10}
      - {name: server_version, type: bytes, size: rest}
first:
  to_server: ProtocolHeader
  to_client: Greeting
frame:
  name: Frame
  fields:
    - {name: type, type: u8}
    - {name: channel, type: u16}
    - {name: size, type: u32, size_of: rest}
    - {name: payload, type: bytes, size: rest}
"""


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("first_message")
    generate_text(tmp, "pgs", PG, "pgs_pkg")
    generate_text(tmp, "amq", AMQ, "amq_pkg")
    return tmp


@pytest.fixture(scope="module")
def pg(package: Path) -> ModuleType:
    return import_generated(package, "pgs.frames", "pgs_pkg")


@pytest.fixture(scope="module")
def amq(package: Path) -> ModuleType:
    return import_generated(package, "amq.frames", "amq_pkg")


def startup(params: bytes, version: int = 196608) -> bytes:
    """A StartupMessage: Int32 length (counting itself), Int32 protocol version 3.0."""
    body = struct.pack(">I", version) + params
    return struct.pack(">i", 4 + len(body)) + body


PARAMS = b"user\x00postgres\x00database\x00db\x00\x00"


def message(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack(">i", 4 + len(body)) + body


def feed_bytewise(stream: Any, wire: bytes) -> list[Any]:
    return [m for i in range(len(wire)) for m in stream.feed(wire[i:i + 1])]


def test_the_startup_message_is_what_the_documentation_packs(pg: ModuleType) -> None:
    wire = startup(PARAMS)
    assert wire[:8] == bytes.fromhex("00000023" "00030000")  # 35 bytes, version 3.0
    assert pg.Startup(version=196608, params=PARAMS).encode() == wire
    assert pg.first_length_to_server(wire, 0, 4, 1 << 24) == len(wire)
    assert pg.first_length_to_server(wire, 0, 3, 1 << 24) is None


def test_the_server_reads_the_startup_message_first(pg: ModuleType) -> None:
    wire = startup(PARAMS) + message(b"Q", b"SELECT 1\x00") + message(b"S", b"")
    stream = pg.StreamDecoder(to_server=True)
    assert stream.in_handshake
    got = feed_bytewise(stream, wire)
    assert got == [pg.Startup(version=196608, params=PARAMS),
                   pg.Message(body=pg.Query(sql=b"SELECT 1\x00")), pg.Message(body=pg.Sync())]
    assert not stream.in_handshake
    # All at once, and a message that looks like a startup message later is a frame.
    again = pg.StreamDecoder(to_server=True).feed(wire + message(b"S", b""))
    assert again[1:] == [*got[1:], pg.Message(body=pg.Sync())]


def test_the_client_side_and_handshake_false_read_frames_at_once(pg: ModuleType) -> None:
    wire = message(b"S", b"")
    for stream in (pg.StreamDecoder(), pg.StreamDecoder(to_server=True, handshake=False)):
        assert not stream.in_handshake
        assert stream.feed(wire) == [pg.Message(body=pg.Sync())]


def test_a_bad_startup_length_is_refused(pg: ModuleType) -> None:
    with pytest.raises(LengthTooSmallError):
        pg.StreamDecoder(to_server=True).feed(struct.pack(">i", 3))
    with pytest.raises(FrameTooLargeError):
        pg.StreamDecoder(to_server=True, max_frame_size=1000).feed(struct.pack(">i", 1001))
    stream = pg.StreamDecoder(to_server=True)
    with pytest.raises(SizeMismatchError):  # four bytes too few for the version
        stream.feed(struct.pack(">i", 6) + b"\x00\x03")


def test_the_amqp_header_and_a_greeting(amq: ModuleType) -> None:
    header = b"AMQP\x00\x00\x09\x01"
    assert amq.ProtocolHeader(major=0, minor=9, revision=1).encode() == header
    frame = struct.pack(">BHI", 1, 7, 3) + b"abc"
    server = amq.StreamDecoder(to_server=True)
    assert feed_bytewise(server, header + frame) == [
        amq.ProtocolHeader(major=0, minor=9, revision=1),
        amq.Frame(type=1, channel=7, payload=b"abc")]
    greeting = struct.pack("<I", 8)[:3] + b"\x00\x0a" + b"8.0.36"
    assert amq.Greeting(sequence=0, server_version=b"8.0.36").encode() == greeting
    client = amq.StreamDecoder()
    assert client.feed(greeting + frame) == [amq.Greeting(sequence=0, server_version=b"8.0.36"),
                                             amq.Frame(type=1, channel=7, payload=b"abc")]


def test_a_wrong_protocol_header_is_refused_at_once(amq: ModuleType) -> None:
    with pytest.raises(BadMagicError):
        amq.StreamDecoder(to_server=True).feed(b"HTTP/1.1")
    with pytest.raises(BadMagicError):
        amq.StreamDecoder(to_server=True).feed(b"AMQP\x01\x01\x00\x09")
    assert amq.first_length_to_server(b"AMQ", 0, 3, 100) is None


@settings(max_examples=100, deadline=None)
@given(params=st.binary(max_size=200), sqls=st.lists(st.binary(max_size=50), max_size=5),
       cut=st.integers(1, 30))
def test_any_split_of_the_stream(pg: ModuleType, params: bytes, sqls: list[bytes],
                                 cut: int) -> None:
    first = pg.Startup(version=196608, params=params)
    frames = [pg.Message(body=pg.Query(sql=s)) for s in sqls]
    wire = first.encode() + b"".join(f.encode() for f in frames)
    stream = pg.StreamDecoder(to_server=True)
    got: list[Any] = []
    for i in range(0, len(wire), cut):
        got += stream.feed(wire[i:i + cut])
    assert got == [first, *frames]


def test_the_reference_page_names_the_first_messages(tmp_path: Path) -> None:
    page = generate(write_spec(tmp_path, "amq", AMQ), "specs", ["amq"]).docs["amq.md"]
    assert "First message from a client: [`ProtocolHeader`]" in page
    assert "First message from a server: [`Greeting`]" in page


@pytest.mark.slow
def test_the_generated_packages_type_check(package: Path) -> None:
    assert_type_checks(package, "pgs_pkg", "amq_pkg")


@pytest.mark.parametrize(("old", "new", "token", "message"), [
    ("  to_server: Startup\n", "  to_server: Message\n", "Message\n",
     "first: Message is the frame"),
    ("  to_server: Startup\n", "  to_server: Startp\n", "Startp", "unknown struct 'Startp'"),
    ("  to_server: Startup\n", "  to_server: Query\n", "Query\n",
     "first: cannot tell the length of Query from its first bytes"),
    ("  to_server: Startup\n", "  to_sever: Startup\n", "to_sever", "unknown key 'to_sever'"),
    # With machines the first message is a command (tests/generator/test_first_machines.py).
    ("first:\n", "machines:\n  m:\n    initial: a\n    states: [a, b]\n    transitions:\n"
     "      - {from: a, send: STARTP, to: b}\nfirst:\n", "STARTP", "unknown command 'STARTP'"),
])
def test_where_a_first_message_is_refused(tmp_path: Path, old: str, new: str, token: str,
                                          message: str) -> None:
    assert old in PG
    text = PG.replace(old, new)
    with pytest.raises(SpecErrors) as info:
        generate(write_spec(tmp_path, "pgs", text), "specs", ["pgs"])
    errors = [str(e) for e in info.value.errors]
    error = next((e for e in errors if message in e), errors[0])
    assert message in error, errors
    at = text.index(new) + new.index(token)
    line = text.count("\n", 0, at) + 1
    column = at - (text.rfind("\n", 0, at) + 1) + 1
    assert error.startswith(f"specs/pgs/pgs.yaml:{line}:{column}:"), error


def test_the_compiled_and_python_codecs_agree(amq: ModuleType) -> None:
    from protoframe.runtime.codec.compiled import pure_python

    values = [amq.ProtocolHeader(major=0, minor=9, revision=1),
              amq.Frame(type=1, channel=7, payload=b"abc"),
              amq.Greeting(sequence=3, server_version=b"8.0")]
    wires = [v.encode() for v in values]
    decoded = [type(v).decode(w) for v, w in zip(values, wires, strict=True)]
    with pure_python():
        assert [v.encode() for v in values] == wires
        assert [type(v).decode(w) for v, w in zip(values, wires, strict=True)] == decoded
        stream = amq.StreamDecoder(to_server=True)
        assert stream.feed(wires[0] + wires[1]) == values[:2]
    assert decoded == values
    assert amq.StreamDecoder(to_server=True).feed(wires[0] + wires[1]) == values[:2]
