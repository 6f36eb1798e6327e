"""Frames whose length is a varint: MQTT's remaining length (``max_bytes: 4``, 1 to 4 bytes
of little-endian base-128) and an unbounded LEB128 length before fixed fields, against the
encodings the MQTT 3.1.1 specification tabulates (section 2.2.3), through the stream decoder
(which waits while the varint is incomplete and refuses an over-long one or an oversize frame
before buffering it), in round trips, and the specs it is refused in."""

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
from protoframe.runtime.codec.varlen import bounded_varint_bytes, peek_varint
from protoframe.runtime.errors import (
    BadMagicError,
    FrameTooLargeError,
    MalformedVarintError,
    TruncatedError,
    ValueOutOfRangeError,
)
from tests.support.generate import assert_type_checks, generate_text, import_generated, write_spec
from tests.support.varints import varint

MQ = """\
protocol: mq
doc: MQTT-style packets, whose remaining length is a varint of 1 to 4 bytes.
byte_order: big
structs:
  Publish:
    doc: A topic and a payload.
    fields:
      - {name: topic, type: string, prefix: u16}
      - {name: payload, type: bytes, size: rest}
  Ping:
    doc: No body.
    fields: []
  Sealed:
    doc: A nested struct sized by a varint, with a checksum after it.
    fields:
      - {name: n, type: varint, size_of: rest}
      - {name: crc, type: u32, checksum: {algorithm: crc32c, from: data}}
      - {name: data, type: bytes, size: rest}
  Wrapped:
    doc: A sealed struct, then a count as a bounded varint.
    fields:
      - {name: sealed, type: struct, struct: Sealed}
      - {name: tag, type: varint, max_bytes: 2}
frame:
  name: Packet
  fields:
    - {name: kind, type: u8}
    - {name: remaining, type: varint, max_bytes: 4, size_of: rest}
    - name: body
      type: switch
      on: kind
      cases: {0x30: Publish, 0xc0: Ping, 0x01: Wrapped}
"""

LEB = """\
protocol: leb
byte_order: little
frame:
  name: Message
  fields:
    - {name: magic, type: u8, const: 0xa5}
    - {name: length, type: varint, size_of: payload}
    - {name: kind, type: u16}
    - {name: payload, type: bytes}
"""

# MQTT 3.1.1, 2.2.3: the remaining length's encodings at the edges of each byte count.
MQTT_TABLE = [
    (0, "00"), (127, "7f"), (128, "8001"), (16383, "ff7f"), (16384, "808001"),
    (2097151, "ffff7f"), (2097152, "80808001"), (268435455, "ffffff7f"),
]


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("varint_length")
    generate_text(tmp, "mq", MQ, "mq_pkg")
    generate_text(tmp, "leb", LEB, "leb_pkg")
    return tmp


@pytest.fixture(scope="module")
def mq(package: Path) -> ModuleType:
    return import_generated(package, "mq.frames", "mq_pkg")


@pytest.fixture(scope="module")
def leb(package: Path) -> ModuleType:
    return import_generated(package, "leb.frames", "leb_pkg")


def remaining(n: int) -> bytes:
    """MQTT's remaining length, written by hand as the specification's algorithm says."""
    out = bytearray()
    while True:
        digit, n = n % 128, n // 128
        out.append(digit | (0x80 if n else 0))
        if not n:
            return bytes(out)


def publish(topic: str, payload: bytes) -> bytes:
    body = struct.pack(">H", len(topic.encode())) + topic.encode() + payload
    return b"\x30" + remaining(len(body)) + body


@pytest.mark.parametrize(("value", "wire"), MQTT_TABLE)
def test_the_mqtt_table(value: int, wire: str) -> None:
    assert remaining(value) == bytes.fromhex(wire)
    assert bounded_varint_bytes(value, 4) == bytes.fromhex(wire)
    assert peek_varint(bytes.fromhex(wire), 0, len(wire) // 2, 4) == (value, len(wire) // 2)


def test_over_four_bytes_is_out_of_range_and_malformed() -> None:
    with pytest.raises(ValueOutOfRangeError):
        bounded_varint_bytes(268435456, 4)
    with pytest.raises(MalformedVarintError):
        peek_varint(bytes.fromhex("ffffffff7f"), 0, 5, 4)
    assert peek_varint(bytes.fromhex("ffffff"), 0, 3, 4) is None


@pytest.mark.parametrize("size", [0, 1, 100, 200, 20000])
def test_publish_is_what_the_specification_packs(mq: ModuleType, size: int) -> None:
    payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
    wire = publish("a/b", payload)
    frame = mq.Packet(body=mq.Publish(topic="a/b", payload=payload))
    assert frame.encode() == wire
    assert mq.Packet.decode(wire) == frame
    assert mq.frame_length(wire, 0, len(wire), 1 << 28) == len(wire)


def test_pingreq_is_two_bytes(mq: ModuleType) -> None:
    assert mq.Packet(body=mq.Ping()).encode() == b"\xc0\x00"
    assert mq.Packet.decode(b"\xc0\x00") == mq.Packet(body=mq.Ping())


def test_a_nested_varint_size_and_a_checksum_after_it(mq: ModuleType) -> None:
    # crc32c("123456789") = 0xe3069283 (the check value of CRC-32C).
    sealed = struct.pack(">I", 0xE3069283) + b"123456789"
    body = bytes([len(sealed)]) + sealed + bytes.fromhex("ff7f")
    wire = b"\x01" + remaining(len(body)) + body
    frame = mq.Packet(body=mq.Wrapped(sealed=mq.Sealed(data=b"123456789"), tag=16383))
    assert frame.encode() == wire
    assert mq.Packet.decode(wire) == frame
    big = mq.Packet(body=mq.Wrapped(sealed=mq.Sealed(data=b"x" * 300), tag=0))
    assert mq.Packet.decode(big.encode()) == big
    with pytest.raises(ValueOutOfRangeError):
        mq.Packet(body=mq.Wrapped(sealed=mq.Sealed(data=b""), tag=16384)).encode()


def test_a_fifth_length_byte_is_malformed(mq: ModuleType) -> None:
    wire = b"\xc0\xff\xff\xff\xff\x01"
    with pytest.raises(MalformedVarintError):
        mq.Packet.decode(wire)
    with pytest.raises(MalformedVarintError):
        mq.frame_length(wire, 0, len(wire), 1 << 28)
    stream = mq.StreamDecoder()
    assert stream.feed(wire[:4]) == []  # four continuation bytes: still waiting
    with pytest.raises(MalformedVarintError):
        stream.feed(wire[4:])
    with pytest.raises(MalformedVarintError):  # the stream has stopped
        stream.feed(b"")


def test_a_cut_frame_is_truncated(mq: ModuleType) -> None:
    wire = publish("t", b"payload")
    for cut in range(1, len(wire)):
        with pytest.raises(TruncatedError):
            mq.Packet.decode(wire[:cut])


def test_an_oversize_frame_fails_before_its_body_is_buffered(mq: ModuleType) -> None:
    stream = mq.StreamDecoder(max_frame_size=1000)
    with pytest.raises(FrameTooLargeError):
        stream.feed(b"\x30" + remaining(999))
    assert stream.buffered == 0
    ok = mq.StreamDecoder(max_frame_size=1000)
    wire = publish("t", bytes(994))
    assert len(wire) == 1000
    assert ok.feed(wire) == [mq.Packet.decode(wire)]


def test_the_stream_waits_byte_by_byte(mq: ModuleType) -> None:
    wire = publish("topic", bytes(300)) + b"\xc0\x00" + publish("", b"")
    stream = mq.StreamDecoder()
    got: list[Any] = []
    for i in range(len(wire)):
        got += stream.feed(wire[i:i + 1])
        if i == 1:
            assert stream.expected == 0  # half a length: no size yet
    assert [type(f.body).__name__ for f in got] == ["Publish", "Ping", "Publish"]
    assert stream.buffered == 0


@settings(max_examples=150, deadline=None)
@given(topic=st.text(max_size=30), payload=st.binary(max_size=20000), cut=st.integers(1, 400))
def test_round_trips_and_streams(mq: ModuleType, topic: str, payload: bytes, cut: int) -> None:
    frame = mq.Packet(body=mq.Publish(topic=topic, payload=payload))
    wire = frame.encode()
    assert wire == publish(topic, payload)
    stream = mq.StreamDecoder()
    got: list[Any] = []
    both = wire + b"\xc0\x00"
    for i in range(0, len(both), cut):
        got += stream.feed(both[i:i + cut])
    assert got == [frame, mq.Packet(body=mq.Ping())]


@pytest.mark.parametrize("size", [0, 5, 127, 128, 70000])
def test_an_leb128_length_before_fixed_fields(leb: ModuleType, size: int) -> None:
    payload = b"\x07" * size
    wire = b"\xa5" + varint(size) + struct.pack("<H", 0x1234) + payload
    frame = leb.Message(kind=0x1234, payload=payload)
    assert frame.encode() == wire
    assert leb.Message.decode(wire) == frame
    # The length counts the payload only; the frame also holds the magic, itself and kind.
    assert leb.frame_length(wire, 0, len(wire), 1 << 24) == len(wire)
    assert leb.frame_length(wire, 0, 1, 1 << 24) is None
    stream = leb.StreamDecoder()
    assert [f for i in range(len(wire)) for f in stream.feed(wire[i:i + 1])] == [frame]


def test_leb128_garbage_fails_at_the_header(leb: ModuleType) -> None:
    with pytest.raises(BadMagicError):
        leb.frame_length(b"\x00\x05", 0, 2, 1 << 24)
    eleven = b"\xa5" + b"\x80" * 10 + b"\x01"
    with pytest.raises(MalformedVarintError):
        leb.frame_length(eleven, 0, len(eleven), 1 << 24)
    with pytest.raises(FrameTooLargeError):
        leb.StreamDecoder(max_frame_size=100).feed(b"\xa5" + varint(97))


@pytest.mark.slow
def test_the_generated_packages_type_check(package: Path) -> None:
    assert_type_checks(package, "mq_pkg", "leb_pkg")


@pytest.mark.parametrize(("old", "new", "token", "message"), [
    ("- {name: tag, type: varint, max_bytes: 2}", "- {name: tag, type: varint, max_bytes: 11}",
     "11", "11 is greater than the maximum of 10"),
    ("- {name: tag, type: varint, max_bytes: 2}",
     "- {name: tag, type: varint, max_bytes: 1, const: 200}", "200",
     "const: 200 needs more than the 1 bytes of max_bytes"),
    ("- {name: n, type: varint, size_of: rest}\n",
     "- {name: m, type: u8, size_of: rest}\n      - {name: n, type: varint, size_of: rest}\n",
     "rest}\n      - {name: crc", "'n' (a varint size of the rest) is inside the rest 'm'"),
])
def test_where_a_varint_length_is_refused(tmp_path: Path, old: str, new: str, token: str,
                                          message: str) -> None:
    assert old in MQ
    text = MQ.replace(old, new)
    with pytest.raises(SpecErrors) as info:
        generate(write_spec(tmp_path, "mq", text), "specs", ["mq"])
    error = str(info.value.errors[0])
    assert message in error, error
    at = text.index(new) + new.index(token) if token in new else text.index(token)
    line = text.count("\n", 0, at) + 1
    column = at - (text.rfind("\n", 0, at) + 1) + 1
    assert error.startswith(f"specs/mq/mq.yaml:{line}:{column}:"), error
