"""3-byte integers (``u24``/``i24``, both byte orders): MySQL's packet header (a little-endian
``u24`` length and a sequence byte) and a body using them everywhere an integer type goes,
against bytes packed by hand, in round trips, through the stream decoder, and which of its
structs the compiled codec takes."""

from __future__ import annotations

import struct
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protoframe.generator.build import load_frame_specs
from protoframe.generator.layout_plan import plan_spec
from protoframe.generator.proto_model import load_protocol
from protoframe.runtime.codec.int24 import Int24
from protoframe.runtime.errors import (
    SizeMismatchError,
    TruncatedError,
    ValueOutOfRangeError,
)
from tests.support.generate import assert_type_checks, generate_text, import_generated, write_spec

SPEC = """\
protocol: my24
doc: MySQL-style packets, whose length is a little-endian 3-byte integer.
byte_order: little
structs:
  Body:
    doc: Every place a 3-byte integer can go.
    fields:
      - {name: big, type: i24, order: big}
      - {name: small, type: i24}
      - {name: count, type: u24, count_of: items}
      - {name: items, type: array, of: u24}
      - {name: name, type: string, prefix: u24}
      - {name: blob_size, type: u24, size_of: blob}
      - {name: blob, type: bytes}
frame:
  name: Packet
  fields:
    - {name: length, type: u24, size_of: rest}
    - {name: sequence, type: u8}
    - {name: body, type: struct, struct: Body}
"""


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("int24")
    generate_text(tmp, "my24", SPEC, "my24_pkg")
    return tmp


@pytest.fixture(scope="module")
def frames(package: Path) -> ModuleType:
    return import_generated(package, "my24.frames", "my24_pkg")


def u24le(n: int) -> bytes:
    return struct.pack("<I", n)[:3]


def packed(sequence: int, big: int, small: int, items: list[int], name: str,
           blob: bytes) -> bytes:
    """The packet as MySQL-style code writes it, with ``struct`` alone."""
    body = struct.pack(">i", big)[1:]
    body += struct.pack("<i", small)[:3]
    body += u24le(len(items)) + b"".join(u24le(i) for i in items)
    text = name.encode()
    body += u24le(len(text)) + text + u24le(len(blob)) + blob
    rest = bytes([sequence]) + body
    return u24le(len(rest)) + rest


Case = tuple[int, int, int, list[int], str, bytes]


def value(frames: ModuleType, sequence: int, big: int, small: int, items: list[int],
          name: str, blob: bytes) -> Any:
    return frames.Packet(sequence=sequence, body=frames.Body(
        big=big, small=small, items=items, name=name, blob=blob))


CASES: list[Case] = [
    (0, 0, 0, [], "", b""),
    (1, -1, -1, [0xFFFFFF], "x", b"\x00"),
    (255, 0x7FFFFF, -0x800000, [1, 0x123456, 0xABCDEF], "select 1", b"\xfe" * 300),
    (7, -0x800000, 0x7FFFFF, [0] * 5, "é", b""),
]


@pytest.mark.parametrize("case", CASES)
def test_the_wire_is_what_struct_packs(frames: ModuleType, case: Case) -> None:
    wire = packed(*case)
    assert value(frames, *case).encode() == wire
    assert frames.Packet.decode(wire) == value(frames, *case)


def test_mysql_ping_header(frames: ModuleType) -> None:
    # A packet header is a 3-byte little-endian payload length and a sequence id.
    wire = bytes.fromhex("120000" "00") + bytes(17)
    assert frames.frame_length(wire, 0, 2, 1 << 24) is None
    assert frames.frame_length(wire, 0, 3, 1 << 24) == 3 + 0x12


@settings(max_examples=150, deadline=None)
@given(sequence=st.integers(0, 255), big=st.integers(-(1 << 23), (1 << 23) - 1),
       small=st.integers(-(1 << 23), (1 << 23) - 1),
       items=st.lists(st.integers(0, (1 << 24) - 1), max_size=8),
       name=st.text(max_size=20), blob=st.binary(max_size=40),
       cut=st.integers(1, 7))
def test_round_trips_and_streams(frames: ModuleType, sequence: int, big: int, small: int,
                                 items: list[int], name: str, blob: bytes, cut: int) -> None:
    case: Case = (sequence, big, small, items, name, blob)
    wire = value(frames, *case).encode()
    assert wire == packed(*case)
    assert frames.Packet.decode(wire) == value(frames, *case)
    stream = frames.StreamDecoder()
    got = []
    for i in range(0, 2 * len(wire), cut):
        got += stream.feed((wire * 2)[i:i + cut])
    assert got == [value(frames, *case)] * 2
    assert stream.buffered == 0


@pytest.mark.parametrize(("field", "bad"), [
    ("big", 1 << 23), ("big", -(1 << 23) - 1), ("small", 1 << 23)])
def test_a_value_out_of_range_is_refused(frames: ModuleType, field: str, bad: int) -> None:
    body = frames.Body(big=0, small=0, items=[], name="", blob=b"")
    setattr(body, field, bad)
    with pytest.raises(ValueOutOfRangeError):
        frames.Packet(sequence=0, body=body).encode()


def test_an_element_out_of_range_is_refused(frames: ModuleType) -> None:
    body = frames.Body(big=0, small=0, items=[1 << 24], name="", blob=b"")
    with pytest.raises(ValueOutOfRangeError):
        frames.Packet(sequence=0, body=body).encode()


def test_cut_and_overlong_bodies_are_decode_errors(frames: ModuleType) -> None:
    wire = packed(*CASES[2])
    rest = wire[3:]
    for cut in range(1, len(rest)):
        with pytest.raises((TruncatedError, SizeMismatchError)):
            frames.Packet.decode(u24le(cut) + rest[:cut])
    with pytest.raises(SizeMismatchError):
        frames.Packet.decode(u24le(len(rest) + 1) + rest + b"\x00")


def test_u24_takes_the_compiled_codec_where_the_rest_of_its_struct_does(
        tmp_path: Path, frames: ModuleType) -> None:
    specs = write_spec(tmp_path, "my24", SPEC)
    [spec] = load_frame_specs(specs, "specs", load_protocol(specs, "my24", "specs"))
    plans = plan_spec(spec)
    # The C codec reads and writes 3-byte integers (issue #21's MariaDB row), and arrays of
    # them counted by their count_of field (int_array rows): both structs are compiled.
    assert [(op.name, op.word) for op in plans["Body"].field_ops if op.name == "items"] == [
        ("items", "int_array")]
    assert plans["Body"].unknown_to_c == () and plans["Packet"].unknown_to_c == ()
    assert plans["Body"].compiled and plans["Packet"].compiled
    assert "install_frame_layouts" in Path(str(frames.__file__)).read_text()


def test_int24_is_a_struct_lookalike() -> None:
    orders: list[tuple[Literal["<", ">"], bool]] = [
        ("<", False), (">", False), ("<", True), (">", True)]
    for order, signed in orders:
        codec = Int24(order, signed=signed)
        low, high = (-(1 << 23), (1 << 23) - 1) if signed else (0, (1 << 24) - 1)
        for n in (low, high, 0, 0x1234 if not signed else -0x1234):
            fmt = ("<" if order == "<" else ">") + ("i" if signed else "I")
            four = struct.pack(fmt, n)
            three = four[:3] if order == "<" else four[1:]
            assert codec.pack(n) == three
            assert codec.unpack_from(b"\x00" + three, 1) == (n,)
            buf = bytearray(5)
            codec.pack_into(buf, 2, n)
            assert bytes(buf[2:]) == three
        for bad in (low - 1, high + 1):
            with pytest.raises(struct.error):
                codec.pack(bad)
        with pytest.raises(struct.error):
            codec.unpack_from(b"\x00\x00", 0)
        with pytest.raises(struct.error):
            codec.pack(1.5)  # type: ignore[arg-type]


@pytest.mark.slow
def test_the_generated_package_type_checks(package: Path) -> None:
    assert_type_checks(package, "my24_pkg")
