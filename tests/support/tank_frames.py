"""TANK frame cases shared by the tests of the generated bindings and of the Spark rows:
hand-written wire bytes with the bodies they encode (one list per direction), and hypothesis
strategies for every request and response.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from protoframe.generated.tank.frames import (
    Bundle,
    ConsumePartition,
    ConsumePartitionResult,
    ConsumeRequest,
    ConsumeResponse,
    ConsumeTopic,
    ConsumeTopicResult,
    Message,
    MessageSet,
    Ping,
    ProducePartition,
    ProduceRequest,
    ProduceResponse,
    ProduceStatus,
    ProduceTopic,
    ProduceWithSeqnumRequest,
)


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


# -- strategies for every message --------------------------------------------------------------

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
