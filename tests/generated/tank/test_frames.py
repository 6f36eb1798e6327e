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
from hypothesis import strategies as st

from protoframe.generated.tank.frames import (
    Bundle,
    BundleEntry,
    Chunk,
    ConsumePartition,
    ConsumePartitionResult,
    ConsumeRequest,
    ConsumeResponse,
    ConsumeTopic,
    ConsumeTopicResult,
    Frame,
    Message,
    MessageSet,
    Ping,
    ProducePartition,
    ProduceRequest,
    ProduceResponse,
    ProduceStatus,
    ProduceTopic,
    ProduceWithSeqnumRequest,
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
)
from tests.support.examples import scaled


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


def one_message_bundle(content: bytes, ts: int = 1000) -> Bundle:
    message = Message(flags=0, timestamp=ts, content=content)
    return Bundle(codec=0, sparse=False, msg_count=1, messages=MessageSet(messages=[message]))


PING = h("03 00000000")

# Produce: client_version 2, request_id 1, client_id "c++", acks 0, timeout 0, topic "t",
# partition 0 with a one-message bundle: flags 1<<2, msg flags 0, ts 1000, content "hi".
PRODUCE_WIRE = h("01 23000000 0200 01000000 03632b2b 00 00000000 01"
                 " 0174 01 0000 0d 04 00 e803000000000000 02 6869")
PRODUCE = ProduceRequest(
    client_version=2, request_id=1, client_id="c++", required_acks=0, ack_timeout=0,
    topics=[ProduceTopic(name="t", partitions=[
        ProducePartition(partition=0, bundle=one_message_bundle(b"hi"))])])

# ProduceWithSeqnum: the same, the partition naming its first seq num (42) before the bundle.
PRODUCE_SEQ_WIRE = h("05 2b000000 0200 01000000 03632b2b 00 00000000 01"
                     " 0174 01 0000 0d 2a00000000000000 04 00 e803000000000000 02 6869")
PRODUCE_SEQ = ProduceWithSeqnumRequest(
    client_version=2, request_id=1, client_id="c++", required_acks=0, ack_timeout=0,
    topics=[ProduceTopic(name="t", partitions=[
        ProducePartition(partition=0, first_msg_seqnum=42, bundle=one_message_bundle(b"hi"))])])

# Produce response: request 1; ok, other leader 127.0.0.1 (as u32 0x0100007f):11181, unknown topic.
PRODUCE_RESPONSE_WIRE = h("01 0d000000 01000000 00 fc 7f000001 ad2b ff")
PRODUCE_RESPONSE = ProduceResponse(request_id=1, statuses=[
    ProduceStatus(error=0), ProduceStatus(error=0xFC, leader_addr=0x0100007F, leader_port=11181),
    ProduceStatus(error=0xFF)])

# Consume: client_version 2, request 7, client_id "", max wait 500 ms, min bytes 0, topic "t",
# partition 1 from seq num 0, fetch 64 KiB.
CONSUME_WIRE = h("02 25000000 0200 07000000 00 f401000000000000 00000000 01"
                 " 0174 01 0100 0000000000000000 00000100")
CONSUME = ConsumeRequest(client_version=2, request_id=7, client_id="", max_wait_ms=500,
                         min_bytes=0, topics=[ConsumeTopic(name="t", partitions=[
                             ConsumePartition(partition=1, abs_seq_num=0, fetch_size=65536)])])

# Consume, version 3 with op_flags prefer_local_node.
CONSUME_V3_WIRE = h("02 26000000 0300 07000000 00 f401000000000000 00000000 01 01"
                    " 0174 01 0100 0000000000000000 00000100")

# Consume response: header_length 0x24; request 7; topic "t" partition 1 ok, base 10,
# high-water 12, one 16-byte chunk; topic "u" unknown (2 partitions asked for, 0xFFFF). The
# chunk: one bundle of 15 bytes: flags 2<<2, message (flags 0, ts 1000, "a"), message (flags 2
# = reuse the timestamp, "b").
CHUNK_WIRE = h("0f 08 00 e803000000000000 0161 02 0162")
CONSUME_RESPONSE_WIRE = h("02 38000000 24000000 07000000 02"
                          " 0174 01 0100 00 0a00000000000000 0c00000000000000 10000000"
                          " 0175 02 ffff") + CHUNK_WIRE
CONSUME_RESPONSE = ConsumeResponse(request_id=7, topics=[
    ConsumeTopicResult(name="t", partitions_cnt=1, partitions=[
        ConsumePartitionResult(partition=1, error_or_flags=0, base_seqnum=10,
                               highwater_mark=12, chunk_length=16)]),
    ConsumeTopicResult(name="u", partitions_cnt=2, unknown=True),
], chunks=CHUNK_WIRE)

TO_SERVER: list[tuple[bytes, Any]] = [(PING, Ping()), (PRODUCE_WIRE, PRODUCE),
                                      (PRODUCE_SEQ_WIRE, PRODUCE_SEQ), (CONSUME_WIRE, CONSUME)]
TO_CLIENT: list[tuple[bytes, Any]] = [(PING, Ping()),
                                      (PRODUCE_RESPONSE_WIRE, PRODUCE_RESPONSE),
                                      (CONSUME_RESPONSE_WIRE, CONSUME_RESPONSE)]


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
    with pytest.raises(UnknownCommandError):
        Frame.decode(PRODUCE_SEQ_WIRE, to_server=False)
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

u8 = st.integers(0, 0xFF)
u16 = st.integers(0, 0xFFFF)
u32 = st.integers(0, 0xFFFFFFFF)
u64 = st.integers(0, 0xFFFFFFFFFFFFFFFF)
varint = st.integers(0, 0xFFFFFFFF)
str8 = st.text(max_size=20)
blob = st.binary(max_size=30)


@st.composite
def messages(draw: st.DrawFn, count: int, sparse: bool) -> MessageSet:
    out = []
    for i in range(count):
        flags = draw(st.integers(0, 7))
        inner = sparse and 0 < i < count - 1 and not flags & 4
        out.append(Message(
            flags=flags,
            seq_delta=draw(varint) if inner else None,
            timestamp=None if flags & 2 else draw(u64),
            key=draw(st.binary(max_size=10)) if flags & 1 else None,
            content=draw(blob)))
    return MessageSet(messages=out)


@st.composite
def bundles(draw: st.DrawFn) -> Bundle:
    sparse = draw(st.booleans())
    if draw(st.booleans()):
        count = draw(st.integers(1, 40))
        return Bundle(codec=1, sparse=sparse, msg_count=count,
                      first_seqnum=draw(u64) if sparse else None,
                      last_seqnum_delta=draw(varint) if sparse and count != 1 else None,
                      compressed=draw(blob))
    count = draw(st.integers(0, 20))
    return Bundle(codec=0, sparse=sparse, msg_count=count,
                  first_seqnum=draw(u64) if sparse else None,
                  last_seqnum_delta=draw(varint) if sparse and count != 1 else None,
                  messages=draw(messages(count, sparse)))


def produce_topics(with_seqnum: bool) -> st.SearchStrategy[list[ProduceTopic]]:
    partition = st.builds(ProducePartition, partition=u16, bundle=bundles(),
                          first_msg_seqnum=u64 if with_seqnum else st.none())
    return st.lists(st.builds(ProduceTopic, name=str8,
                              partitions=st.lists(partition, max_size=3)), max_size=3)


def produce_requests(cls: Any, with_seqnum: bool) -> st.SearchStrategy[Any]:
    return st.builds(cls, client_version=u16, request_id=u32, client_id=str8,
                     required_acks=u8, ack_timeout=u32, topics=produce_topics(with_seqnum))


@st.composite
def consume_requests(draw: st.DrawFn) -> ConsumeRequest:
    version = draw(u16)
    partition = st.builds(ConsumePartition, partition=u16, abs_seq_num=u64, fetch_size=u32)
    return ConsumeRequest(
        client_version=version, request_id=draw(u32), client_id=draw(str8),
        max_wait_ms=draw(u64), min_bytes=draw(u32),
        op_flags=draw(u8) if version >= 3 else None,
        topics=draw(st.lists(st.builds(ConsumeTopic, name=str8,
                                       partitions=st.lists(partition, max_size=3)), max_size=3)))


@st.composite
def statuses(draw: st.DrawFn) -> ProduceStatus:
    error = draw(st.sampled_from([0, 1, 2, 3, 4, 10, 0xFC, 0xFD, 0xFE, 0xFF]))
    if error == 0xFC:
        return ProduceStatus(error=error, leader_addr=draw(u32), leader_port=draw(u16))
    return ProduceStatus(error=error)


@st.composite
def partition_results(draw: st.DrawFn) -> ConsumePartitionResult:
    code = draw(st.sampled_from([0, 1, 0xFE, 0xFC, 0xFD, 0xFB, 0xFF]))
    out = ConsumePartitionResult(partition=draw(st.integers(0, 65530)), error_or_flags=code)
    if code == 0xFC:
        out.leader_addr, out.leader_port = draw(u32), draw(u16)
    if code in (0, 1):
        out.base_seqnum = draw(u64)
    if code in (0, 1, 0xFE):
        out.highwater_mark, out.chunk_length = draw(u64), draw(u32)
    if code == 1:
        out.first_available_seqnum = draw(u64)
    return out


@st.composite
def topic_results(draw: st.DrawFn) -> ConsumeTopicResult:
    if draw(st.booleans()):
        return ConsumeTopicResult(name=draw(str8), partitions_cnt=draw(u8), unknown=True)
    parts = draw(st.lists(partition_results(), max_size=3))
    return ConsumeTopicResult(name=draw(str8), partitions_cnt=len(parts), partitions=parts)


REQUESTS = st.one_of(st.just(Ping()), produce_requests(ProduceRequest, False),
                     produce_requests(ProduceWithSeqnumRequest, True), consume_requests())
RESPONSES = st.one_of(
    st.just(Ping()),
    st.builds(ProduceResponse, request_id=u32, statuses=st.lists(statuses(), max_size=5)),
    st.builds(ConsumeResponse, request_id=u32, topics=st.lists(topic_results(), max_size=3),
              chunks=blob))


@settings(max_examples=scaled(300), deadline=None)
@given(REQUESTS)
def test_round_trip_every_request(body: Any) -> None:
    frame = Frame(body=body)
    wire = frame.encode()
    assert int.from_bytes(wire[1:5], "little") == len(wire) - 5
    assert Frame.decode(wire, to_server=True) == frame
    assert StreamDecoder(to_server=True).feed(wire + wire) == [frame, frame]


@settings(max_examples=scaled(300), deadline=None)
@given(RESPONSES)
def test_round_trip_every_response(body: Any) -> None:
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
