"""TANK messages generated from specs/tank/tank.yaml, in both directions.

Expected bytes are written out by hand from the reference layouts (u8 id, u32 LE size, then the
payload; str8 strings, LEB128 varints, little-endian integers), not produced by the encoder.
TANK has no magic number or constant in its framing, so there is no BadMagicError case here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings

from protoframe.generated.tank.frames import (
    Bundle,
    BundleEntry,
    Chunk,
    ConsumePartitionResult,
    ConsumeRequest,
    ConsumeResponse,
    ConsumeTopicResult,
    Frame,
    Message,
    MessageSet,
    Ping,
    ProduceRequest,
    ProduceResponse,
    StreamDecoder,
)
from protoframe.generator.errors import SpecErrors
from protoframe.generator.frame_model import load_frame_spec
from protoframe.generator.frames_view import build_frames_module
from protoframe.generator.ir import Protocol
from protoframe.runtime.codec.compression import compress, decompress
from protoframe.runtime.errors import (
    EncodeError,
    FrameTooLargeError,
    SizeMismatchError,
    TruncatedError,
    UnknownCommandError,
    UnknownCommandTypeError,
)
from tests.support.codec_modes import FIXTURE_PER_TEST
from tests.support.examples import scaled
from tests.support.tank_frames import (
    CONSUME,
    CONSUME_RESPONSE,
    CONSUME_RESPONSE_WIRE,
    CONSUME_V3_WIRE,
    CONSUME_WIRE,
    PING,
    PRODUCE_RESPONSE,
    PRODUCE_RESPONSE_WIRE,
    PRODUCE_SEQ_WIRE,
    PRODUCE_WIRE,
    REQUESTS,
    RESPONSES,
    TO_CLIENT,
    TO_SERVER,
    h,
)


@pytest.mark.parametrize(("wire", "body"), TO_SERVER + TO_CLIENT,
                         ids=[type(b).__name__ for _, b in TO_SERVER + TO_CLIENT])
def test_encode_matches_the_hand_written_bytes(wire: bytes, body: Any) -> None:
    assert Frame(body=body).encode() == wire


@pytest.mark.parametrize(("wire", "body"), TO_SERVER, ids=[type(b).__name__ for _, b in TO_SERVER])
def test_decode_requests_to_the_server(wire: bytes, body: Any) -> None:
    assert Frame.decode(wire, to_server=True) == Frame(body=body)


@pytest.mark.parametrize(("wire", "body"), TO_CLIENT, ids=[type(b).__name__ for _, b in TO_CLIENT])
def test_decode_responses_to_the_client(wire: bytes, body: Any) -> None:
    assert Frame.decode(wire) == Frame(body=body)
    assert Frame.decode(wire, to_server=False) == Frame(body=body)


def test_one_id_two_layouts() -> None:
    # 0x1 is a ProduceRequest one way and a ProduceResponse the other.
    assert PRODUCE_WIRE[0] == PRODUCE_RESPONSE_WIRE[0] == 1
    assert isinstance(Frame.decode(PRODUCE_WIRE, to_server=True).body, ProduceRequest)
    assert isinstance(Frame.decode(PRODUCE_RESPONSE_WIRE).body, ProduceResponse)
    # ProduceWithSeqnum exists only towards the broker (which answers it with 0x1).
    with pytest.raises(UnknownCommandError) as info:
        Frame.decode(PRODUCE_SEQ_WIRE, to_server=False)
    assert isinstance(info.value, UnknownCommandTypeError)
    assert info.value.command_type == PRODUCE_SEQ_WIRE[0]
    # Read the wrong way, a request does not fit the response layout.
    with pytest.raises(SizeMismatchError):
        Frame.decode(CONSUME_WIRE, to_server=False)


def test_consume_v3_carries_op_flags() -> None:
    body = ConsumeRequest(client_version=3, request_id=7, client_id="", max_wait_ms=500,
                          min_bytes=0, op_flags=1, topics=CONSUME.topics)
    assert Frame(body=body).encode() == CONSUME_V3_WIRE
    assert Frame.decode(CONSUME_V3_WIRE, to_server=True).body == body
    with pytest.raises(EncodeError):  # op_flags only exists from version 3 on
        ConsumeRequest(client_version=2, request_id=7, client_id="", max_wait_ms=500,
                       min_bytes=0, op_flags=1, topics=[]).encode()


def test_consume_response_chunks_decode_as_bundles() -> None:
    response = Frame.decode(CONSUME_RESPONSE_WIRE).body
    assert isinstance(response, ConsumeResponse)
    partitions = response.topics[0].partitions
    assert partitions is not None
    assert partitions[0].chunk_length == len(response.chunks)
    chunk = Chunk.decode(response.chunks)
    assert chunk == Chunk(bundles=[BundleEntry(bundle=Bundle(
        codec=0, sparse=False, msg_count=2, messages=MessageSet(messages=[
            Message(flags=0, timestamp=1000, content=b"a"),
            Message(flags=2, content=b"b")])))])
    assert response.topics[1].unknown and response.topics[1].partitions is None


def test_consume_partition_outcomes() -> None:
    boundary = ConsumePartitionResult(partition=3, error_or_flags=1, base_seqnum=0,
                                      highwater_mark=9, chunk_length=0,
                                      first_available_seqnum=5)
    assert boundary.encode() == h("0300 01 0000000000000000 0900000000000000 00000000"
                                  " 0500000000000000")
    sparse = ConsumePartitionResult(partition=3, error_or_flags=0xFE, highwater_mark=9,
                                    chunk_length=4)
    assert sparse.encode() == h("0300 fe 0900000000000000 04000000")
    leader = ConsumePartitionResult(partition=3, error_or_flags=0xFC, leader_addr=1,
                                    leader_port=2)
    assert leader.encode() == h("0300 fc 01000000 0200")
    assert ConsumePartitionResult(partition=3, error_or_flags=0xFF).encode() == h("0300 ff")
    for value in (boundary, sparse, leader):
        assert ConsumePartitionResult.decode(value.encode()) == value
    with pytest.raises(EncodeError):  # a leader address belongs to 0xfc only
        ConsumePartitionResult(partition=3, error_or_flags=0, leader_addr=1).encode()


# -- bundles ----------------------------------------------------------------------------------


def test_sparse_bundle() -> None:
    # Seq nums 100, 105, 110: first 100, last - first - 1 = 9; the middle message carries
    # 105 - 100 - 1 = 4; the others reuse the first timestamp (flags 2).
    bundle = Bundle(codec=0, sparse=True, msg_count=3, first_seqnum=100, last_seqnum_delta=9,
                    messages=MessageSet(messages=[
                        Message(flags=0, timestamp=1000, content=b"x"),
                        Message(flags=2, seq_delta=4, content=b"y"),
                        Message(flags=2, content=b"z")]))
    wire = h("4c 6400000000000000 09 00 e803000000000000 0178 02 04 0179 02 017a")
    assert bundle.encode() == wire
    assert Bundle.decode(wire) == bundle


def test_seq_num_prev_plus_one_drops_the_delta() -> None:
    messages = [Message(flags=0, timestamp=1, content=b""), Message(flags=6, content=b""),
                Message(flags=2, content=b"")]
    bundle = Bundle(codec=0, sparse=True, msg_count=3, first_seqnum=7, last_seqnum_delta=1,
                    messages=MessageSet(messages=messages))
    assert bundle.encode() == h("4c 0700000000000000 01 00 0100000000000000 00 06 00 02 00")
    assert Bundle.decode(bundle.encode()) == bundle


def test_sixteen_messages_need_a_varint_count() -> None:
    messages = [Message(flags=2, content=b"") for _ in range(16)]
    bundle = Bundle(codec=0, sparse=False, msg_count=16, messages=MessageSet(messages=messages))
    assert bundle.encode() == h("00 10") + h("0200") * 16
    assert Bundle.decode(bundle.encode()) == bundle
    fifteen = Bundle(codec=0, sparse=False, msg_count=15,
                     messages=MessageSet(messages=messages[:15]))
    assert fifteen.encode()[:2] == h("3c 02")  # 15 << 2, then the first message


def test_keyed_message() -> None:
    message = Message(flags=1, timestamp=5, key=b"k1", content=b"v")
    wire = h("01 0500000000000000 02 6b31 01 76")
    assert message.encode(sparse=False, first=True, last=True) == wire
    assert Message.decode(wire, sparse=False, first=True, last=True) == message
    with pytest.raises(EncodeError):
        Message(flags=0, timestamp=5, key=b"k1", content=b"v").encode(
            sparse=False, first=True, last=True)


def test_snappy_compressed_message_set() -> None:
    messages = MessageSet(messages=[Message(flags=0, timestamp=i, content=b"m" * 100)
                                    for i in range(3)])
    plain = messages.encode(count=3, sparse=False)
    bundle = Bundle(codec=1, sparse=False, msg_count=3, compressed=compress("SNAPPY", plain))
    wire = bundle.encode()
    assert wire[0] == 1 | 3 << 2
    back = Bundle.decode(wire)
    assert back.codec == 1 and back.messages is None and back.compressed is not None
    inflated = decompress("SNAPPY", back.compressed, len(plain))
    assert MessageSet.decode(inflated, count=back.msg_count, sparse=back.sparse) == messages


def test_bundle_fields_that_do_not_fit_their_bits() -> None:
    with pytest.raises(EncodeError):
        Bundle(codec=4, sparse=False, msg_count=0, messages=MessageSet(messages=[])).encode()
    with pytest.raises(EncodeError):  # the count says 2, the set has 1
        Bundle(codec=0, sparse=False, msg_count=2,
               messages=MessageSet(messages=[Message(flags=2, content=b"")])).encode()


# -- errors -----------------------------------------------------------------------------------


def test_unknown_message_id() -> None:
    with pytest.raises(UnknownCommandError):
        Frame.decode(h("09 00000000"), to_server=True)
    with pytest.raises(UnknownCommandError):
        StreamDecoder().feed(h("0a 00000000"))


def test_truncated() -> None:
    for cut in range(len(PRODUCE_WIRE)):
        with pytest.raises(TruncatedError):
            Frame.decode(PRODUCE_WIRE[:cut], to_server=True)
    with pytest.raises(TruncatedError):  # a message's varint length cut at the end of input
        Message.decode(h("02 80"), sparse=False, first=True, last=True)


def test_oversize_frame_fails_before_its_body_is_buffered() -> None:
    stream = StreamDecoder(to_server=True)
    with pytest.raises(FrameTooLargeError):
        stream.feed(h("01 01000010"))  # 256 MiB + 1 of payload
    assert stream.buffered == 0
    small = StreamDecoder(max_frame_size=10)
    with pytest.raises(FrameTooLargeError):
        small.feed(PRODUCE_RESPONSE_WIRE[:5])


def test_sizes_disagreeing_with_the_content() -> None:
    short = bytearray(PRODUCE_WIRE)
    assert short[26] == 0x0D
    short[26] = 0x0C  # bundle_length one byte too small
    with pytest.raises(SizeMismatchError):
        Frame.decode(bytes(short), to_server=True)
    header = bytearray(CONSUME_RESPONSE_WIRE)
    header[5] = 0x23  # header_length one byte too small
    with pytest.raises(SizeMismatchError):
        Frame.decode(bytes(header))
    header[5] = 0x45  # past the end of the message
    with pytest.raises(SizeMismatchError):
        Frame.decode(bytes(header))
    with pytest.raises(SizeMismatchError):  # PING with a payload
        Frame.decode(h("03 01000000 00"))
    with pytest.raises(EncodeError):
        ConsumeTopicResult(name="t", partitions_cnt=2, partitions=[]).encode()


# -- streams ----------------------------------------------------------------------------------


def test_stream_byte_by_byte_both_directions() -> None:
    for to_server, cases in ((True, TO_SERVER), (False, TO_CLIENT)):
        stream = StreamDecoder(to_server=to_server)
        wire = b"".join(w for w, _ in cases)
        out: list[Frame] = []
        for i in range(len(wire)):
            out += stream.feed(wire[i : i + 1])
        assert out == [Frame(body=b) for _, b in cases]
        assert stream.buffered == 0


def test_stream_several_frames_in_one_feed() -> None:
    stream = StreamDecoder()
    wire = PING + PRODUCE_RESPONSE_WIRE + CONSUME_RESPONSE_WIRE + PING
    assert stream.feed(wire + PING[:2]) == [Frame(body=Ping()), Frame(body=PRODUCE_RESPONSE),
                                            Frame(body=CONSUME_RESPONSE), Frame(body=Ping())]
    assert stream.feed(PING[2:]) == [Frame(body=Ping())]


# -- every message round-trips ----------------------------------------------------------------

@settings(max_examples=scaled(300), deadline=None, suppress_health_check=FIXTURE_PER_TEST)
@given(REQUESTS)
def test_round_trip_every_request(either_codec: str, body: Any) -> None:
    frame = Frame(body=body)
    wire = frame.encode()
    assert int.from_bytes(wire[1:5], "little") == len(wire) - 5
    assert Frame.decode(wire, to_server=True) == frame
    assert StreamDecoder(to_server=True).feed(wire + wire) == [frame, frame]


@settings(max_examples=scaled(300), deadline=None, suppress_health_check=FIXTURE_PER_TEST)
@given(RESPONSES)
def test_round_trip_every_response(either_codec: str, body: Any) -> None:
    frame = Frame(body=body)
    wire = frame.encode()
    assert Frame.decode(wire) == frame
    assert StreamDecoder().feed(wire + wire) == [frame, frame]


# -- the language extensions reject what they cannot generate ---------------------------------

BASE = """
protocol: mini
byte_order: little
structs:
STRUCTS
frame:
  name: Frame
  fields:
    - {name: kind, type: u8}
    - {name: size, type: u32, size_of: body}
    - {name: body, type: switch, on: kind, cases: {1: Body}}
"""

BAD_SPECS = {
    "derive_without_value": ("""
  Body:
    fields:
      - {name: flags, type: u8}
      - {name: bit, type: bool, derive: "flags & 1 != 0"}
""", "'bit' is derived on decode but no value: expression puts it on the wire"),
    "missing_args": ("""
  Inner:
    params: {wide: bool}
    fields:
      - {name: x, type: u16, when: wide}
  Body:
    fields:
      - {name: inner, type: struct, struct: Inner}
""", "Inner needs args for wide"),
    "unknown_arg": ("""
  Inner:
    fields:
      - {name: x, type: u8}
  Body:
    fields:
      - {name: inner, type: struct, struct: Inner, args: {wide: true}}
""", "Inner has no param 'wide'"),
    "trailing_ignore_in_the_middle": ("""
  Inner:
    trailing: ignore
    fields:
      - {name: x, type: u8}
  Body:
    fields:
      - {name: inner, type: struct, struct: Inner}
      - {name: y, type: u8}
""", "Inner ignores trailing bytes, so unsized it would swallow what follows 'inner'"),
    "varint_size_range": ("""
  Body:
    fields:
      - {name: n, type: varint, size_of: {from: a, to: b}}
      - {name: a, type: u8}
      - {name: b, type: u8}
""", "a size_of range is patched after encoding, so it needs a fixed-width integer"),
    "range_backwards": ("""
  Body:
    fields:
      - {name: n, type: u16, size_of: {from: b, to: a}}
      - {name: a, type: u8}
      - {name: b, type: u8}
""", "size_of: 'b' comes after 'a'"),
    "marker_peeks_another_value": ("""
  Body:
    fields:
      - {name: m, type: u16, const: 0xffff, when_peek: {type: u16, equals: 0xfffe}}
""", "a constant with when_peek is a marker: it must peek its own type and value"),
    "when_names_a_later_field": ("""
  Body:
    fields:
      - {name: x, type: u8, when: "y == 1"}
      - {name: y, type: u8}
""", "when: 'y' does not name a field before 'x' or a param"),
    "index_outside_an_array": ("""
  Inner:
    params: {i: u8}
    fields:
      - {name: x, type: u8}
  Body:
    fields:
      - {name: inner, type: struct, struct: Inner, args: {i: _index}}
""", "args: '_index' does not name a field before 'inner' or a param"),
    "value_needs_a_later_computed_field": ("""
  Body:
    fields:
      - {name: a, type: u8, value: "n + 1"}
      - {name: n, type: u8, size_of: data}
      - {name: data, type: bytes}
""", "'n' is computed where encoding cannot know it yet"),
}


@pytest.mark.parametrize("name", sorted(BAD_SPECS))
def test_bad_uses_of_the_extensions_are_reported(name: str, tmp_path: Path) -> None:
    structs, message = BAD_SPECS[name]
    path = tmp_path / "mini.yaml"
    path.write_text(BASE.replace("STRUCTS", structs.strip("\n")))
    with pytest.raises(SpecErrors) as info:
        build_frames_module(load_frame_spec(path, "mini.yaml", Protocol(name="mini")))
    assert message in str(info.value)
    assert "mini.yaml:" in str(info.value)  # with the file position
