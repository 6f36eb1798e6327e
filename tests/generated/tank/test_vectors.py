"""TANK byte layouts rebuilt field by field with ``struct.pack``, independently of the codecs.

Each vector is assembled from the reference layouts (u8 message id, u32 little-endian payload
size, payload; str8 = u8 length and bytes; LEB128 varints) with nothing but ``struct`` and a
local varint writer, then compared both ways with the generated codecs and, for bundles, with
what the client's bundle builder chooses (flags, counts, seq num fields).
"""

from __future__ import annotations

import struct
from typing import Any

import cramjam
import pytest

from protoframe.clients.tank.bundles import build_bundle, read_chunk
from protoframe.clients.tank.messages import ConsumedMessage, Message
from protoframe.generated.tank import frames
from tests.support.varints import varint


def str8(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<B", len(data)) + data


def framed(msg_id: int, payload: bytes) -> bytes:
    return struct.pack("<BI", msg_id, len(payload)) + payload


# -- bundles, one per per-message flag ----------------------------------------------------------

# flags byte: codec in bits 0-1, count 1-15 in bits 2-5, SPARSE = bit 6.
PLAIN_MESSAGE = struct.pack("<BQ", 0, 1_700_000_000_000) + varint(5) + b"hello"
PLAIN_BUNDLE = struct.pack("<B", 1 << 2) + PLAIN_MESSAGE

# HaveKey (1): u8 key length and the key after the timestamp.
KEYED_BUNDLE = (struct.pack("<B", 1 << 2) + struct.pack("<BQ", 1, 42)
                + struct.pack("<B", 3) + b"key" + varint(1) + b"v")

# UseLastSpecifiedTS (2): the second and third messages carry no timestamp.
REUSED_TS_BUNDLE = (struct.pack("<B", 3 << 2)
                    + struct.pack("<BQ", 0, 7) + varint(1) + b"a"
                    + struct.pack("<B", 2) + varint(1) + b"b"
                    + struct.pack("<B", 3) + struct.pack("<B", 1) + b"k" + varint(1) + b"c")

# SPARSE with SeqNumPrevPlusOne (4): seq nums 100, 101, 105, 109. Header: first seq num u64,
# varint(last - first - 1); message 2 (101) says prev + 1; message 3 (105) carries
# varint(105 - 101 - 1); the last one is implied by the header.
SPARSE_BUNDLE = (struct.pack("<B", 4 << 2 | 0x40) + struct.pack("<Q", 100) + varint(8)
                 + struct.pack("<BQ", 0, 1) + varint(1) + b"w"
                 + struct.pack("<B", 4 | 2) + varint(1) + b"x"
                 + struct.pack("<B", 2) + varint(3) + varint(1) + b"y"
                 + struct.pack("<BQ", 0, 2) + varint(1) + b"z")

# Twenty messages: count 0 in the flags, then varint(20).
VARINT_COUNT_BUNDLE = (struct.pack("<B", 0) + varint(20) + struct.pack("<BQ", 0, 9) + varint(0)
                       + (struct.pack("<B", 2) + varint(0)) * 19)


def test_plain_bundle() -> None:
    bundle = build_bundle([Message(b"hello", timestamp=1_700_000_000_000)], compression=False)
    assert bundle.encode() == PLAIN_BUNDLE
    assert frames.Bundle.decode(PLAIN_BUNDLE) == bundle


def test_have_key_bundle() -> None:
    bundle = build_bundle([Message(b"v", key=b"key", timestamp=42)], compression=False)
    assert bundle.encode() == KEYED_BUNDLE
    assert frames.Bundle.decode(KEYED_BUNDLE) == bundle


def test_use_last_specified_ts_bundle() -> None:
    bundle = build_bundle([Message(b"a", timestamp=7), Message(b"b", timestamp=7),
                           Message(b"c", key=b"k", timestamp=7)], compression=False)
    assert bundle.encode() == REUSED_TS_BUNDLE
    chunk = varint(len(REUSED_TS_BUNDLE)) + REUSED_TS_BUNDLE
    assert read_chunk(chunk, 50).messages == [
        ConsumedMessage(50, 7, None, b"a"), ConsumedMessage(51, 7, None, b"b"),
        ConsumedMessage(52, 7, b"k", b"c")]


def test_sparse_bundle_with_seq_num_prev_plus_one() -> None:
    messages = [Message(b"w", timestamp=1, seq_num=100), Message(b"x", timestamp=1, seq_num=101),
                Message(b"y", timestamp=1, seq_num=105), Message(b"z", timestamp=2, seq_num=109)]
    bundle = build_bundle(messages, compression=False, sparse=True)
    assert bundle.encode() == SPARSE_BUNDLE
    assert frames.Bundle.decode(SPARSE_BUNDLE) == bundle
    chunk = varint(len(SPARSE_BUNDLE)) + SPARSE_BUNDLE
    got = read_chunk(chunk, None).messages
    assert [(m.seq_num, m.timestamp, m.value) for m in got] == [
        (100, 1, b"w"), (101, 1, b"x"), (105, 1, b"y"), (109, 2, b"z")]


def test_varint_count_bundle() -> None:
    bundle = build_bundle([Message(b"", timestamp=9)] * 20, compression=False)
    assert bundle.encode() == VARINT_COUNT_BUNDLE


def test_snappy_bundle_header_stays_plain() -> None:
    messages = [Message(b"m" * 50, timestamp=3)] * 3
    bundle = build_bundle(messages, compression=True)
    wire = bundle.encode()
    assert wire[0] == 1 | 3 << 2  # codec 1, three messages
    raw = (struct.pack("<BQ", 0, 3) + varint(50) + b"m" * 50
           + (struct.pack("<B", 2) + varint(50) + b"m" * 50) * 2)
    assert bytes(cramjam.snappy.decompress_raw(wire[1:])) == raw


# -- whole frames -------------------------------------------------------------------------------

PING = framed(3, b"")

PRODUCE_HEAD = struct.pack("<HI", 2, 9) + str8("protoframe") + struct.pack("<BI", 0, 0)
PRODUCE = framed(1, PRODUCE_HEAD + struct.pack("<B", 1) + str8("events") + struct.pack("<B", 1)
                 + struct.pack("<H", 3) + varint(len(KEYED_BUNDLE)) + KEYED_BUNDLE)
# With a seq num: u64 first_msg_seqnum between the bundle length and the bundle.
PRODUCE_SEQ = framed(5, PRODUCE_HEAD + struct.pack("<B", 1) + str8("events")
                     + struct.pack("<B", 1) + struct.pack("<H", 3) + varint(len(SPARSE_BUNDLE))
                     + struct.pack("<Q", 100) + SPARSE_BUNDLE)
CONSUME = framed(2, struct.pack("<HI", 2, 10) + str8("") + struct.pack("<QI", 250, 16)
                 + struct.pack("<B", 2)
                 + str8("events") + struct.pack("<B", 2) + struct.pack("<HQI", 0, 0, 4096)
                 + struct.pack("<HQI", 1, 2**64 - 1, 100)
                 + str8("other") + struct.pack("<B", 1) + struct.pack("<HQI", 0, 17, 1))
# Statuses: ok, invalid seq nums, other leader 10.0.0.1:11011 (address bytes in network order),
# unknown topic.
PRODUCE_RESPONSE = framed(1, struct.pack("<I", 9) + struct.pack("<BB", 0, 10)
                          + struct.pack("<B", 0xFC) + bytes([10, 0, 0, 1])
                          + struct.pack("<H", 11011) + struct.pack("<B", 0xFF))
CHUNK = varint(len(PLAIN_BUNDLE)) + PLAIN_BUNDLE + varint(len(SPARSE_BUNDLE)) + SPARSE_BUNDLE[:9]
CONSUME_HEADER = (struct.pack("<I", 10) + struct.pack("<B", 2) + str8("events")
                  + struct.pack("<B", 3)
                  + struct.pack("<HBQQI", 0, 0, 40, 109, len(CHUNK))
                  + struct.pack("<HBQQIQ", 1, 1, 0, 109, 0, 40)
                  + struct.pack("<HB", 2, 0xFF)
                  + str8("gone") + struct.pack("<BH", 1, 0xFFFF))
CONSUME_RESPONSE = framed(2, struct.pack("<I", len(CONSUME_HEADER)) + CONSUME_HEADER + CHUNK)

EXPECTED: dict[str, tuple[bytes, Any, bool]] = {
    "ping": (PING, frames.Ping(), True),
    "produce": (PRODUCE, frames.ProduceRequest(
        client_version=2, request_id=9, client_id="protoframe", required_acks=0, ack_timeout=0,
        topics=[frames.ProduceTopic(name="events", partitions=[frames.ProducePartition(
            partition=3, bundle=frames.Bundle.decode(KEYED_BUNDLE))])]), True),
    "produce_with_seqnum": (PRODUCE_SEQ, frames.ProduceWithSeqnumRequest(
        client_version=2, request_id=9, client_id="protoframe", required_acks=0, ack_timeout=0,
        topics=[frames.ProduceTopic(name="events", partitions=[frames.ProducePartition(
            partition=3, first_msg_seqnum=100,
            bundle=frames.Bundle.decode(SPARSE_BUNDLE))])]), True),
    "consume": (CONSUME, frames.ConsumeRequest(
        client_version=2, request_id=10, client_id="", max_wait_ms=250, min_bytes=16, topics=[
            frames.ConsumeTopic(name="events", partitions=[
                frames.ConsumePartition(partition=0, abs_seq_num=0, fetch_size=4096),
                frames.ConsumePartition(partition=1, abs_seq_num=2**64 - 1, fetch_size=100)]),
            frames.ConsumeTopic(name="other", partitions=[
                frames.ConsumePartition(partition=0, abs_seq_num=17, fetch_size=1)])]), True),
    "produce_response": (PRODUCE_RESPONSE, frames.ProduceResponse(request_id=9, statuses=[
        frames.ProduceStatus(error=0), frames.ProduceStatus(error=10),
        frames.ProduceStatus(error=0xFC, leader_addr=0x0100000A, leader_port=11011),
        frames.ProduceStatus(error=0xFF)]), False),
    "consume_response": (CONSUME_RESPONSE, frames.ConsumeResponse(request_id=10, topics=[
        frames.ConsumeTopicResult(name="events", partitions_cnt=3, partitions=[
            frames.ConsumePartitionResult(partition=0, error_or_flags=0, base_seqnum=40,
                                          highwater_mark=109, chunk_length=len(CHUNK)),
            frames.ConsumePartitionResult(partition=1, error_or_flags=1, base_seqnum=0,
                                          highwater_mark=109, chunk_length=0,
                                          first_available_seqnum=40),
            frames.ConsumePartitionResult(partition=2, error_or_flags=0xFF)]),
        frames.ConsumeTopicResult(name="gone", partitions_cnt=1, unknown=True)],
        chunks=CHUNK), False),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_frame_bytes(name: str) -> None:
    wire, body, to_server = EXPECTED[name]
    assert frames.Frame(body=body).encode() == wire
    assert frames.Frame.decode(wire, to_server=to_server) == frames.Frame(body=body)


def test_consume_response_chunk_ends_in_a_cut_bundle() -> None:
    contents = read_chunk(CHUNK, 40)
    assert contents.messages == [ConsumedMessage(40, 1_700_000_000_000, None, b"hello")]
    assert contents.next_seq_num == 41
    assert contents.whole_bundles == 1
    assert contents.tail == 1 + 9 and contents.needed == 1 + len(SPARSE_BUNDLE)
