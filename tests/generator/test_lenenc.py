"""MySQL length-encoded integers (``type: varint, encoding: lenenc``) and length-encoded
strings and bytes (``prefix: lenenc``), with NULL (0xfb) as None where ``nullable: true``:
against bytes packed by hand from the MySQL client/server protocol's description of
"Length-Encoded Integer" and "Length-Encoded String", each kind of bad input raising its own
error, in round trips, in the generated types and Spark schema, and the specs it is refused
in."""

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
from protoframe.runtime.codec.varlen import lenenc_bytes, peek_lenenc, read_lenenc
from protoframe.runtime.errors import (
    MalformedLengthEncodedError,
    MalformedVarintError,
    SizeMismatchError,
    TruncatedError,
    UnexpectedNullError,
    ValueOutOfRangeError,
)
from tests.support.generate import assert_type_checks, generate_text, import_generated, write_spec

SPEC = """\
protocol: my
doc: MySQL-style packets with length-encoded integers and strings.
byte_order: little
structs:
  Row:
    doc: A text-protocol row of length-encoded values, some of them NULL.
    fields:
      - {name: affected, type: varint, encoding: lenenc}
      - {name: last_id, type: varint, encoding: lenenc, nullable: true}
      - {name: name, type: string, prefix: lenenc}
      - {name: value, type: bytes, prefix: lenenc, nullable: true}
      - {name: note, type: string, prefix: lenenc, nullable: true}
      - {name: count, type: varint, encoding: lenenc, count_of: ids}
      - {name: ids, type: array, of: u8}
      - {name: size, type: varint, encoding: lenenc, size_of: blob}
      - {name: blob, type: bytes}
frame:
  name: Packet
  fields:
    - {name: length, type: u24, size_of: rest}
    - {name: sequence, type: u8}
    - {name: row, type: struct, struct: Row}
"""

# The protocol's table: the first byte says how many bytes follow (little-endian).
VECTORS = [
    (0, "00"), (250, "fa"), (251, "fcfb00"), (0xFFFF, "fcffff"), (0x10000, "fd000001"),
    (0xFFFFFF, "fdffffff"), (0x1000000, "fe0000000100000000"),
    (2**64 - 1, "feffffffffffffffff"),
]


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("lenenc")
    generate_text(tmp, "my", SPEC, "my_pkg")
    return tmp


@pytest.fixture(scope="module")
def frames(package: Path) -> ModuleType:
    return import_generated(package, "my.frames", "my_pkg")


def lenenc(n: int | None) -> bytes:
    """A length-encoded integer by hand, with ``struct``."""
    if n is None:
        return b"\xfb"
    if n < 251:
        return struct.pack("<B", n)
    if n < 1 << 16:
        return b"\xfc" + struct.pack("<H", n)
    if n < 1 << 24:
        return b"\xfd" + struct.pack("<I", n)[:3]
    return b"\xfe" + struct.pack("<Q", n)


def lenenc_str(data: bytes | None) -> bytes:
    return b"\xfb" if data is None else lenenc(len(data)) + data


def packed(seq: int, affected: int, last_id: int | None, name: str, value: bytes | None,
           note: str | None, ids: list[int], blob: bytes) -> bytes:
    row = (lenenc(affected) + lenenc(last_id) + lenenc_str(name.encode()) + lenenc_str(value)
           + lenenc_str(None if note is None else note.encode()) + lenenc(len(ids))
           + bytes(ids) + lenenc(len(blob)) + blob)
    rest = bytes([seq]) + row
    return struct.pack("<I", len(rest))[:3] + rest


def value(frames: ModuleType, seq: int, affected: int, last_id: int | None, name: str,
          val: bytes | None, note: str | None, ids: list[int], blob: bytes) -> Any:
    return frames.Packet(sequence=seq, row=frames.Row(
        affected=affected, last_id=last_id, name=name, value=val, note=note, ids=ids,
        blob=blob))


@pytest.mark.parametrize(("n", "wire"), VECTORS)
def test_the_protocols_table(n: int, wire: str) -> None:
    assert lenenc(n) == bytes.fromhex(wire) == lenenc_bytes(n)
    data = bytes.fromhex(wire)
    assert read_lenenc(data, 0, len(data)) == (n, len(data))
    assert peek_lenenc(data, 0, len(data) - 1) is None or len(data) == 1


def test_the_runtime_refuses_what_is_no_integer() -> None:
    with pytest.raises(MalformedLengthEncodedError):
        read_lenenc(b"\xff\x00\x00", 0, 3)
    assert issubclass(MalformedLengthEncodedError, MalformedVarintError)
    with pytest.raises(UnexpectedNullError):
        read_lenenc(b"\xfb", 0, 1)
    with pytest.raises(IndexError):
        read_lenenc(b"\xfd\x00\x00", 0, 3)
    for bad in (-1, 2**64):
        with pytest.raises(ValueOutOfRangeError):
            lenenc_bytes(bad)


CASES = [
    (0, 0, None, "", None, None, [], b""),
    (1, 250, 251, "é", b"", "", [1, 2], b"x"),
    (2, 0xFFFF, 0x10000, "n" * 300, b"v" * 70000, None, list(range(251)), b"b" * 251),
    (3, 2**64 - 1, 0, "x", None, "note", [7], bytes(0x10000)),
]


@pytest.mark.parametrize("case", CASES)
def test_the_wire_is_what_struct_packs(frames: ModuleType, case: tuple[Any, ...]) -> None:
    wire = packed(*case)
    assert value(frames, *case).encode() == wire
    assert frames.Packet.decode(wire) == value(frames, *case)


def test_null_is_the_default_of_nullable_fields(frames: ModuleType) -> None:
    row = frames.Row(affected=1, name="a", ids=[], blob=b"")
    assert (row.last_id, row.value, row.note) == (None, None, None)
    assert frames.Packet(sequence=0, row=row).encode() == packed(
        0, 1, None, "a", None, None, [], b"")


def row_bytes(case: tuple[Any, ...]) -> bytes:
    return packed(*case)[4:]


def frame_of(row: bytes) -> bytes:
    rest = b"\x00" + row
    return struct.pack("<I", len(rest))[:3] + rest


def test_null_where_the_field_is_not_nullable(frames: ModuleType) -> None:
    row = row_bytes(CASES[1])
    with pytest.raises(UnexpectedNullError):  # affected
        frames.Packet.decode(frame_of(b"\xfb" + row[1:]))
    name_at = len(lenenc(250) + lenenc(251))
    with pytest.raises(UnexpectedNullError):  # name
        frames.Packet.decode(frame_of(row[:name_at] + b"\xfb" + row[name_at + 3:]))


def test_0xff_is_malformed(frames: ModuleType) -> None:
    row = row_bytes(CASES[1])
    with pytest.raises(MalformedLengthEncodedError):
        frames.Packet.decode(frame_of(b"\xff" + row[1:]))
    last_id_at = 1
    with pytest.raises(MalformedLengthEncodedError):
        frames.Packet.decode(frame_of(row[:last_id_at] + b"\xff" + row[last_id_at + 3:]))


def test_a_cut_integer_or_string_is_truncated(frames: ModuleType) -> None:
    row = row_bytes(CASES[2])
    for cut in (1, 2, 3, 5, 100):
        with pytest.raises(TruncatedError):
            frames.Row.decode(row[:cut])
    with pytest.raises(SizeMismatchError):  # the blob, sized by an earlier field
        frames.Row.decode(row[:-1])
    assert frames.Row.decode(row) == value(frames, *CASES[2]).row


def test_encoding_out_of_range_is_refused(frames: ModuleType) -> None:
    row = frames.Row(affected=2**64, name="", ids=[], blob=b"")
    with pytest.raises(ValueOutOfRangeError):
        frames.Packet(sequence=0, row=row).encode()


@settings(max_examples=150, deadline=None)
@given(affected=st.integers(0, 2**64 - 1), last_id=st.none() | st.integers(0, 2**64 - 1),
       name=st.text(max_size=20), val=st.none() | st.binary(max_size=300),
       note=st.none() | st.text(max_size=10), ids=st.lists(st.integers(0, 255), max_size=300),
       blob=st.binary(max_size=300))
def test_round_trips(frames: ModuleType, affected: int, last_id: int | None, name: str,
                     val: bytes | None, note: str | None, ids: list[int], blob: bytes) -> None:
    case = (5, affected, last_id, name, val, note, ids, blob)
    wire = value(frames, *case).encode()
    assert wire == packed(*case)
    assert frames.Packet.decode(wire) == value(frames, *case)
    stream = frames.StreamDecoder()
    got: list[Any] = []
    for i in range(0, len(wire) * 2, 7):
        got += stream.feed((wire * 2)[i:i + 7])
    assert got == [value(frames, *case)] * 2


def test_the_spark_columns_are_nullable_where_null_is_allowed(package: Path) -> None:
    spark = (package / "my_pkg" / "my" / "spark.py").read_text()
    assert 'StructField("last_id", DecimalType(20, 0), True)' in spark
    assert 'StructField("affected", DecimalType(20, 0), False)' in spark
    assert 'StructField("value", BinaryType(), True)' in spark
    assert 'StructField("name", StringType(), False)' in spark


def test_the_reference_page_names_them(tmp_path: Path) -> None:
    page = generate(write_spec(tmp_path, "my", SPEC), "specs", ["my"]).docs["my.md"]
    assert "lenenc integer (0xfb: None)" in page
    assert "lenenc length prefix (0xfb: None) + length" in page
    assert "1, 3, 4 or 9 (lenenc)" in page


@pytest.mark.slow
def test_the_generated_package_type_checks(package: Path) -> None:
    assert_type_checks(package, "my_pkg")


@pytest.mark.parametrize(("old", "new", "token", "message"), [
    ("{name: name, type: string, prefix: lenenc}",
     "{name: name, type: string, prefix: lenenc, encoding: lenenc}", "lenenc}",
     "encoding: lenenc needs a varint field"),
    ("{name: affected, type: varint, encoding: lenenc}",
     "{name: affected, type: varint, encoding: utf8}", "utf8",
     "encoding: utf8 is a string encoding"),
    ("{name: affected, type: varint, encoding: lenenc}",
     "{name: affected, type: varint, encoding: lenenc, max_bytes: 3}", "lenenc,",
     "encoding: lenenc cannot be combined with max_bytes"),
    ("{name: affected, type: varint, encoding: lenenc}",
     "{name: affected, type: u32, encoding: lenenc}", "lenenc",
     "encoding: lenenc needs a varint (lenenc) or a string"),
    ("{name: last_id, type: varint, encoding: lenenc, nullable: true}",
     "{name: last_id, type: varint, encoding: lenenc, nullable: true, when_remaining: true}",
     "true,", "nullable: cannot be combined with when_remaining"),
    ("{name: value, type: bytes, prefix: lenenc, nullable: true}",
     "{name: value, type: bytes, prefix: varint, nullable: true}", "true}",
     "nullable: needs a signed length prefix"),
    ("{name: length, type: u24, size_of: rest}",
     "{name: length, type: varint, encoding: lenenc, size_of: rest}", "lenenc,",
     "encoding: lenenc cannot be combined with size_of: rest"),
    ("{name: sequence, type: u8}",
     "{name: sequence, type: varint, encoding: lenenc, nullable: true}\n"
     "    - {name: body, type: switch, on: sequence, cases: {1: Row}}", "sequence, cases",
     "switch on: 'sequence' is nullable"),
])
def test_where_lenenc_is_refused(tmp_path: Path, old: str, new: str, token: str,
                                 message: str) -> None:
    assert old in SPEC
    text = SPEC.replace(old, new)
    with pytest.raises(SpecErrors) as info:
        generate(write_spec(tmp_path, "my", text), "specs", ["my"])
    error = str(info.value.errors[0])
    assert message in error, error
    at = text.index(new) + new.index(token)
    line = text.count("\n", 0, at) + 1
    column = at - (text.rfind("\n", 0, at) + 1) + 1
    assert error.startswith(f"specs/my/my.yaml:{line}:{column}:"), error
