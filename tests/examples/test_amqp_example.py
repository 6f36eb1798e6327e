"""examples/amqp: AMQP 0-9-1 described as a user project (protocols/amqp/amqp.yaml, the
package ``protoframe generate`` wrote into src/amqp_client/proto, a small asyncio client on top).

Unit tests check the generated codecs against frames packed by hand with ``struct`` from the
AMQP 0-9-1 specification (section 4.2 and its class/method definitions), bad input raising its
own errors, and hypothesis round trips. The tests against the real server (Debian's
rabbitmq-server, the session's ``rabbitmq_server`` fixture on 127.0.0.1, so they are
``interop``) record the transport and show that every byte written came from generated
``encode`` and every byte read was consumed by the generated ``StreamDecoder``.
"""

from __future__ import annotations

import asyncio
import struct
import subprocess
import sys
from collections.abc import Iterator, Sequence
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protoframe.runtime.errors import (
    BadMagicError,
    DecodeError,
    ReservedBitsError,
    SizeMismatchError,
    UnknownCommandTypeError,
)
from protoframe.runtime.io.connection import Connection
from tests.support.codec_modes import FIXTURE_PER_TEST
from tests.support.paths import ROOT
from tests.support.rabbitmq_server import RabbitMQ

EXAMPLE = ROOT / "examples" / "amqp"
sys.path.insert(0, str(EXAMPLE / "src"))  # the example's own package, as its project has it

from amqp_client import AmqpClient, ChannelClosedError, from_table, to_table  # noqa: E402
from amqp_client.client import AmqpWire, Outgoing  # noqa: E402
from amqp_client.proto.amqp import frames as f  # noqa: E402

END = b"\xce"


def method_frame(channel: int, class_id: int, method_id: int, arguments: bytes) -> bytes:
    """A method frame as section 4.2.3 lays it out."""
    payload = struct.pack(">HH", class_id, method_id) + arguments
    return struct.pack(">BHI", 1, channel, len(payload)) + payload + END


def shortstr(text: str) -> bytes:
    return struct.pack(">B", len(text)) + text.encode()


def longstr(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


# ---- vectors packed by hand ----

def test_the_protocol_header() -> None:
    assert f.ProtocolHeader().encode() == b"AMQP\x00\x00\x09\x01"
    server = f.StreamDecoder(to_server=True)
    assert server.feed(b"AMQP\x00\x00\x09\x01") == [f.ProtocolHeader()]
    with pytest.raises(BadMagicError):
        f.StreamDecoder(to_server=True).feed(b"AMQP\x01\x01\x00\x09")


def test_connection_tune_and_queue_declare_bits() -> None:
    tune = method_frame(0, 10, 30, struct.pack(">HIH", 2047, 131072, 60))
    frame = f.Frame(channel=0, payload=f.Method(arguments=f.ConnectionTune(
        channel_max=2047, frame_max=131072, heartbeat=60)))
    assert frame.encode() == tune
    assert f.Frame.decode(tune) == frame
    # reserved-1, queue, then passive (bit 0), durable, exclusive, auto-delete, no-wait (bit 4)
    declare = method_frame(1, 50, 10, struct.pack(">H", 0) + shortstr("jobs")
                           + bytes([0b00001010]) + struct.pack(">I", 0))
    frame = f.Frame(channel=1, payload=f.Method(arguments=f.QueueDeclare(
        queue="jobs", passive=False, durable=True, exclusive=False, auto_delete=True,
        no_wait=False, arguments=f.FieldTable(entries=[]))))
    assert frame.encode() == declare
    assert f.Frame.decode(declare) == frame


def test_a_field_table_of_every_type() -> None:
    entries = [
        (b"t", b"\x01"), (b"b", b"\xff"), (b"B", b"\xff"), (b"s", struct.pack(">h", -2)),
        (b"u", struct.pack(">H", 65535)), (b"I", struct.pack(">i", -3)),
        (b"i", struct.pack(">I", 4000000000)), (b"l", struct.pack(">q", -5)),
        (b"L", struct.pack(">Q", 1 << 63)), (b"f", struct.pack(">f", 1.5)),
        (b"d", struct.pack(">d", -0.25)), (b"D", struct.pack(">Bi", 2, 31415)),
        (b"S", longstr(b"RabbitMQ")), (b"T", struct.pack(">Q", 1700000000)),
        (b"V", b""), (b"x", longstr(b"\x00\x01")),
    ]
    inner = shortstr("publisher_confirms") + b"t\x01"
    array = b"I" + struct.pack(">i", 7) + b"S" + longstr(b"seven")
    body = b"".join(shortstr(f"k{i}") + kind + value for i, (kind, value) in enumerate(entries))
    body += shortstr("capabilities") + b"F" + longstr(inner)
    body += shortstr("list") + b"A" + longstr(array)
    table = longstr(body)
    decoded = f.FieldTable.decode(table)
    assert decoded.encode() == table
    values = from_table(decoded)
    assert values == {
        "k0": True, "k1": -1, "k2": 255, "k3": -2, "k4": 65535, "k5": -3, "k6": 4000000000,
        "k7": -5, "k8": 1 << 63, "k9": 1.5, "k10": -0.25, "k11": Decimal("314.15"),
        "k12": "RabbitMQ", "k13": 1700000000, "k14": None, "k15": b"\x00\x01",
        "capabilities": {"publisher_confirms": True}, "list": [7, "seven"]}


def test_a_content_header_with_properties() -> None:
    headers = longstr(shortstr("x-trace") + b"S" + longstr(b"abc"))
    flags = 0x8000 | 0x2000 | 0x1000 | 0x0040  # content-type, headers, delivery-mode, timestamp
    payload = (struct.pack(">HHQH", 60, 0, 11, flags) + shortstr("text/plain") + headers
               + b"\x02" + struct.pack(">Q", 1700000000))
    wire = struct.pack(">BHI", 2, 1, len(payload)) + payload + END
    frame = f.Frame(channel=1, payload=f.ContentHeader(
        class_id=60, body_size=11, content_type="text/plain",
        headers=to_table({"x-trace": "abc"}), delivery_mode=2, timestamp=1700000000))
    assert frame.encode() == wire
    assert f.Frame.decode(wire) == frame


def test_body_and_heartbeat_frames() -> None:
    assert f.Frame(channel=1, payload=f.Body(data=b"hello")).encode() == (
        struct.pack(">BHI", 3, 1, 5) + b"hello" + END)
    assert f.Frame(channel=0, payload=f.Heartbeat()).encode() == b"\x08\x00\x00\x00\x00\x00\x00\xce"


def test_a_channel_close_from_the_server() -> None:
    close = method_frame(1, 20, 40, struct.pack(">H", 404) + shortstr("NOT_FOUND - no queue")
                         + struct.pack(">HH", 50, 10))
    assert f.Frame.decode(close) == f.Frame(channel=1, payload=f.Method(
        arguments=f.ChannelClose(reply_code=404, reply_text="NOT_FOUND - no queue",
                                 class_id=50, method_id=10)))


# ---- bad input ----

def test_bad_frames_raise_their_own_errors() -> None:
    good = method_frame(0, 10, 51, b"")
    with pytest.raises(BadMagicError):
        f.Frame.decode(good[:-1] + b"\x00")  # the frame-end octet
    with pytest.raises(UnknownCommandTypeError):
        f.Frame.decode(method_frame(0, 10, 99, b""))  # no such method
    with pytest.raises(UnknownCommandTypeError):
        f.Frame.decode(struct.pack(">BHI", 5, 0, 0) + END)  # no such frame type
    with pytest.raises(ReservedBitsError):
        f.Frame.decode(method_frame(1, 60, 80, struct.pack(">Q", 1) + b"\x02"))  # ack's bits
    with pytest.raises(UnknownCommandTypeError):
        f.FieldTable.decode(longstr(shortstr("k") + b"?"))  # no such type letter
    with pytest.raises(SizeMismatchError):
        f.Frame.decode(method_frame(0, 10, 51, b"\x00"))  # CloseOk with a byte too many


def test_tables_nest_three_levels_deep_at_most() -> None:
    """The spec unrolls the nesting (the language has no recursive structs): a table or array
    in the third level is a type letter that level does not know."""
    third = longstr(shortstr("c") + b"t\x01")
    second = longstr(shortstr("b") + b"F" + third)
    assert from_table(f.FieldTable.decode(longstr(shortstr("a") + b"F" + second))) == {
        "a": {"b": {"c": True}}}
    with pytest.raises(UnknownCommandTypeError):
        f.FieldTable.decode(longstr(shortstr("a") + b"F" + longstr(
            shortstr("b") + b"F" + longstr(shortstr("c") + b"F" + longstr(b"")))))
    with pytest.raises(ValueError, match="three levels"):
        to_table({"a": {"b": {"c": {}}}})


def test_the_stream_decoder_takes_frames_split_anywhere() -> None:
    frames = [f.Frame(channel=0, payload=f.Heartbeat()),
              f.Frame(channel=1, payload=f.Method(arguments=f.BasicGetEmpty())),
              f.Frame(channel=1, payload=f.Body(data=b"x" * 40))]
    data = b"".join(frame.encode() for frame in frames)
    for cut in range(len(data) + 1):
        decoder = f.StreamDecoder(handshake=False)
        assert [*decoder.feed(data[:cut]), *decoder.feed(data[cut:])] == frames


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=80))
def test_random_bytes_raise_only_decode_errors(data: bytes) -> None:
    for prefix in (b"", b"\x01\x00\x00", b"\x02\x00\x01\x00\x00"):
        try:
            f.StreamDecoder(max_frame_size=256, handshake=False).feed(prefix + data)
        except DecodeError:
            pass


# ---- round trips ----

short = st.text(max_size=20).filter(lambda s: len(s.encode()) < 256)
leaf = st.one_of(st.none(), st.booleans(), st.integers(-(1 << 63), (1 << 63) - 1),
                 st.floats(allow_nan=False), short, st.binary(max_size=20))
values = st.recursive(leaf, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(short, inner, max_size=3)), max_leaves=8)


def depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    return 0


@settings(max_examples=60, deadline=None, suppress_health_check=FIXTURE_PER_TEST)
@given(st.dictionaries(short, values, max_size=4).filter(lambda v: depth(v) <= 2))
def test_field_tables_round_trip(either_codec: str, table: dict[str, object]) -> None:
    encoded = to_table(table).encode()  # type: ignore[arg-type]
    assert from_table(f.FieldTable.decode(encoded)) == table


properties = st.builds(
    f.ContentHeader, class_id=st.just(60), body_size=st.integers(0, (1 << 64) - 1),
    content_type=st.none() | short, delivery_mode=st.none() | st.integers(0, 255),
    priority=st.none() | st.integers(0, 255), correlation_id=st.none() | short,
    timestamp=st.none() | st.integers(0, (1 << 64) - 1), app_id=st.none() | short,
    headers=st.none() | st.builds(lambda: to_table({"a": 1})))
methods = st.one_of(
    st.builds(f.BasicPublish, exchange=short, routing_key=short, mandatory=st.booleans(),
              immediate=st.booleans()),
    st.builds(f.BasicDeliver, consumer_tag=short, delivery_tag=st.integers(0, (1 << 64) - 1),
              redelivered=st.booleans(), exchange=short, routing_key=short),
    st.builds(f.BasicAck, delivery_tag=st.integers(0, (1 << 64) - 1), multiple=st.booleans()),
    st.builds(f.ChannelClose, reply_code=st.integers(0, 65535), reply_text=short,
              class_id=st.integers(0, 65535), method_id=st.integers(0, 65535)))
payloads = st.one_of(st.builds(f.Method, arguments=methods), properties,
                     st.builds(f.Body, data=st.binary(max_size=64)))


@settings(max_examples=100, deadline=None, suppress_health_check=FIXTURE_PER_TEST)
@given(st.integers(0, 65535), payloads)
def test_frames_round_trip(either_codec: str, channel: int, payload: f.FramePayload) -> None:
    frame = f.Frame(channel=channel, payload=payload)
    assert f.Frame.decode(frame.encode()) == frame


# ---- the generated package stays in step with the generator ----

def test_protoframe_check_says_up_to_date() -> None:
    result = subprocess.run([str(ROOT / ".venv" / "bin" / "protoframe"), "check"]
                            if (ROOT / ".venv" / "bin" / "protoframe").exists()
                            else [sys.executable, "-m", "protoframe", "check"],
                            cwd=EXAMPLE, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "up to date" in result.stdout + result.stderr


# ---- against RabbitMQ, the transport recorded ----

class RecordingWire(AmqpWire):
    """The client's wire, keeping what the generated code encoded and decoded."""

    def __init__(self) -> None:
        super().__init__()
        self.encoded: list[tuple[Outgoing, bytes]] = []
        self.decoded: list[Outgoing] = []

    def receive_data(self, data: bytes) -> Sequence[Outgoing]:
        frames = super().receive_data(data)
        self.decoded.extend(frames)
        return frames

    def send(self, frame: Outgoing) -> bytes:
        data = super().send(frame)
        self.encoded.append((frame, data))
        return data


class Transport:
    """Every byte the connections of a test wrote to and read from their sockets."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.read: list[bytes] = []


@pytest.fixture
def transport(monkeypatch: pytest.MonkeyPatch) -> Iterator[Transport]:
    recorded = Transport()
    made = Connection.connection_made
    received = Connection.data_received

    def connection_made(self: Connection[Outgoing], transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        write = transport.write

        def recording_write(data: bytes | bytearray | memoryview) -> None:
            recorded.written.append(bytes(data))
            write(data)

        transport.write = recording_write  # type: ignore[method-assign]
        made(self, transport)

    def data_received(self: Connection[Outgoing], data: bytes) -> None:
        recorded.read.append(bytes(data))
        received(self, data)

    monkeypatch.setattr(Connection, "connection_made", connection_made)
    monkeypatch.setattr(Connection, "data_received", data_received)
    yield recorded


def assert_generated_only(transport: Transport, wires: Sequence[RecordingWire]) -> None:
    """Every byte written is the concatenation of generated encodes, and every byte read
    re-encodes from the frames the generated StreamDecoder returned (none left over)."""
    sent = b"".join(data for wire in wires for _, data in wire.encoded)
    assert b"".join(transport.written) == sent
    for wire in wires:
        for frame, data in wire.encoded:
            assert data == frame.encode()
            if isinstance(frame, f.Frame):
                assert f.Frame.decode(data) == frame
    read = b"".join(frame.encode() for wire in wires for frame in wire.decoded)
    assert b"".join(transport.read) == read
    assert all(isinstance(frame, f.Frame) for wire in wires for frame in wire.decoded)


async def connect(server: RabbitMQ, wire: RecordingWire, **options: int) -> AmqpClient:
    return await AmqpClient.connect(server.host, server.port, server.user, server.password,
                                    server.vhost, wire=wire, timeout=30, **options)


@pytest.mark.timeout(120)
def test_publish_get_consume_ack(rabbitmq_server: RabbitMQ, transport: Transport) -> None:
    wire = RecordingWire()

    async def run() -> None:
        client = await connect(rabbitmq_server, wire, frame_max=4096)
        assert client.frame_max == 4096
        assert client.server_properties is not None
        server = from_table(client.server_properties)
        assert server["product"] == "RabbitMQ"
        capabilities = server["capabilities"]
        assert isinstance(capabilities, dict) and capabilities["basic.nack"] is True
        channel = await client.channel()
        declared = await channel.declare_queue("", exclusive=True, auto_delete=True)
        queue = declared.queue
        assert queue.startswith("amq.gen-") and declared.message_count == 0
        big = bytes(range(256)) * 40  # 10240 bytes: three body frames of at most 4088
        bodies = [b"first", big, b"third"]
        for number, body in enumerate(bodies):
            channel.publish("", queue, body, f.ContentHeader(
                class_id=60, body_size=0, content_type="application/octet-stream",
                delivery_mode=2, priority=number, message_id=f"m{number}",
                headers=to_table({"n": number, "tags": ["a", "b"]})))
        message = await channel.get(queue)
        assert message is not None and message.body == b"first"
        assert message.properties.message_id == "m0"
        assert message.properties.content_type == "application/octet-stream"
        assert message.properties.headers is not None
        assert from_table(message.properties.headers) == {"n": 0, "tags": ["a", "b"]}
        assert isinstance(message.method, f.BasicGetOk) and message.method.message_count == 2
        channel.ack(message.delivery_tag)
        tag = await channel.consume(queue, "protoframe-consumer")
        assert tag == "protoframe-consumer"
        rest = [await channel.next_delivery() for _ in range(2)]
        assert [m.body for m in rest] == bodies[1:]
        assert [m.properties.priority for m in rest] == [1, 2]
        assert all(isinstance(m.method, f.BasicDeliver) and m.method.consumer_tag == tag
                   for m in rest)
        channel.ack(rest[-1].delivery_tag, multiple=True)
        await channel.close()
        await client.close()

    asyncio.run(run())
    bodies_sent = [frame for frame, _ in wire.encoded
                   if isinstance(frame, f.Frame) and isinstance(frame.payload, f.Body)]
    assert [len(frame.payload.data) for frame in bodies_sent  # type: ignore[union-attr]
            ] == [5, 4088, 4088, 2064, 5]
    assert_generated_only(transport, [wire])


@pytest.mark.timeout(120)
def test_a_channel_error_leaves_the_connection_usable(rabbitmq_server: RabbitMQ,
                                                     transport: Transport) -> None:
    wire = RecordingWire()

    async def run() -> None:
        client = await connect(rabbitmq_server, wire)
        first = await client.channel()
        with pytest.raises(ChannelClosedError) as closed:
            await first.declare_queue("protoframe-no-such-queue", passive=True)
        assert closed.value.reply_code == 404
        assert closed.value.reply_text.startswith("NOT_FOUND")
        assert (closed.value.class_id, closed.value.method_id) == (50, 10)  # Queue.Declare
        second = await client.channel()
        declared = await second.declare_queue("", exclusive=True)
        assert declared.queue
        await client.close()
        assert client.close_ok == f.ConnectionCloseOk()

    asyncio.run(run())
    closes = [frame for frame in wire.decoded
              if isinstance(frame, f.Frame) and isinstance(frame.payload, f.Method)
              and isinstance(frame.payload.arguments, f.ChannelClose)]
    assert len(closes) == 1 and closes[0].channel == 1
    assert_generated_only(transport, [wire])


@pytest.mark.timeout(120)
def test_a_connection_error_closes_the_connection(rabbitmq_server: RabbitMQ,
                                                 transport: Transport) -> None:
    """A method on a channel never opened is a connection error: the server sends
    Connection.Close (504 CHANNEL_ERROR), the client answers CloseOk, the server hangs up."""
    wire = RecordingWire()

    async def run() -> None:
        client = await connect(rabbitmq_server, wire)
        client.send_method(7, f.BasicGet(queue="nowhere", no_ack=True))
        closed = await client.closed_by_server()
        assert closed.reply_code == 504
        assert closed.reply_text.startswith("CHANNEL_ERROR")
        assert (closed.class_id, closed.method_id) == (60, 70)  # Basic.Get

    asyncio.run(run())
    assert any(isinstance(frame, f.Frame) and isinstance(frame.payload, f.Method)
               and isinstance(frame.payload.arguments, f.ConnectionCloseOk)
               for frame, _ in wire.encoded)
    assert_generated_only(transport, [wire])


@pytest.mark.timeout(120)
def test_heartbeats(rabbitmq_server: RabbitMQ, transport: Transport) -> None:
    wire = RecordingWire()

    async def run() -> None:
        client = await connect(rabbitmq_server, wire, heartbeat=1)
        assert client.heartbeat == 1
        for _ in range(100):  # at most 5 s
            if client.heartbeats_received >= 2:
                break
            await asyncio.sleep(0.05)
        assert client.heartbeats_received >= 2
        await client.close()

    asyncio.run(run())
    assert any(isinstance(frame, f.Frame) and isinstance(frame.payload, f.Heartbeat)
               for frame, _ in wire.encoded)
    assert_generated_only(transport, [wire])
