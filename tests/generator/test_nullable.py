"""``nullable: true``: a signed length prefix whose -1 stands for None (Kafka's nullable strings
and bytes), against frames packed by hand with ``struct``, in round trips, in the generated
types (``mypy --strict``) and Spark schema, and the specs it is refused in."""

from __future__ import annotations

import struct
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protoframe.generator.build import generate
from protoframe.generator.errors import SpecErrors
from protoframe.runtime.errors import DecodeError, TruncatedError
from tests.support.generate import assert_type_checks, generate_text, import_generated, write_spec

SPEC = """\
protocol: nl
doc: Nullable length-prefixed values, as Kafka's protocol writes them.
byte_order: big
structs:
  Record:
    doc: A record whose key and client id may be null.
    fields:
      - {name: key, type: bytes, prefix: i32, nullable: true}
      - {name: client_id, type: string, prefix: i16, nullable: true}
      - {name: value, type: bytes, prefix: i32}
frame:
  name: Packet
  fields:
    - {name: length, type: u32, size_of: rest}
    - {name: record, type: struct, struct: Record}
"""


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("nullable")
    generate_text(tmp, "nl", SPEC, "nl_pkg")
    return tmp


@pytest.fixture(scope="module")
def frames(package: Path) -> ModuleType:
    return import_generated(package, "nl.frames", "nl_pkg")


def packed(key: bytes | None, client_id: str | None, value: bytes) -> bytes:
    """The frame as Kafka-style code writes it, with ``struct`` alone."""
    body = (struct.pack(">i", -1) if key is None else struct.pack(">i", len(key)) + key)
    cid = None if client_id is None else client_id.encode()
    body += struct.pack(">h", -1) if cid is None else struct.pack(">h", len(cid)) + cid
    body += struct.pack(">i", len(value)) + value
    return struct.pack(">I", len(body)) + body


@pytest.mark.parametrize(("key", "client_id", "value"), [
    (None, None, b"v"), (b"", "", b""), (b"k" * 300, "client-é", b"\x00\xff"),
    (None, "c", b"v"), (b"k", None, b""),
])
def test_the_wire_is_what_struct_packs(frames: ModuleType, key: bytes | None,
                                       client_id: str | None, value: bytes) -> None:
    wire = packed(key, client_id, value)
    record = frames.Record(key=key, client_id=client_id, value=value)
    assert frames.Packet(record=record).encode() == wire
    decoded = frames.Packet.decode(wire).record
    assert (decoded.key, decoded.client_id, decoded.value) == (key, client_id, value)


def test_none_is_the_default(frames: ModuleType) -> None:
    record = frames.Record(value=b"v")
    assert (record.key, record.client_id) == (None, None)
    assert frames.Packet(record=record).encode() == packed(None, None, b"v")


@pytest.mark.parametrize("length", [-2, -32768])
def test_other_negative_lengths_are_refused(frames: ModuleType, length: int) -> None:
    body = struct.pack(">i", -1) + struct.pack(">h", length) + struct.pack(">i", 0)
    with pytest.raises(TruncatedError, match="Record.client_id"):
        frames.Packet.decode(struct.pack(">I", len(body)) + body)


def test_a_cut_frame_is_a_decode_error(frames: ModuleType) -> None:
    wire = packed(b"key", None, b"value")
    for cut in range(4, len(wire)):
        body = wire[4:cut]
        with pytest.raises(DecodeError):
            frames.Packet.decode(struct.pack(">I", len(body)) + body)


@settings(max_examples=200, deadline=None)
@given(key=st.none() | st.binary(max_size=40), client_id=st.none() | st.text(max_size=20),
       value=st.binary(max_size=40))
def test_round_trips(frames: ModuleType, key: bytes | None, client_id: str | None,
                     value: bytes) -> None:
    wire = frames.Packet(record=frames.Record(key=key, client_id=client_id, value=value)).encode()
    assert wire == packed(key, client_id, value)
    decoded = frames.Packet.decode(wire).record
    assert (decoded.key, decoded.client_id, decoded.value) == (key, client_id, value)


def test_the_spark_columns_are_nullable(package: Path) -> None:
    spark = (package / "nl_pkg" / "nl" / "spark.py").read_text()
    assert 'StructField("key", BinaryType(), True)' in spark
    assert 'StructField("client_id", StringType(), True)' in spark
    assert 'StructField("value", BinaryType(), False)' in spark


@pytest.mark.slow
def test_the_generated_package_type_checks(package: Path) -> None:
    assert_type_checks(package, "nl_pkg")


@pytest.mark.parametrize(("old", "new", "message"), [
    ("prefix: i16, nullable: true", "prefix: u16, nullable: true",
     "nullable: needs a signed length prefix"),
    ("prefix: i16, nullable: true", "length: 4, nullable: true",
     "nullable: needs a signed length prefix"),
    ("type: bytes, prefix: i32, nullable: true", "type: u32, nullable: true",
     "nullable: needs a bytes or string field"),
    ("prefix: i16, nullable: true", "prefix: i16, nullable: true, when_remaining: true",
     "nullable: cannot be combined with when_remaining"),
])
def test_where_nullable_is_refused(tmp_path: Path, old: str, new: str, message: str) -> None:
    assert old in SPEC
    text = SPEC.replace(old, new)
    with pytest.raises(SpecErrors) as info:
        generate(write_spec(tmp_path, "nl", text), "specs", ["nl"])
    # The first error is this one (a clash may also break a rule of the other key).
    error = info.value.errors[0]
    assert message in str(error)
    line_no = next(i for i, line in enumerate(text.splitlines(), 1) if new in line)
    column = text.splitlines()[line_no - 1].index("nullable: ") + len("nullable: ") + 1
    assert str(error).startswith(f"specs/nl/nl.yaml:{line_no}:{column}:")
