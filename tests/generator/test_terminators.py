"""``terminator:``: C strings, CRLF-ended bytes and lists ended by a value or a byte, against
frames packed by hand with ``struct`` from the protocols' own descriptions (PostgreSQL's
StartupMessage, MySQL's initial handshake, an HTTP/1.1 request head), in round trips, in the
layout plan, against the compiled codec, and in the generated types (``mypy --strict``)."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protoframe.generator.layout_ops import Array, Terminated
from protoframe.runtime.codec import compiled, compiled_frames, vocabulary
from protoframe.runtime.errors import (
    DecodeError,
    InvalidUtf8Error,
    MissingTerminatorError,
    SizeMismatchError,
    TerminatorInValueError,
)
from tests.generator.test_layout_plan import plans
from tests.support.generate import assert_type_checks, generate_text, import_generated
from tests.support.paths import ROOT

SPEC = """\
protocol: tz
doc: Terminated strings, bytes and lists.
byte_order: big
structs:
  Param:
    doc: One run-time parameter of PostgreSQL's StartupMessage, a name and a value.
    fields:
      - {name: name, type: string, terminator: "'\\\\0'"}
      - {name: value, type: string, terminator: 0}
  Startup:
    doc: PostgreSQL's StartupMessage after its length, parameters ended by one 0 byte.
    fields:
      - {name: version, type: u32}
      - {name: params, type: array, of: Param, terminator: "0x00"}
  Handshake:
    doc: The start of MySQL's initial handshake packet (protocol version 10).
    fields:
      - {name: protocol_version, type: u8}
      - {name: server_version, type: string, terminator: 0}
      - {name: connection_id, type: u32, order: little}
      - {name: auth_data, type: bytes, length: 8}
      - {name: filler, type: u8, const: 0}
      - {name: plugin, type: string, terminator: 0}
  Head:
    doc: An HTTP/1.1 request head, its request line and its header block.
    fields:
      - {name: line, type: bytes, terminator: '"\\r\\n"'}
      - {name: headers, type: bytes, terminator: "0x0d0a0d0a"}
  Java:
    doc: A NUL-ended modified UTF-8 string and a list of u16 ended by 0.
    fields:
      - {name: text, type: string, encoding: mutf8, terminator: 0}
      - {name: ports, type: array, of: u16, terminator: 0}
      - {name: codes, type: array, of: varint, terminator: "'.'"}
  Plain:
    doc: No terminator, so the compiled codec takes it.
    fields:
      - {name: a, type: u32}
      - {name: b_size, type: u16, size_of: b}
      - {name: b, type: bytes}
frame:
  name: Packet
  fields:
    - {name: length, type: u32, size_of: rest}
    - {name: kind, type: u8}
    - {name: body, type: switch, on: kind, cases: {1: Startup, 2: Handshake, 3: Head, 4: Java,
                                                   5: Plain}}
"""


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("terminators")
    generate_text(tmp, "tz", SPEC, "tz_pkg")
    return tmp


@pytest.fixture(scope="module")
def frames(package: Path) -> ModuleType:
    return import_generated(package, "tz.frames", "tz_pkg")


def frame(kind: int, body: bytes) -> bytes:
    return struct.pack(">IB", len(body) + 1, kind) + body


def startup(params: list[tuple[bytes, bytes]]) -> bytes:
    """StartupMessage's body as PostgreSQL's documentation lays it out: the protocol version
    (3.0 = 196608), then name and value C strings, then a 0 byte."""
    return struct.pack(">I", 196608) + b"".join(n + b"\0" + v + b"\0" for n, v in params) + b"\0"


def test_startup_message(frames: ModuleType) -> None:
    params = [(b"user", b"postgres"), (b"database", b"app"), (b"client_encoding", b"UTF8")]
    wire = frame(1, startup(params))
    value = frames.Packet(body=frames.Startup(version=196608, params=[
        frames.Param(name=n.decode(), value=v.decode()) for n, v in params]))
    assert value.encode() == wire
    assert frames.Packet.decode(wire) == value
    assert frames.Packet.decode(frame(1, startup([]))).body.params == []


def test_mysql_handshake(frames: ModuleType) -> None:
    body = (struct.pack("<B", 10) + b"8.0.36\0" + struct.pack("<I", 42) + b"abcdefgh" + b"\0"
            + b"mysql_native_password\0")
    hs = frames.Packet.decode(frame(2, body)).body
    assert (hs.protocol_version, hs.server_version, hs.connection_id, hs.auth_data,
            hs.plugin) == (10, "8.0.36", 42, b"abcdefgh", "mysql_native_password")
    assert frames.Packet(body=hs).encode() == frame(2, body)


def test_http_head(frames: ModuleType) -> None:
    head = b"GET / HTTP/1.1\r\n" + b"Host: a\r\nAccept: */*\r\n\r\n"
    value = frames.Packet.decode(frame(3, head)).body
    assert (value.line, value.headers) == (b"GET / HTTP/1.1", b"Host: a\r\nAccept: */*")
    assert frames.Packet(body=value).encode() == frame(3, head)


def test_mutf8_and_integer_lists(frames: ModuleType) -> None:
    body = "a\0é".encode().replace(b"\0", b"\xc0\x80") + b"\0"
    body += struct.pack(">HHH", 80, 443, 0) + bytes([1, 0x96, 0x01, ord(".")])
    value = frames.Packet.decode(frame(4, body)).body
    assert (value.text, value.ports, value.codes) == ("a\0é", [80, 443], [1, 150])
    assert frames.Packet(body=value).encode() == frame(4, body)


@pytest.mark.parametrize(("kind", "body", "where"), [
    (1, struct.pack(">I", 196608) + b"user\0bob", "Param.value"),
    (1, struct.pack(">I", 196608) + b"user", "Param.name"),
    (1, struct.pack(">I", 196608) + b"user\0bob\0", "Startup.params"),
    (2, b"\x0a8.0.36", "Handshake.server_version"),
    (2, b"\x0a8\0" + bytes(13) + b"mysql", "Handshake.plugin"),
    (3, b"GET / HTTP/1.1\n\r", "Head.line"),
    (3, b"GET\r\nHost: a\r\n\r", "Head.headers"),
    (4, b"x\0" + struct.pack(">H", 80), "Java.ports"),
    (4, b"x\0" + struct.pack(">H", 0) + b"\x01", "Java.codes"),
])
def test_a_missing_terminator_is_its_own_error(frames: ModuleType, kind: int, body: bytes,
                                              where: str) -> None:
    with pytest.raises(MissingTerminatorError, match=where):
        frames.Packet.decode(frame(kind, body))


def test_a_terminator_beyond_the_region_is_not_found(frames: ModuleType) -> None:
    """The search stops at the region's end: a 0 byte after the frame does not end it."""
    wire = frame(2, b"\x0a8.0")
    with pytest.raises(MissingTerminatorError, match="Handshake.server_version"):
        frames.Packet.decode_from(wire + b"\0" * 20, 0, len(wire))


def test_bad_utf8_before_the_terminator(frames: ModuleType) -> None:
    body = struct.pack(">I", 196608) + b"\xff\0x\0\0"
    with pytest.raises(InvalidUtf8Error):
        frames.Packet.decode(frame(1, body))


@pytest.mark.parametrize(("body", "where"), [
    (lambda f: f.Startup(version=3, params=[f.Param(name="a\0b", value="")]), "Param.name"),
    (lambda f: f.Startup(version=3, params=[f.Param(name="", value="x")]), "Startup.params"),
    (lambda f: f.Head(line=b"GET\r\n", headers=b""), "Head.line"),
    # Ended by the start of the terminator: "a\r\n" + CR LF CR LF would decode as "a".
    (lambda f: f.Head(line=b"GET", headers=b"a\r\n"), "Head.headers"),
    (lambda f: f.Java(text="", ports=[1, 0], codes=[]), "Java.ports"),
    (lambda f: f.Java(text="", ports=[], codes=[ord(".")]), "Java.codes"),
])
def test_a_value_holding_its_terminator_is_refused(frames: ModuleType, body: object,
                                                   where: str) -> None:
    with pytest.raises(TerminatorInValueError, match=where):
        frames.Packet(body=body(frames)).encode()  # type: ignore[operator]


_NAMES = st.text(st.characters(blacklist_characters="\0", blacklist_categories=["Cs"]),
                 max_size=12)


@settings(max_examples=150, deadline=None)
@given(params=st.lists(st.tuples(_NAMES.filter(bool), _NAMES), max_size=5))
def test_startup_round_trips(frames: ModuleType, params: list[tuple[str, str]]) -> None:
    value = frames.Packet(body=frames.Startup(version=196608, params=[
        frames.Param(name=n, value=v) for n, v in params]))
    wire = value.encode()
    assert wire == frame(1, startup([(n.encode(), v.encode()) for n, v in params]))
    assert frames.Packet.decode(wire) == value


@settings(max_examples=200, deadline=None)
@given(line=st.binary(max_size=12), headers=st.binary(max_size=12) | st.sampled_from(
    [b"\r", b"\r\n", b"\r\n\r", b"a\r\n\r\nb", b"\n\r\n"]))
def test_bytes_round_trip_or_are_refused(frames: ModuleType, line: bytes,
                                         headers: bytes) -> None:
    """Any bytes either come back as they went or are refused on encode: never cut short."""
    value = frames.Packet(body=frames.Head(line=line, headers=headers))
    fits = b"\r\n" not in line + b"\r" and (headers + b"\r\n\r\n").find(b"\r\n\r\n") == len(
        headers)
    if not fits:
        with pytest.raises(TerminatorInValueError):
            value.encode()
        return
    wire = value.encode()
    assert wire == frame(3, line + b"\r\n" + headers + b"\r\n\r\n")
    assert frames.Packet.decode(wire) == value


def test_the_plan_compiles_terminated_fields_but_not_terminated_lists(tmp_path: Path) -> None:
    p = plans(tmp_path, SPEC.replace("protocol: tz", "protocol: mini\nproto: [mini.proto]"))
    name = p["Param"].op("name")
    assert isinstance(name, Terminated) and (name.text, name.terminator) == (True, b"\0")
    params = p["Startup"].op("params")
    assert isinstance(params, Array) and params.terminator == b"\0"
    ports = p["Java"].op("ports")
    assert isinstance(ports, Array) and (ports.terminator, ports.terminator_value) == (
        b"\0\0", 0)
    # Terminated bytes and text are the compiled codec's (tests/runtime/
    # test_compiled_terminated.py); lists ended by a terminator are not.
    assert all(p[s].compiled for s in ("Param", "Handshake", "Head", "Plain"))
    assert not any(p[s].compiled for s in ("Startup", "Java"))


@pytest.mark.skipif(not compiled_frames.available(),
                    reason="the compiled frame codec is not built; the Python one runs alone")
def test_compiled_and_python_codecs_agree(frames: ModuleType) -> None:
    assert compiled.is_compiled(frames.Plain)
    assert compiled.is_compiled(frames.Param) and compiled.is_compiled(frames.Head)
    assert not compiled.is_compiled(frames.Startup)  # its terminated list
    values = [frames.Packet(body=frames.Plain(a=7, b=b"xyz")),
              frames.Packet(body=frames.Head(line=b"GET", headers=b"Host: a"))]
    for value in values:
        wire = value.encode()
        with compiled.pure_python():
            assert value.encode() == wire
            assert frames.Packet.decode(wire) == value
        assert frames.Packet.decode(wire) == value


def test_the_spark_columns_hold_the_values(package: Path) -> None:
    spark = (package / "tz_pkg" / "tz" / "spark.py").read_text()
    assert 'StructField("server_version", StringType(), False)' in spark
    assert 'StructField("line", BinaryType(), False)' in spark
    assert '"filler"' not in spark


@pytest.mark.slow
def test_the_generated_package_type_checks(package: Path) -> None:
    assert_type_checks(package, "tz_pkg")


LAST = """\
protocol: tl
doc: A frame whose last field is a C string.
byte_order: big
frame:
  name: Line
  fields:
    - {name: length, type: u16, size_of: rest}
    - {name: magic, type: bytes, const: '"L1"'}
    - {name: text, type: string, terminator: 0}
"""


@pytest.fixture(scope="module")
def last(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return generate_text(tmp_path_factory.mktemp("terminated_last"), "tl", LAST, "tl_pkg")


def _line(text: bytes) -> bytes:
    body = b"L1" + text + b"\0"
    return struct.pack(">H", len(body)) + body


def test_the_frames_last_field_is_terminated(last: ModuleType) -> None:
    wire = _line(b"hello")
    assert last.Line(text="hello").encode() == wire
    assert last.Line.decode(wire) == last.Line(text="hello")
    stream = wire + _line(b"") + _line("é".encode())
    for cut in range(len(stream) + 1):
        decoder = last.StreamDecoder()
        assert decoder.feed(stream[:cut]) + decoder.feed(stream[cut:]) == [
            last.Line(text="hello"), last.Line(text=""), last.Line(text="é")]


def test_bytes_after_the_terminator_are_left_over(last: ModuleType) -> None:
    body = b"L1hi\0x"
    with pytest.raises(SizeMismatchError, match="left over"):
        last.Line.decode(struct.pack(">H", len(body)) + body)
    body = b"L1hi"
    with pytest.raises(MissingTerminatorError, match="Line.text"):
        last.Line.decode(struct.pack(">H", len(body)) + body)


def test_the_generated_module_passes_ruff(frames: ModuleType) -> None:
    assert frames.__file__ is not None
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--config",
         str(ROOT / "pyproject.toml"), frames.__file__],
        capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


OPTIONAL = """\
protocol: to
doc: Terminated strings that are not always there.
byte_order: big
frame:
  name: Note
  fields:
    - {name: length, type: u16, size_of: rest}
    - {name: flags, type: u8}
    - {name: title, type: string, terminator: 0, when: "flags & 1"}
    - {name: body, type: bytes, terminator: '"\\r\\n"'}
    - {name: trailer, type: string, terminator: 0, when_remaining: true}
"""


@pytest.mark.parametrize(("flags", "title", "trailer"), [
    (0, None, None), (1, "t", None), (1, "", "end"), (0, None, ""),
])
def test_optional_terminated_fields(tmp_path: Path, flags: int, title: str | None,
                                    trailer: str | None) -> None:
    frames = generate_text(tmp_path, "to", OPTIONAL, "to_pkg")
    body = bytes([flags]) + (b"" if title is None else title.encode() + b"\0") + b"b\r\n"
    body += b"" if trailer is None else trailer.encode() + b"\0"
    wire = struct.pack(">H", len(body)) + body
    value = frames.Note(flags=flags, title=title, body=b"b", trailer=trailer)
    assert value.encode() == wire
    assert frames.Note.decode(wire) == value


@settings(max_examples=300, deadline=None)
@given(kind=st.integers(1, 5), body=st.binary(max_size=40) | st.lists(st.sampled_from(
    [b"\0", b"\r\n", b"a", b"\x03\x00\x00"])).map(b"".join))
def test_any_bytes_decode_or_raise_a_decode_error(frames: ModuleType, kind: int,
                                                  body: bytes) -> None:
    """Random bodies (often holding 0 bytes and CR LF) never raise anything but a DecodeError,
    and whatever decodes encodes back to the same bytes (but for Java's varints and modified
    UTF-8, which have more than one way to write a value)."""
    wire = frame(kind, body)
    try:
        value = frames.Packet.decode(wire)
    except DecodeError:
        return
    if kind != 4:
        assert value.encode() == wire


def test_a_c_codec_that_learns_arrays_does_not_take_terminated_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A list with a terminator or bounds has its own word: teaching the C codec plain arrays
    would not hand it checks it does not make."""
    p = plans(tmp_path, SPEC.replace("protocol: tz", "protocol: mini\nproto: [mini.proto]")
              .replace("  Plain:\n", "  Counted:\n    doc: A plain array.\n    fields:\n"
                       "      - {name: xs, type: array, of: u8, until_end: true}\n"
                       "  Plain:\n"))
    monkeypatch.setattr(vocabulary, "FRAME_OPS", (*vocabulary.FRAME_OPS, "array"))
    assert p["Counted"].compiled
    assert [op.word for op in p["Startup"].unknown_to_c] == ["array_limited"]
    assert not p["Startup"].compiled
