"""A representative frame of each example protocol (examples/), with a hand-written ``struct``
codec each, as ``bench.frames_protocols`` has them for TANK, Pravega and TubeMQ.

The examples are user projects: each has its own generated package, checked in under its
``src/``, which is put on ``sys.path`` here as its project has it. The hand-written codecs
check what the generated ones check on these bytes (sizes, constants, reserved bits, enum
values, the end of every part) and read every length and flag, so neither side skips work the
other does.

* MariaDB: a text-protocol result-set row packet (``Packet`` holding a ``RowPacket``) of five
  length-encoded strings, one of them NULL.
* AMQP: a basic.publish method frame followed by its content header frame with six of the
  basic class's properties.
* WebSocket: a client's masked text frame of 125 bytes (the longest with a 7-bit length) and
  one of 300 bytes (a 16-bit length).
"""

from __future__ import annotations

import sys
from pathlib import Path
from struct import Struct
from typing import Any

from bench.frames_protocols import Case, _need

_EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
for _name in ("mariadb", "amqp", "websocket"):
    _src = str(_EXAMPLES / _name / "src")
    if _src not in sys.path:
        sys.path.insert(0, _src)

from amqp_client.proto.amqp import frames as amqp  # noqa: E402
from mariadb_example.proto.mariadb import frames as mariadb  # noqa: E402
from websocket_app.proto.websocket import frames as websocket  # noqa: E402

_U8 = Struct("<B")
_U32LE = Struct("<I")

# --------------------------------------------------------------------------------------------
# MariaDB: little-endian; a packet is a u24 payload length, the sequence id and the payload.

MARIADB_SEQUENCE = 3
MARIADB_ROW: tuple[bytes | None, ...] = (
    b"4242", b"customer-17", None, b"19.99", b"2026-11-26 15:00:00")
# (sequence id, the row's values)
MARIADB_EXPECTED = (MARIADB_SEQUENCE, MARIADB_ROW)
_NULL = 0xFB


def mariadb_ours_encode() -> bytes:
    row = mariadb.RowPacket(values=[mariadb.Value(value=v) for v in MARIADB_ROW])
    return mariadb.Packet(sequence_id=MARIADB_SEQUENCE, payload=row.encode()).encode()


def mariadb_ours_decode(data: bytes) -> tuple[Any, ...]:
    packet = mariadb.Packet.decode(data)
    values = mariadb.RowPacket.decode(packet.payload).values
    assert values is not None
    return (packet.sequence_id, tuple([v.value for v in values]))


def mariadb_hand_lenenc(buf: bytes, pos: int, end: int) -> tuple[int | None, int]:
    """A length-encoded integer at ``pos``: (value, or None for NULL; next position)."""
    _need(pos < end, "lenenc truncated")
    first = buf[pos]
    if first < 0xFB:
        return first, pos + 1
    if first == _NULL:
        return None, pos + 1
    width = {0xFC: 2, 0xFD: 3, 0xFE: 8}.get(first)
    _need(width is not None and pos + 1 + width <= end, "bad lenenc")
    assert width is not None
    return int.from_bytes(buf[pos + 1:pos + 1 + width], "little"), pos + 1 + width


def mariadb_hand_decode(data: bytes) -> tuple[Any, ...]:
    end = len(data)
    _need(end >= 4, "packet header truncated")
    (head,) = _U32LE.unpack_from(data, 0)
    _need(4 + (head & 0xFFFFFF) == end, "not one packet")
    pos = 4
    # The first byte of a row is never 0xfe (EOF) nor 0xff (ERR).
    _need(pos == end or data[pos] < 0xFE, "not a row")
    values: list[bytes | None] = []
    append = values.append
    while pos < end:
        n, pos = mariadb_hand_lenenc(data, pos, end)
        if n is None:
            append(None)
            continue
        stop = pos + n
        _need(stop <= end, "value truncated")
        append(data[pos:stop])
        pos = stop
    return (head >> 24, tuple(values))


def mariadb_hand_encode() -> bytes:
    parts: list[bytes] = []
    for value in MARIADB_ROW:
        if value is None:
            parts.append(b"\xfb")
        else:
            assert len(value) < 0xFB  # these values take the one-byte length
            parts += (_U8.pack(len(value)), value)
    payload = b"".join(parts)
    return _U32LE.pack(len(payload) | MARIADB_SEQUENCE << 24) + payload


# --------------------------------------------------------------------------------------------
# AMQP: big-endian frames of type, channel and size, ended by 0xCE; short strings (u8 prefix).

_AMQP_HEAD = Struct(">BHI")  # type, channel, size
_AMQP_METHOD = Struct(">IH")  # class id << 16 | method id, reserved-1
_AMQP_HEADER = Struct(">HHQH")  # class id, weight, body size, property flags
_U8BE = Struct(">B")
_U64BE = Struct(">Q")
FRAME_END = 0xCE
BASIC_PUBLISH = 0x003C0028
BASIC_CLASS = 60

AMQP_CHANNEL = 1
AMQP_EXCHANGE = "amq.direct"
AMQP_ROUTING_KEY = "orders"
AMQP_BODY_SIZE = 34
AMQP_PROPERTIES = (  # (content_type, delivery_mode, priority, correlation_id, message_id,
    "application/json", 2, 5, "req-4242", "msg-4242", 1_700_000_000)  # timestamp)
# (channel, exchange, routing key, mandatory, immediate, body size, *properties)
AMQP_EXPECTED = (AMQP_CHANNEL, AMQP_EXCHANGE, AMQP_ROUTING_KEY, True, False, AMQP_BODY_SIZE,
                 *AMQP_PROPERTIES)
# The property flags of the fields above, bit 15 first: content type (15), delivery mode
# (12), priority (11), correlation id (10), message id (7), timestamp (6).
_AMQP_FLAGS = 1 << 15 | 1 << 12 | 1 << 11 | 1 << 10 | 1 << 7 | 1 << 6


def amqp_ours_encode() -> bytes:
    content_type, delivery_mode, priority, correlation_id, message_id, timestamp = (
        AMQP_PROPERTIES)
    method = amqp.Frame(channel=AMQP_CHANNEL, payload=amqp.Method(arguments=amqp.BasicPublish(
        exchange=AMQP_EXCHANGE, routing_key=AMQP_ROUTING_KEY, mandatory=True, immediate=False)))
    header = amqp.Frame(channel=AMQP_CHANNEL, payload=amqp.ContentHeader(
        class_id=BASIC_CLASS, body_size=AMQP_BODY_SIZE, content_type=content_type,
        delivery_mode=delivery_mode, priority=priority, correlation_id=correlation_id,
        message_id=message_id, timestamp=timestamp))
    return method.encode() + header.encode()


def amqp_ours_decode(data: bytes) -> tuple[Any, ...]:
    end = len(data)
    method, pos = amqp.Frame.decode_from(data, 0, end)
    header, pos = amqp.Frame.decode_from(data, pos, end)
    _need(pos == end, "bytes after the content header")
    assert isinstance(method.payload, amqp.Method)
    publish = method.payload.arguments
    assert isinstance(publish, amqp.BasicPublish)
    props = header.payload
    assert isinstance(props, amqp.ContentHeader)
    return (method.channel, publish.exchange, publish.routing_key, publish.mandatory,
            publish.immediate, props.body_size, props.content_type, props.delivery_mode,
            props.priority, props.correlation_id, props.message_id, props.timestamp)


def _amqp_frame(data: bytes, pos: int, end: int, kind: int) -> tuple[int, int, int]:
    """The frame of ``kind`` at ``pos``: (channel, payload start, payload end)."""
    _need(pos + 7 <= end, "frame header truncated")
    got, channel, size = _AMQP_HEAD.unpack_from(data, pos)
    _need(got == kind, "another frame type")
    start = pos + 7
    stop = start + size
    _need(stop < end and data[stop] == FRAME_END, "frame truncated or not ended by 0xCE")
    return channel, start, stop


def _short_string(data: bytes, pos: int, end: int) -> tuple[str, int]:
    _need(pos < end, "short string truncated")
    stop = pos + 1 + data[pos]
    _need(stop <= end, "short string truncated")
    return data[pos + 1:stop].decode(), stop


def amqp_hand_decode(data: bytes) -> tuple[Any, ...]:
    end = len(data)
    channel, pos, stop = _amqp_frame(data, 0, end, 1)
    _need(pos + 6 <= stop, "method truncated")
    method, reserved = _AMQP_METHOD.unpack_from(data, pos)
    _need(method == BASIC_PUBLISH and reserved == 0, "not basic.publish")
    exchange, pos = _short_string(data, pos + 6, stop)
    routing_key, pos = _short_string(data, pos, stop)
    _need(pos + 1 == stop, "basic.publish's size")
    bits = data[pos]
    _need(bits & 0xFC == 0, "reserved bits set")
    _, pos, stop = _amqp_frame(data, stop + 1, end, 2)
    _need(pos + 14 <= stop, "content header truncated")
    class_id, weight, body_size, flags = _AMQP_HEADER.unpack_from(data, pos)
    _need(weight == 0 and flags & 3 == 0, "weight or reserved flags")
    _need(flags == _AMQP_FLAGS, "other properties than these")
    content_type, pos = _short_string(data, pos + 14, stop)
    _need(pos + 2 <= stop, "properties truncated")
    delivery_mode, priority = data[pos], data[pos + 1]
    correlation_id, pos = _short_string(data, pos + 2, stop)
    message_id, pos = _short_string(data, pos, stop)
    _need(pos + 8 == stop, "properties' size")
    (timestamp,) = _U64BE.unpack_from(data, pos)
    _need(stop + 1 == end, "bytes after the content header")
    return (channel, exchange, routing_key, bool(bits & 1), bool(bits & 2), body_size,
            content_type, delivery_mode, priority, correlation_id, message_id, timestamp)


def amqp_hand_encode() -> bytes:
    content_type, delivery_mode, priority, correlation_id, message_id, timestamp = (
        AMQP_PROPERTIES)
    exchange = AMQP_EXCHANGE.encode()
    routing_key = AMQP_ROUTING_KEY.encode()
    method = b"".join((_AMQP_METHOD.pack(BASIC_PUBLISH, 0), _U8BE.pack(len(exchange)),
                       exchange, _U8BE.pack(len(routing_key)), routing_key, b"\x01"))
    ctype = content_type.encode()
    corr = correlation_id.encode()
    mid = message_id.encode()
    header = b"".join((
        _AMQP_HEADER.pack(BASIC_CLASS, 0, AMQP_BODY_SIZE, _AMQP_FLAGS), _U8BE.pack(len(ctype)),
        ctype, bytes((delivery_mode, priority, len(corr))), corr, _U8BE.pack(len(mid)), mid,
        _U64BE.pack(timestamp)))
    return b"".join((_AMQP_HEAD.pack(1, AMQP_CHANNEL, len(method)), method, b"\xce",
                     _AMQP_HEAD.pack(2, AMQP_CHANNEL, len(header)), header, b"\xce"))


# --------------------------------------------------------------------------------------------
# WebSocket: FIN/RSV/opcode and MASK/length bytes, the extended length, the masking key, the
# payload XOR-masked with it.

_WS_HEAD7 = Struct(">BBI")  # b0, b1, masking key
_WS_HEAD16 = Struct(">BBHI")  # b0, b1, 16-bit length, masking key
_WS_OPCODES = frozenset(int(op) for op in websocket.Opcode)
WS_MASK = 0x37FA213D
WS_TEXT_125 = ("{\"order_id\": 4242, \"note\": \"" + "x" * 95 + "\"}").encode()
WS_TEXT_300 = ("{\"order_id\": 4243, \"note\": \"" + "y" * 270 + "\"}").encode()
assert len(WS_TEXT_125) == 125 and len(WS_TEXT_300) == 300


def _xor(payload: bytes, key: int) -> bytes:
    """The payload XOR-ed with the 4-byte key repeated (masking and unmasking alike)."""
    n = len(payload)
    stream = key.to_bytes(4, "big") * (n // 4 + 1)
    return (int.from_bytes(payload, "big") ^ int.from_bytes(stream[:n], "big")).to_bytes(
        n, "big")


def ws_ours_encode(payload: bytes) -> bytes:
    return websocket.Frame(fin=True, opcode=websocket.Opcode.TEXT, masking_key=WS_MASK,
                           payload=payload).encode()


def ws_ours_decode(data: bytes) -> tuple[Any, ...]:
    frame = websocket.Frame.decode(data)
    return (frame.fin, frame.opcode, frame.masking_key, frame.payload)


def ws_hand_decode(data: bytes) -> tuple[Any, ...]:
    end = len(data)
    _need(end >= 2, "header truncated")
    b0, b1 = data[0], data[1]
    _need(b0 & 0x70 == 0, "reserved bits set")
    opcode = b0 & 0xF
    _need(opcode in _WS_OPCODES, "unknown opcode")
    fin = bool(b0 & 0x80)
    _need(bool(b1 & 0x80), "a client's frame is masked")
    length = b1 & 0x7F
    if length < 126:
        _need(end >= 6, "header truncated")
        _, _, key = _WS_HEAD7.unpack_from(data, 0)
        pos = 6
    else:
        _need(length == 126 and end >= 8, "header truncated or a 64-bit length")
        _, _, length, key = _WS_HEAD16.unpack_from(data, 0)
        pos = 8
    _need(pos + length == end, "payload truncated")
    _need(opcode < 8 or (fin and length <= 125), "a control frame's rules")
    return (fin, opcode, key, _xor(data[pos:], key))


def ws_hand_encode(payload: bytes) -> bytes:
    n = len(payload)
    if n < 126:
        head = _WS_HEAD7.pack(0x81, 0x80 | n, WS_MASK)
    else:
        head = _WS_HEAD16.pack(0x81, 0xFE, n, WS_MASK)
    return head + _xor(payload, WS_MASK)


def ws125_ours_encode() -> bytes:
    return ws_ours_encode(WS_TEXT_125)


def ws125_hand_encode() -> bytes:
    return ws_hand_encode(WS_TEXT_125)


def ws300_ours_encode() -> bytes:
    return ws_ours_encode(WS_TEXT_300)


def ws300_hand_encode() -> bytes:
    return ws_hand_encode(WS_TEXT_300)


# --------------------------------------------------------------------------------------------


def example_cases() -> list[Case]:
    text = websocket.Opcode.TEXT
    return [
        Case("MariaDB", "row packet, 5 lenenc values, 1 NULL", mariadb_ours_encode(),
             MARIADB_EXPECTED, mariadb_ours_decode, mariadb_hand_decode, mariadb_ours_encode,
             mariadb_hand_encode),
        Case("AMQP", "basic.publish + content header", amqp_ours_encode(), AMQP_EXPECTED,
             amqp_ours_decode, amqp_hand_decode, amqp_ours_encode, amqp_hand_encode),
        Case("WebSocket", "masked text, 7-bit length", ws125_ours_encode(),
             (True, text, WS_MASK, WS_TEXT_125), ws_ours_decode, ws_hand_decode,
             ws125_ours_encode, ws125_hand_encode),
        Case("WebSocket", "masked text, 16-bit length", ws300_ours_encode(),
             (True, text, WS_MASK, WS_TEXT_300), ws_ours_decode, ws_hand_decode,
             ws300_ours_encode, ws300_hand_encode),
    ]
