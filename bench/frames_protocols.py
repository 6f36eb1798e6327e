"""One representative frame per protocol besides Pulsar, with a hand-written ``struct`` codec each.

For ``bench frames``: every case decodes a frame and reads its values, and builds a frame from
the values and encodes it, once with the generated bindings (ours) and once with the code a
person would hand-write with ``struct`` for exactly that frame. The hand-written decoders
check what the generated ones check on these bytes (sizes, constants, counts, lengths, the
end of every part) and read any count, length and field order, so neither side skips work
the other does. ``check_cases`` proves, before anything is timed, that both encode the same
bytes and decode the same values.

* TANK: a PRODUCE request (to the broker) for one topic and partition, whose bundle holds
  three keyed messages with timestamps; a CONSUME response (from the broker) for a topic of
  two partitions with data and a topic the broker does not know; the batch is one bundle of
  1,000 such messages.
* Pravega: an APPEND_BLOCK_END carrying four whole events, read down to the event payloads;
  the batch is an ``EventRun`` of 1,000 events of 100 bytes.
* TubeMQ: a SEND_MESSAGE_P2B request: the frame's blocks, the three varint-delimited
  protobuf messages of its content and the SendMessageRequestP2B inside RequestBody.request.
  TubeMQ has no batches.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from struct import Struct
from typing import Any
from uuid import UUID

from bench.bench_frames import pb_read_varint, pb_skip, pb_varint
from protoframe.generated.pravega import frames as pravega
from protoframe.generated.tank import frames as tank
from protoframe.generated.tubemq import frames as tubemq
from protoframe.generated.tubemq import machines as tubemq_machines
from protoframe.generated.tubemq.broker_service import SendMessageRequestP2B

BATCH_SIZE = 1000


@dataclass(frozen=True)
class Case:
    """One protocol's frame: both codecs, in both directions, and the values they agree on."""

    protocol: str
    title: str
    wire: bytes
    expected: tuple[Any, ...]
    ours_decode: Callable[[bytes], tuple[Any, ...]]
    hand_decode: Callable[[bytes], tuple[Any, ...]]
    ours_encode: Callable[[], bytes]
    hand_encode: Callable[[], bytes]


@dataclass(frozen=True)
class BatchCase:
    """One protocol's batch: both decoders return one tuple per message."""

    protocol: str
    title: str
    data: bytes
    count: int
    ours_decode: Callable[[bytes], object]
    ours_values: Callable[[bytes], list[tuple[Any, ...]]]
    hand_decode: Callable[[bytes], list[tuple[Any, ...]]]


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """LEB128 at ``pos`` (TANK and protobuf share it): (value, next position)."""
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    return pb_read_varint(buf, pos)


def _need(ok: bool, what: str) -> None:
    if not ok:
        raise ValueError(what)


# --------------------------------------------------------------------------------------------
# TANK: little-endian; str8 strings; LEB128 varints.

_U8 = Struct("<B")
_U16LE = Struct("<H")
_U32LE = Struct("<I")
_U64LE = Struct("<Q")
_TANK_HEAD = Struct("<BI")  # msg_id, size
_TANK_PRODUCE_HEAD = Struct("<HI")  # client_version, request_id
_TANK_ACKS = Struct("<BI")  # required_acks, ack_timeout

TANK_REQUEST_ID = 4242
TANK_CLIENT_ID = "bench-producer"
TANK_ACKS = 1
TANK_ACK_TIMEOUT = 5000
TANK_TOPIC = "orders"
TANK_PARTITION = 3
TANK_MESSAGES: tuple[tuple[bytes, int, bytes], ...] = (  # (key, timestamp ms, content)
    (b"customer-17", 1_700_000_000_000, b'{"order_id": 4242, "amount": 1999}'),
    (b"customer-18", 1_700_000_000_001, b'{"order_id": 4243, "amount": 250}'),
    (b"customer-17", 1_700_000_000_002, b'{"order_id": 4244, "amount": 77}'),
)
# (request_id, client_id, required_acks, ack_timeout, topic, partition, messages)
TANK_EXPECTED = (TANK_REQUEST_ID, TANK_CLIENT_ID, TANK_ACKS, TANK_ACK_TIMEOUT, TANK_TOPIC,
                 TANK_PARTITION, TANK_MESSAGES)


def tank_ours_encode() -> bytes:
    messages = [tank.Message(flags=1, timestamp=ts, key=key, content=content)
                for key, ts, content in TANK_MESSAGES]
    bundle = tank.Bundle(codec=0, sparse=False, msg_count=len(messages),
                         messages=tank.MessageSet(messages=messages))
    return tank.Frame(body=tank.ProduceRequest(
        client_version=2, request_id=TANK_REQUEST_ID, client_id=TANK_CLIENT_ID,
        required_acks=TANK_ACKS, ack_timeout=TANK_ACK_TIMEOUT,
        topics=[tank.ProduceTopic(name=TANK_TOPIC, partitions=[
            tank.ProducePartition(partition=TANK_PARTITION, bundle=bundle)])])).encode()


def tank_ours_decode(data: bytes) -> tuple[Any, ...]:
    body = tank.Frame.decode(data, to_server=True).body
    assert isinstance(body, tank.ProduceRequest)
    topic = body.topics[0]
    part = topic.partitions[0]
    messages = part.bundle.messages
    assert messages is not None
    return (body.request_id, body.client_id, body.required_acks, body.ack_timeout, topic.name,
            part.partition,
            tuple([(m.key, m.timestamp, m.content) for m in messages.messages]))


def tank_hand_messages(buf: bytes, pos: int, end: int, count: int
                       ) -> tuple[list[tuple[bytes | None, int | None, bytes]], int]:
    """A non-sparse bundle's message set: (key, timestamp, content) per message."""
    out: list[tuple[bytes | None, int | None, bytes]] = []
    append = out.append
    unpack_u64 = _U64LE.unpack_from
    for _ in range(count):
        _need(pos < end, "message truncated")
        flags = buf[pos]
        pos += 1
        ts = None
        if not flags & 2:
            _need(pos + 8 <= end, "timestamp truncated")
            (ts,) = unpack_u64(buf, pos)
            pos += 8
        key = None
        if flags & 1:
            _need(pos < end, "key truncated")
            n = buf[pos]
            key = buf[pos + 1:pos + 1 + n]
            pos += 1 + n
        n, pos = read_varint(buf, pos)
        content_end = pos + n
        _need(content_end <= end, "content truncated")
        append((key, ts, buf[pos:content_end]))
        pos = content_end
    return out, pos


def tank_hand_bundle(buf: bytes, pos: int, end: int
                     ) -> tuple[list[tuple[bytes | None, int | None, bytes]], int]:
    """An uncompressed, non-sparse bundle (the only kind these cases send)."""
    _need(pos < end, "bundle truncated")
    flags = buf[pos]
    pos += 1
    _need(flags & 0x43 == 0, "compressed or sparse bundle")
    count = flags >> 2 & 0xF
    if count == 0:
        count, pos = read_varint(buf, pos)
    return tank_hand_messages(buf, pos, end, count)


def tank_hand_decode(data: bytes) -> tuple[Any, ...]:
    end = len(data)
    msg_id, size = _TANK_HEAD.unpack_from(data, 0)
    _need(msg_id == 1 and 5 + size == end, "not one PRODUCE frame")
    _version, request_id = _TANK_PRODUCE_HEAD.unpack_from(data, 5)
    n = data[11]
    client_id = data[12:12 + n].decode()
    pos = 12 + n
    acks, ack_timeout = _TANK_ACKS.unpack_from(data, pos)
    topics_cnt = data[pos + 5]
    pos += 6
    _need(topics_cnt == 1, "one topic expected")
    n = data[pos]
    topic = data[pos + 1:pos + 1 + n].decode()
    pos += 1 + n
    _need(data[pos] == 1, "one partition expected")
    (partition,) = _U16LE.unpack_from(data, pos + 1)
    length, pos = read_varint(data, pos + 3)
    bundle_end = pos + length
    _need(bundle_end == end, "bundle length mismatch")
    messages, pos = tank_hand_bundle(data, pos, bundle_end)
    _need(pos == bundle_end, "bytes after the message set")
    return (request_id, client_id, acks, ack_timeout, topic, partition, tuple(messages))


def tank_hand_message_set(messages: tuple[tuple[bytes, int, bytes], ...]) -> bytes:
    parts: list[bytes] = []
    for key, ts, content in messages:
        parts += (b"\x01", _U64LE.pack(ts), _U8.pack(len(key)), key, pb_varint(len(content)),
                  content)
    count = len(messages)
    flags = _U8.pack(count << 2) if 0 < count < 16 else b"\x00" + pb_varint(count)
    return flags + b"".join(parts)


def tank_hand_encode() -> bytes:
    bundle = tank_hand_message_set(TANK_MESSAGES)
    client_id = TANK_CLIENT_ID.encode()
    topic = TANK_TOPIC.encode()
    body = b"".join((
        _TANK_PRODUCE_HEAD.pack(2, TANK_REQUEST_ID), _U8.pack(len(client_id)), client_id,
        _TANK_ACKS.pack(TANK_ACKS, TANK_ACK_TIMEOUT), b"\x01", _U8.pack(len(topic)), topic,
        b"\x01", _U16LE.pack(TANK_PARTITION), pb_varint(len(bundle)), bundle))
    return _TANK_HEAD.pack(1, len(body)) + body


def tank_batch() -> bytes:
    """A bundle of BATCH_SIZE keyed messages, as a consume chunk carries it."""
    messages = [tank.Message(flags=1, timestamp=1_700_000_000_000 + i, key=f"k{i % 64}".encode(),
                             content=bytes([i & 0xFF]) * 100) for i in range(BATCH_SIZE)]
    return tank.Bundle(codec=0, sparse=False, msg_count=BATCH_SIZE,
                       messages=tank.MessageSet(messages=messages)).encode()


def tank_batch_values(data: bytes) -> list[tuple[Any, ...]]:
    messages = tank.Bundle.decode(data).messages
    assert messages is not None
    return [(m.key, m.timestamp, m.content) for m in messages.messages]


def tank_hand_batch(data: bytes) -> list[tuple[Any, ...]]:
    messages, pos = tank_hand_bundle(data, 0, len(data))
    _need(pos == len(data), "bytes after the bundle")
    values: list[tuple[Any, ...]] = list(messages)
    return values


# TANK's CONSUME response (from the broker): a header measured by its length, one topic with
# two partitions holding data and one topic the broker does not know (its 0xffff marker),
# then the chunks.
_TANK_CONSUME_HEAD = Struct("<II")  # header_length, request_id
_TANK_PARTITION_HEAD = Struct("<HB")  # partition, error_or_flags
_TANK_PARTITION_DATA = Struct("<QQI")  # base_seqnum, highwater_mark, chunk_length
TANK_CONSUME_PARTITIONS = ((0, 1_000, 1_250, 6), (1, 77, 90, 4))  # partition, base, hw, chunk
TANK_CONSUME_UNKNOWN = ("gone", 2)  # topic name, partitions asked for
TANK_CONSUME_CHUNKS = b"chunk!" + b"more"
TANK_CONSUME_EXPECTED = (TANK_REQUEST_ID, ((TANK_TOPIC, False, TANK_CONSUME_PARTITIONS),
                                           (TANK_CONSUME_UNKNOWN[0], True, ())),
                         TANK_CONSUME_CHUNKS)


def tank_consume_ours_encode() -> bytes:
    partitions = [tank.ConsumePartitionResult(partition=p, error_or_flags=0, base_seqnum=base,
                                              highwater_mark=hw, chunk_length=chunk)
                  for p, base, hw, chunk in TANK_CONSUME_PARTITIONS]
    name, asked = TANK_CONSUME_UNKNOWN
    return tank.Frame(body=tank.ConsumeResponse(request_id=TANK_REQUEST_ID, topics=[
        tank.ConsumeTopicResult(name=TANK_TOPIC, partitions_cnt=len(partitions),
                                partitions=partitions),
        tank.ConsumeTopicResult(name=name, partitions_cnt=asked, unknown=True)],
        chunks=TANK_CONSUME_CHUNKS)).encode()


def tank_consume_ours_decode(data: bytes) -> tuple[Any, ...]:
    body = tank.Frame.decode(data, to_server=False).body
    assert isinstance(body, tank.ConsumeResponse)
    return (body.request_id, tuple([
        (t.name, t.unknown, () if t.partitions is None else tuple([
            (p.partition, p.base_seqnum, p.highwater_mark, p.chunk_length)
            for p in t.partitions])) for t in body.topics]), body.chunks)


def tank_consume_hand_decode(data: bytes) -> tuple[Any, ...]:
    end = len(data)
    msg_id, size = _TANK_HEAD.unpack_from(data, 0)
    _need(msg_id == 2 and 5 + size == end, "not one CONSUME frame")
    header_length, request_id = _TANK_CONSUME_HEAD.unpack_from(data, 5)
    header_end = 9 + header_length
    _need(header_end <= end, "header truncated")
    topics_cnt = data[13]
    pos = 14
    topics: list[tuple[str, bool, tuple[tuple[int, ...], ...]]] = []
    for _ in range(topics_cnt):
        n = data[pos]
        name = data[pos + 1:pos + 1 + n].decode()
        count = data[pos + 1 + n]
        pos += 2 + n
        if data[pos:pos + 2] == b"\xff\xff":
            topics.append((name, True, ()))
            pos += 2
            continue
        partitions = []
        for _ in range(count):
            partition, kind = _TANK_PARTITION_HEAD.unpack_from(data, pos)
            _need(kind == 0, "data partitions expected")
            partitions.append((partition, *_TANK_PARTITION_DATA.unpack_from(data, pos + 3)))
            pos += 23
        topics.append((name, False, tuple(partitions)))
    _need(pos == header_end, "header length mismatch")
    return (request_id, tuple(topics), data[header_end:])


def tank_consume_hand_encode() -> bytes:
    topic = TANK_TOPIC.encode()
    parts = [_TANK_PARTITION_HEAD.pack(p, 0) + _TANK_PARTITION_DATA.pack(base, hw, chunk)
             for p, base, hw, chunk in TANK_CONSUME_PARTITIONS]
    name, asked = TANK_CONSUME_UNKNOWN
    gone = name.encode()
    header = b"".join((_U8.pack(2), _U8.pack(len(topic)), topic, _U8.pack(len(parts)), *parts,
                       _U8.pack(len(gone)), gone, _U8.pack(asked), b"\xff\xff"))
    body = b"".join((_TANK_CONSUME_HEAD.pack(4 + len(header), TANK_REQUEST_ID), header,
                     TANK_CONSUME_CHUNKS))
    return _TANK_HEAD.pack(2, len(body)) + body


# --------------------------------------------------------------------------------------------
# Pravega: big-endian; i32 type + i32 length framing, also for the events in append data.

_PRAVEGA_HEAD = Struct(">ii")  # type, length
_PRAVEGA_I32 = Struct(">i")
_PRAVEGA_TAIL = Struct(">iq")  # num_events, last_event_number
_PRAVEGA_I64 = Struct(">q")
APPEND_BLOCK_END = 4

PRAVEGA_WRITER = UUID("5f0c3a3e-7d2b-4c1e-9a57-2f4d1b8e6c90")
PRAVEGA_EVENTS: tuple[bytes, ...] = tuple(
    f'{{"order_id": {4242 + i}, "amount": {199 * (i + 1)}}}'.encode() for i in range(4))
PRAVEGA_LAST_EVENT = 1_000_003
PRAVEGA_REQUEST_ID = 77
# (writer_id, size_of_whole_events, num_events, last_event_number, request_id, events)
PRAVEGA_EXPECTED = (PRAVEGA_WRITER, 0, len(PRAVEGA_EVENTS), PRAVEGA_LAST_EVENT,
                    PRAVEGA_REQUEST_ID, PRAVEGA_EVENTS)


def pravega_ours_encode() -> bytes:
    data = pravega.EventRun(events=[pravega.Event(data=e) for e in PRAVEGA_EVENTS]).encode()
    return pravega.Frame(body=pravega.AppendBlockEnd(
        writer_id=PRAVEGA_WRITER, size_of_whole_events=0, data=data,
        num_events=len(PRAVEGA_EVENTS), last_event_number=PRAVEGA_LAST_EVENT,
        request_id=PRAVEGA_REQUEST_ID)).encode()


def pravega_ours_decode(data: bytes) -> tuple[Any, ...]:
    body = pravega.Frame.decode(data).body
    assert isinstance(body, pravega.AppendBlockEnd)
    events = pravega.EventRun.decode(body.data).events
    return (body.writer_id, body.size_of_whole_events, body.num_events, body.last_event_number,
            body.request_id, tuple([e.data for e in events]))


def pravega_hand_events(buf: bytes, pos: int, end: int) -> list[bytes]:
    out: list[bytes] = []
    append = out.append
    unpack = _PRAVEGA_HEAD.unpack_from
    while pos < end:
        _need(pos + 8 <= end, "event header truncated")
        kind, length = unpack(buf, pos)
        _need(kind == 0, "not an event")
        pos += 8
        stop = pos + length
        _need(length >= 0 and stop <= end, "event truncated")
        append(buf[pos:stop])
        pos = stop
    return out


def pravega_hand_decode(data: bytes) -> tuple[Any, ...]:
    end = len(data)
    kind, length = _PRAVEGA_HEAD.unpack_from(data, 0)
    _need(kind == APPEND_BLOCK_END and 8 + length == end, "not one APPEND_BLOCK_END frame")
    writer = UUID(bytes=data[8:24])
    whole, size = _PRAVEGA_HEAD.unpack_from(data, 24)
    pos = 32
    data_end = pos + size
    _need(size >= 0 and data_end + 12 <= end, "data truncated")
    events = pravega_hand_events(data, pos, data_end)
    num_events, last_event = _PRAVEGA_TAIL.unpack_from(data, data_end)
    pos = data_end + 12
    # The request id is a later wire version's addition: absent, it reads as -1.
    request_id = _PRAVEGA_I64.unpack_from(data, pos)[0] if pos + 8 <= end else -1
    return (writer, whole, num_events, last_event, request_id, tuple(events))


def pravega_hand_event_run(events: tuple[bytes, ...]) -> bytes:
    pack = _PRAVEGA_HEAD.pack
    return b"".join([b for e in events for b in (pack(0, len(e)), e)])


def pravega_hand_encode() -> bytes:
    data = pravega_hand_event_run(PRAVEGA_EVENTS)
    body = b"".join((PRAVEGA_WRITER.bytes, _PRAVEGA_HEAD.pack(0, len(data)), data,
                     _PRAVEGA_TAIL.pack(len(PRAVEGA_EVENTS), PRAVEGA_LAST_EVENT),
                     _PRAVEGA_I64.pack(PRAVEGA_REQUEST_ID)))
    return _PRAVEGA_HEAD.pack(APPEND_BLOCK_END, len(body)) + body


def pravega_batch() -> bytes:
    return pravega.EventRun(events=[pravega.Event(data=bytes([i & 0xFF]) * 100)
                                    for i in range(BATCH_SIZE)]).encode()


def pravega_batch_values(data: bytes) -> list[tuple[Any, ...]]:
    return [(e.data,) for e in pravega.EventRun.decode(data).events]


def pravega_hand_batch(data: bytes) -> list[tuple[Any, ...]]:
    return [(e,) for e in pravega_hand_events(data, 0, len(data))]


# --------------------------------------------------------------------------------------------
# TubeMQ: big-endian blocks around three varint-delimited protobuf messages.

_TUBEMQ_HEAD = Struct(">III")  # token, serial_no, block count
_U32BE = Struct(">I")
TUBEMQ_TOKEN = 0xFF7FF4FE
TUBEMQ_BLOCK_SIZE = 8192
SEND_MESSAGE_P2B = 13

TUBEMQ_SERIAL = 31_337
TUBEMQ_SEND: tuple[Any, ...] = (  # SendMessageRequestP2B's fields 1-9, in order
    "bench-producer-1", "orders", 7, b'{"order_id": 4242, "amount": 1999}' * 4, 0, -1,
    0x7F000001, "json", "20261126150000")
# (serial_no, flag, serviceType, protocolVer, method, *SendMessageRequestP2B fields 1-9)
TUBEMQ_EXPECTED = (TUBEMQ_SERIAL, 0, 3, 3, SEND_MESSAGE_P2B, *TUBEMQ_SEND)


def tubemq_ours_encode() -> bytes:
    client_id, topic, partition, data, flag, check_sum, sent_addr, msg_type, msg_time = (
        TUBEMQ_SEND)
    body = SendMessageRequestP2B(
        clientId=client_id, topicName=topic, partitionId=partition, data=data, flag=flag,
        checkSum=check_sum, sentAddr=sent_addr, msgType=msg_type, msgTime=msg_time)
    return tubemq_machines.frame_of_send_message_p2b(body, serial_no=TUBEMQ_SERIAL).encode()


def tubemq_ours_decode(data: bytes) -> tuple[Any, ...]:
    frame = tubemq.Frame.decode(data)
    content = frame.content
    request = content.request
    assert request is not None
    header = request.header
    body = request.body
    m = SendMessageRequestP2B.decode(body.request)
    return (frame.serial_no, content.conn_header.flag, header.serviceType, header.protocolVer,
            body.method, m.clientId, m.topicName, m.partitionId, m.data, m.flag, m.checkSum,
            m.sentAddr, m.msgType, m.msgTime)


def _int32(value: int) -> int:
    """A protobuf int32 read as a varint (negative values travel as 10-byte varints)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _pb_fields(buf: bytes, pos: int, end: int) -> dict[int, Any]:
    """Field number -> last value (int for varints, bytes for length-delimited fields)."""
    fields: dict[int, Any] = {}
    while pos < end:
        tag, pos = read_varint(buf, pos)
        wire_type = tag & 7
        if wire_type == 0:
            fields[tag >> 3], pos = read_varint(buf, pos)
        elif wire_type == 2:
            n, pos = read_varint(buf, pos)
            stop = pos + n
            _need(stop <= end, "field truncated")
            fields[tag >> 3] = buf[pos:stop]
            pos = stop
        else:
            pos = pb_skip(buf, pos, tag)
    _need(pos == end, "message truncated")
    return fields


def _delimited(buf: bytes, pos: int, end: int) -> tuple[dict[int, Any], int]:
    n, pos = read_varint(buf, pos)
    _need(pos + n <= end, "message truncated")
    return _pb_fields(buf, pos, pos + n), pos + n


def tubemq_hand_decode(data: bytes) -> tuple[Any, ...]:
    end = len(data)
    token, serial, blocks = _TUBEMQ_HEAD.unpack_from(data, 0)
    _need(token == TUBEMQ_TOKEN, "bad token")
    _need(0 < blocks <= 3584, "bad block count")
    pos = 12
    parts = []
    for _ in range(blocks):
        (n,) = _U32BE.unpack_from(data, pos)
        pos += 4
        _need(n <= TUBEMQ_BLOCK_SIZE and pos + n <= end, "bad block")
        parts.append(data[pos:pos + n])
        pos += n
    _need(pos == end, "bytes after the blocks")
    content = parts[0] if blocks == 1 else b"".join(parts)
    stop = len(content)
    conn, pos = _delimited(content, 0, stop)
    flag = _int32(conn[1])
    _need(flag != 1, "a response")
    header, pos = _delimited(content, pos, stop)
    body, pos = _delimited(content, pos, stop)
    _need(1 in body, "RequestBody.method missing")
    method = _int32(body[1])
    _need(method == SEND_MESSAGE_P2B, "not SEND_MESSAGE_P2B")
    request = body.get(3, b"")
    m = _pb_fields(request, 0, len(request))
    _need(all(f in m for f in range(1, 8)), "SendMessageRequestP2B: required field missing")
    return (serial, flag, _int32(header.get(1, 0)), _int32(header.get(2, 0)), method,
            m[1].decode(), m[2].decode(), _int32(m[3]), m[4], _int32(m[5]), _int32(m[6]),
            _int32(m[7]), m[8].decode() if 8 in m else "", m[9].decode() if 9 in m else "")


def pb_int_field(field: int, value: int) -> bytes:
    return pb_varint(field << 3) + pb_varint(value & 0xFFFFFFFFFFFFFFFF)


def pb_bytes_field(field: int, value: bytes) -> bytes:
    return b"".join((pb_varint(field << 3 | 2), pb_varint(len(value)), value))


def tubemq_hand_encode() -> bytes:
    client_id, topic, partition, data, flag, check_sum, sent_addr, msg_type, msg_time = (
        TUBEMQ_SEND)
    send = b"".join((
        pb_bytes_field(1, client_id.encode()), pb_bytes_field(2, topic.encode()),
        pb_int_field(3, partition), pb_bytes_field(4, data), pb_int_field(5, flag),
        pb_int_field(6, check_sum), pb_int_field(7, sent_addr),
        pb_bytes_field(8, msg_type.encode()), pb_bytes_field(9, msg_time.encode())))
    conn = pb_int_field(1, 0)
    header = pb_int_field(1, 3) + pb_int_field(2, 3)
    body = pb_int_field(1, SEND_MESSAGE_P2B) + pb_bytes_field(3, send)
    content = b"".join((pb_varint(len(conn)), conn, pb_varint(len(header)), header,
                        pb_varint(len(body)), body))
    blocks = [content[i:i + TUBEMQ_BLOCK_SIZE]
              for i in range(0, len(content), TUBEMQ_BLOCK_SIZE)]
    return b"".join((_TUBEMQ_HEAD.pack(TUBEMQ_TOKEN, TUBEMQ_SERIAL, len(blocks)),
                     *[_U32BE.pack(len(b)) + b for b in blocks]))


# --------------------------------------------------------------------------------------------


def frame_cases() -> list[Case]:
    return [
        Case("TANK", "PRODUCE, 3 keyed msgs", tank_ours_encode(), TANK_EXPECTED,
             tank_ours_decode, tank_hand_decode, tank_ours_encode, tank_hand_encode),
        Case("TANK", "CONSUME response, 2 topics", tank_consume_ours_encode(),
             TANK_CONSUME_EXPECTED, tank_consume_ours_decode, tank_consume_hand_decode,
             tank_consume_ours_encode, tank_consume_hand_encode),
        Case("Pravega", "APPEND_BLOCK_END, 4 events", pravega_ours_encode(), PRAVEGA_EXPECTED,
             pravega_ours_decode, pravega_hand_decode, pravega_ours_encode,
             pravega_hand_encode),
        Case("TubeMQ", "SEND_MESSAGE_P2B", tubemq_ours_encode(), TUBEMQ_EXPECTED,
             tubemq_ours_decode, tubemq_hand_decode, tubemq_ours_encode, tubemq_hand_encode),
    ]


def batch_cases() -> list[BatchCase]:
    return [
        BatchCase("TANK", f"Bundle.decode, {BATCH_SIZE} keyed msgs", tank_batch(), BATCH_SIZE,
                  tank.Bundle.decode, tank_batch_values, tank_hand_batch),
        BatchCase("Pravega", f"EventRun.decode, {BATCH_SIZE} events", pravega_batch(),
                  BATCH_SIZE, pravega.EventRun.decode, pravega_batch_values,
                  pravega_hand_batch),
    ]


def check_cases(cases: list[Case], batches: list[BatchCase]) -> None:
    """Same bytes and values from both codecs of every case; raises on the first difference."""
    for case in cases:
        name = f"{case.protocol} {case.title}"
        for side, encode in (("ours", case.ours_encode), ("struct", case.hand_encode)):
            got = encode()
            if got != case.wire:
                raise AssertionError(f"{name}: {side} encodes other bytes:\n  {got.hex()}\n"
                                     f"  expected {case.wire.hex()}")
        for side, decode in (("ours", case.ours_decode), ("struct", case.hand_decode)):
            values = decode(case.wire)
            if values != case.expected:
                raise AssertionError(f"{name}: {side} decodes {values!r}, "
                                     f"expected {case.expected!r}")
            for cut in (len(case.wire) - 1, len(case.wire) // 2):
                try:
                    decode(case.wire[:cut])
                except Exception:
                    continue
                raise AssertionError(f"{name}: {side} accepts the frame cut to {cut} bytes")
    for batch in batches:
        ours = batch.ours_values(batch.data)
        hand = batch.hand_decode(batch.data)
        if len(ours) != batch.count or ours != hand:
            raise AssertionError(f"{batch.protocol} {batch.title}: ours and struct decode "
                                 f"different messages ({len(ours)} and {len(hand)})")
