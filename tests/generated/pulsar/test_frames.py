"""Pulsar frames (generated/pulsar/frames.py): peer vectors, round trips, compression, streams.

The peer vectors are byte strings from the Go and Rust Pulsar clients' own test suites
(tests/data/pulsar_vectors, described in ../shared/reference/pulsar/peer-vectors/README.md).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from protoframe.generated.pulsar.frames import (
    Batch,
    BatchEntry,
    BrokerEntry,
    Frame,
    Payload,
    StreamDecoder,
    frame_length,
)
from protoframe.generated.pulsar.pulsar_api import (
    BaseCommand,
    BrokerEntryMetadata,
    CommandConnect,
    CommandSend,
    CompressionType,
    KeyValue,
    MessageMetadata,
    SingleMessageMetadata,
)
from protoframe.runtime.codec.checksums import crc32c
from protoframe.runtime.codec.compression import CODECS, compress
from protoframe.runtime.errors import FrameTooLargeError
from tests.support.codec_modes import FIXTURE_PER_TEST
from tests.support.examples import scaled
from tests.support.paths import DATA, ROOT
from tests.support.pulsar_frames import (
    any_frames,
    batches,
    body_fields,
    minimal,
    payload_frames,
    send_command,
    simple_frames,
)

VECTORS = DATA / "pulsar_vectors"
Type = BaseCommand.Type


def vector(name: str) -> bytes:
    return (VECTORS / name).read_bytes()


# --- peer vectors ----------------------------------------------------------------------------


def test_vectors_are_the_peer_files() -> None:
    shared = ROOT.parent / "shared" / "reference" / "pulsar"
    names = sorted(p.name for p in VECTORS.glob("*.bin"))
    assert names == [
        "go_brokerEntryMeta.bin", "go_rawBatchMessage1.bin", "go_rawBatchMessage10.bin",
        "go_rawCompatSingleMessage.bin", "rs_payload_send.bin", "rs_simple_connect.bin",
    ]
    if (shared / "peer-vectors").is_dir():
        for name in names:
            assert vector(name) == (shared / "peer-vectors" / name).read_bytes(), name


def _ab_properties() -> list[KeyValue]:
    return [KeyValue(key="a", value="1"), KeyValue(key="b", value="2")]


def _check_crc(raw: bytes, expected: int) -> None:
    """raw starts at magic 0x0e01: the CRC is the next u32 and covers everything after it."""
    assert raw[:2] == b"\x0e\x01"
    assert struct.unpack_from(">I", raw, 2)[0] == expected
    assert crc32c(raw[6:]) == expected


def test_go_raw_compat_single_message() -> None:
    raw = vector("go_rawCompatSingleMessage.bin")
    assert len(raw) == 64
    _check_crc(raw, 0x0836B466)
    payload = Payload.decode(raw)
    md = payload.metadata
    assert payload.broker_entry is None
    assert md.producer_name == "standalone-74-0"
    assert md.sequence_id == 0
    assert md.publish_time == 1572563728300
    assert md.properties == _ab_properties()
    assert md.has_uncompressed_size() and md.uncompressed_size == 5
    assert md.has_event_time() and md.event_time == 5
    assert md.has_schema_version() and md.schema_version == b""
    assert not md.has_num_messages_in_batch()
    assert not md.has_compression()
    assert md.unknown_fields == b""
    assert payload.data == b"hello"
    assert payload.decompressed_data() == b"hello"
    expected = Payload(
        metadata=MessageMetadata(
            producer_name="standalone-74-0", sequence_id=0, publish_time=1572563728300,
            properties=_ab_properties(), uncompressed_size=5, event_time=5, schema_version=b"",
        ),
        data=b"hello",
    )
    assert payload == expected
    assert expected.encode() == raw
    assert payload.encode() == raw


def _batch_entry(seq: int) -> BatchEntry:
    return BatchEntry(
        metadata=SingleMessageMetadata(properties=_ab_properties(), payload_size=5, event_time=5,
                                       sequence_id=seq),
        data=b"hello",
    )


@pytest.mark.parametrize(
    ("name", "size", "crc", "producer", "publish_time", "count"),
    [
        ("go_rawBatchMessage1.bin", 72, 0x1F800968, "standalone-74-1", 1572563910747, 1),
        ("go_rawBatchMessage10.bin", 351, 0x7B288C08, "standalone-74-2", 1572564017488, 10),
    ],
)
def test_go_raw_batch_messages(
    name: str, size: int, crc: int, producer: str, publish_time: int, count: int
) -> None:
    raw = vector(name)
    assert len(raw) == size
    _check_crc(raw, crc)
    payload = Payload.decode(raw)
    md = payload.metadata
    assert md.producer_name == producer
    assert md.sequence_id == 0
    assert md.publish_time == publish_time
    assert md.has_num_messages_in_batch() and md.num_messages_in_batch == count
    assert md.has_schema_version() and md.schema_version == b""
    assert md.compression is CompressionType.NONE
    batch = Batch.decode(payload.data)
    assert len(batch.entries) == count
    for seq, entry in enumerate(batch.entries):
        smd = entry.metadata
        assert smd.properties == _ab_properties()
        assert smd.payload_size == 5
        assert smd.has_event_time() and smd.event_time == 5
        assert smd.has_sequence_id() and smd.sequence_id == seq
        assert entry.data == b"hello"
    expected_batch = Batch(entries=[_batch_entry(seq) for seq in range(count)])
    assert batch == expected_batch
    expected = Payload(
        metadata=MessageMetadata(producer_name=producer, sequence_id=0,
                                 publish_time=publish_time, num_messages_in_batch=count,
                                 schema_version=b""),
        data=expected_batch.encode(),
    )
    assert payload == expected
    assert expected.encode() == raw
    assert payload.encode() == raw


@pytest.mark.parametrize(
    "name", ["go_rawBatchMessage1.bin", "go_rawBatchMessage10.bin", "rs_payload_send.bin"])
def test_uncompressed_payload_without_size_decompresses(name: str) -> None:
    raw = vector(name)
    payload = Frame.decode(raw).payload if name.startswith("rs_") else Payload.decode(raw)
    assert payload is not None
    assert payload.metadata.compression is CompressionType.NONE
    assert not payload.metadata.has_uncompressed_size()
    assert payload.decompressed_data() == payload.data


def test_go_broker_entry_meta() -> None:
    raw = vector("go_brokerEntryMeta.bin")
    assert len(raw) == 15
    assert raw[:2] == b"\x0e\x02"
    assert struct.unpack_from(">I", raw, 2)[0] == len(raw) - 6
    entry = BrokerEntry.decode(raw)
    assert entry.metadata.has_broker_timestamp() and entry.metadata.has_index()
    assert entry.metadata.broker_timestamp == 1646983036054
    assert entry.metadata.index == 5
    expected = BrokerEntry(metadata=BrokerEntryMetadata(broker_timestamp=1646983036054, index=5))
    assert entry == expected
    assert expected.encode() == raw


def test_go_broker_entry_in_front_of_a_go_payload() -> None:
    """A MESSAGE as a broker sends it with broker entry metadata: 0x0e02 ... then 0x0e01 ..."""
    broker = vector("go_brokerEntryMeta.bin")
    single = vector("go_rawCompatSingleMessage.bin")
    payload = Payload.decode(broker + single)
    assert payload.broker_entry == BrokerEntry.decode(broker)
    assert payload.metadata == Payload.decode(single).metadata
    assert payload.encode() == broker + single


def test_rs_simple_connect() -> None:
    raw = vector("rs_simple_connect.bin")
    assert len(raw) == 38
    assert struct.unpack_from(">I", raw, 0)[0] == 34
    assert frame_length(raw, 0, len(raw), 1 << 20) == 38
    frame = Frame.decode(raw)
    assert frame.payload is None
    assert frame.command.type_ is Type.CONNECT
    connect = frame.command.connect
    assert connect is not None
    assert connect.client_version == "pulsar-rs-v6.0.0"
    assert connect.has_protocol_version() and connect.protocol_version == 12
    assert connect.has_auth_method_name() and connect.auth_method_name == "none"
    expected = Frame(command=BaseCommand(
        type_=Type.CONNECT,
        connect=CommandConnect(client_version="pulsar-rs-v6.0.0", protocol_version=12,
                               auth_method_name="none"),
    ))
    assert frame == expected
    assert expected.encode() == raw


def test_rs_payload_send() -> None:
    raw = vector("rs_payload_send.bin")
    assert len(raw) == 65
    assert struct.unpack_from(">I", raw, 0)[0] == 61
    frame = Frame.decode(raw)
    send = frame.command.send
    assert frame.command.type_ is Type.SEND and send is not None
    assert send.producer_id == 0 and send.sequence_id == 8
    command_size = struct.unpack_from(">I", raw, 4)[0]
    _check_crc(raw[8 + command_size:], 0x428354B5)
    assert frame.payload is not None
    assert frame.payload.broker_entry is None
    assert frame.payload.metadata.producer_name == "standalone-0-3"
    assert frame.payload.metadata.sequence_id == 8
    assert frame.payload.data == b"hello-pulsar-8"
    expected = Frame(
        command=send_command(producer_id=0, sequence_id=8),
        payload=Payload(
            metadata=MessageMetadata(producer_name="standalone-0-3", sequence_id=8,
                                     publish_time=1533850624062),
            data=b"hello-pulsar-8",
        ),
    )
    assert frame == expected
    assert expected.encode() == raw


@pytest.mark.parametrize("name", ["rs_simple_connect.bin", "rs_payload_send.bin"])
def test_rs_vectors_through_the_stream_decoder(name: str) -> None:
    raw = vector(name)
    decoder = StreamDecoder()
    frames: list[Frame] = []
    for i in range(len(raw)):
        frames += decoder.feed(raw[i:i + 1])
    assert frames == [Frame.decode(raw)]
    assert decoder.buffered == 0


# --- round trips -----------------------------------------------------------------------------


def test_body_field_table_covers_every_command_type() -> None:
    table = body_fields()
    assert len(table) == len(Type)
    assert table[Type.SEND] == ("send", CommandSend)
    assert table[Type.CONNECT] == ("connect", CommandConnect)
    assert table[Type.LOOKUP][0] == "lookupTopic"
    assert table[Type.REDELIVER_UNACKNOWLEDGED_MESSAGES][0] == "redeliverUnacknowledgedMessages"


@pytest.mark.parametrize("command_type", list(Type), ids=lambda t: t.name)
def test_minimal_simple_command_round_trips(command_type: BaseCommand.Type) -> None:
    name, cls = body_fields()[command_type]
    frame = Frame(command=BaseCommand(type_=command_type, **{name: minimal(cls)}))
    raw = frame.encode()
    assert struct.unpack_from(">I", raw, 0)[0] == len(raw) - 4
    assert struct.unpack_from(">I", raw, 4)[0] == len(raw) - 8
    assert Frame.decode(raw) == frame
    assert StreamDecoder().feed(raw) == [frame]


@settings(max_examples=scaled(300), deadline=None,
          suppress_health_check=[*FIXTURE_PER_TEST, HealthCheck.too_slow])
@given(frame=simple_frames)
def test_simple_command_frames_round_trip(either_codec: str, frame: Frame) -> None:
    raw = frame.encode()
    back = Frame.decode(raw)
    assert back == frame
    assert back.payload is None
    assert back.encode() == raw


@settings(max_examples=scaled(200), deadline=None, suppress_health_check=FIXTURE_PER_TEST)
@given(frame=payload_frames)
def test_payload_frames_round_trip(either_codec: str, frame: Frame) -> None:
    raw = frame.encode()
    back = Frame.decode(raw)
    assert back == frame
    assert back.encode() == raw
    assert frame.payload is not None
    # The CRC covers the payload from metadata_size on, excluding any broker entry.
    start = 8 + struct.unpack_from(">I", raw, 4)[0]
    if frame.payload.broker_entry is not None:
        start += len(frame.payload.broker_entry.encode())
    assert raw[start:start + 2] == b"\x0e\x01"
    assert struct.unpack_from(">I", raw, start + 2)[0] == crc32c(raw[start + 6:])


@settings(max_examples=scaled(200), deadline=None, suppress_health_check=FIXTURE_PER_TEST)
@given(batch=batches)
def test_batches_round_trip_and_fill_payload_size(either_codec: str, batch: Batch) -> None:
    raw = batch.encode()
    for entry in batch.entries:
        assert entry.metadata.payload_size == len(entry.data)
    back = Batch.decode(raw)
    assert back == batch
    assert back.encode() == raw


def test_batch_payload_size_is_filled_in_even_when_wrong() -> None:
    entry = BatchEntry(metadata=SingleMessageMetadata(payload_size=999), data=b"abc")
    raw = Batch(entries=[entry]).encode()
    assert Batch.decode(raw).entries[0].metadata.payload_size == 3
    assert Batch.decode(raw).entries[0].data == b"abc"


def _java_zlib(data: bytes) -> bytes:
    deflater = zlib.compressobj()
    return deflater.compress(data) + deflater.flush(zlib.Z_SYNC_FLUSH)


def _compressed_frame(codec: str, batch: Batch, compressor: Callable[[bytes], bytes]) -> bytes:
    raw = batch.encode()
    metadata = MessageMetadata(
        producer_name="p", sequence_id=1, publish_time=2,
        compression=CompressionType[codec], uncompressed_size=len(raw),
        num_messages_in_batch=len(batch.entries),
    )
    return Frame(command=send_command(), payload=Payload(metadata=metadata,
                                                         data=compressor(raw))).encode()


@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=scaled(60), deadline=None)
@given(batch=batches)
@example(batch=Batch(entries=[]))
@example(batch=Batch(entries=[_batch_entry(i) for i in range(10)]))
def test_compressed_batches_round_trip(codec: str, batch: Batch) -> None:
    wire = _compressed_frame(codec, batch, lambda data: compress(codec, data))
    frame = Frame.decode(wire)
    assert frame.payload is not None
    assert frame.payload.metadata.compression is CompressionType[codec]
    assert frame.payload.metadata.num_messages_in_batch == len(batch.entries)
    back = Batch.decode(frame.payload.decompressed_data())
    assert back.entries == batch.entries


def test_codec_names_match_compression_type() -> None:
    assert list(CODECS) == [c.name for c in CompressionType]


@settings(max_examples=scaled(60), deadline=None)
@given(batch=batches)
def test_java_style_zlib_stream_is_accepted(batch: Batch) -> None:
    raw = batch.encode()
    java = _java_zlib(raw)
    assert java.endswith(b"\x00\x00\xff\xff")
    wire = _compressed_frame("ZLIB", batch, _java_zlib)
    frame = Frame.decode(wire)
    assert frame.payload is not None and frame.payload.data == java
    assert frame.payload.decompressed_data() == raw
    assert Batch.decode(frame.payload.decompressed_data()).entries == batch.entries


# --- stream decoding -------------------------------------------------------------------------


def _feed_all(decoder: StreamDecoder, chunks: list[bytes]) -> list[Frame]:
    out: list[Frame] = []
    for chunk in chunks:
        out += decoder.feed(chunk)
    return out


@settings(max_examples=scaled(40), deadline=None)
@given(frames=st.lists(any_frames, min_size=1, max_size=4))
def test_stream_one_byte_at_a_time(frames: list[Frame]) -> None:
    wire = b"".join(f.encode() for f in frames)
    decoder = StreamDecoder()
    got: list[Frame] = []
    for i in range(len(wire)):
        got += decoder.feed(wire[i:i + 1])
        assert decoder.buffered <= len(wire)
    assert got == frames
    assert decoder.buffered == 0


@settings(max_examples=scaled(100), deadline=None)
@given(frames=st.lists(any_frames, max_size=12))
def test_stream_many_frames_in_one_feed(frames: list[Frame]) -> None:
    wire = b"".join(f.encode() for f in frames)
    decoder = StreamDecoder()
    assert decoder.feed(wire) == frames
    assert decoder.buffered == 0
    assert decoder.feed(b"") == []


@settings(max_examples=scaled(150), deadline=None)
@given(frames=st.lists(any_frames, max_size=8), data=st.data())
def test_stream_arbitrary_splits(frames: list[Frame], data: st.DataObject) -> None:
    wire = b"".join(f.encode() for f in frames)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=20)))
    chunks = [wire[a:b] for a, b in zip([0, *cuts], [*cuts, len(wire)], strict=True)]
    decoder = StreamDecoder()
    assert _feed_all(decoder, chunks) == frames
    assert decoder.buffered == 0


def test_stream_splits_at_every_boundary_of_a_frame_pair() -> None:
    frames = [Frame.decode(vector("rs_payload_send.bin")),
              Frame.decode(vector("rs_simple_connect.bin"))]
    wire = b"".join(f.encode() for f in frames)
    for cut in range(len(wire) + 1):
        decoder = StreamDecoder()
        first = decoder.feed(wire[:cut])
        assert decoder.buffered == cut - sum(len(f.encode()) for f in first)
        assert first + decoder.feed(wire[cut:]) == frames, cut
        assert decoder.buffered == 0


def test_stream_accepts_bytearray_and_memoryview() -> None:
    raw = vector("rs_payload_send.bin")
    decoder = StreamDecoder()
    assert decoder.feed(bytearray(raw[:10])) == []
    assert decoder.feed(memoryview(raw)[10:]) == [Frame.decode(raw)]


def test_max_frame_size_is_inclusive_of_the_length_prefix() -> None:
    frame = Frame(command=send_command(), payload=Payload(
        metadata=MessageMetadata(producer_name="p", sequence_id=1, publish_time=2),
        data=bytes(1000)))
    raw = frame.encode()
    assert StreamDecoder(max_frame_size=len(raw)).feed(raw) == [frame]
    with pytest.raises(FrameTooLargeError):
        StreamDecoder(max_frame_size=len(raw) - 1).feed(raw)


def test_max_frame_size_can_be_replaced_after_construction() -> None:
    """CONNECTED.max_message_size replaces the limit once the connection is up."""
    small = Frame.decode(vector("rs_simple_connect.bin"))
    big = Frame(command=send_command(), payload=Payload(
        metadata=MessageMetadata(producer_name="p", sequence_id=1, publish_time=2),
        data=bytes(8000)))
    decoder = StreamDecoder(max_frame_size=4096)
    assert decoder.max_frame_size == 4096
    assert decoder.feed(small.encode()) == [small]
    decoder.max_frame_size = 16384
    assert decoder.feed(big.encode()) == [big]
    # Lowered again: the same frame is now refused from its header.
    decoder.max_frame_size = 4096
    with pytest.raises(FrameTooLargeError):
        decoder.feed(big.encode()[:4])
    assert decoder.buffered == 0


def test_default_max_frame_size_is_pulsars_5_mib() -> None:
    assert StreamDecoder().max_frame_size == 5 * 1024 * 1024
