"""Every way a Pulsar frame can be bad raises its own typed DecodeError subclass.

The frames are made by the generated encoder and then damaged in exactly one place, so each
test names the one inconsistency it introduces.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from functools import partial

import pytest

from protoframe.generated.pulsar.frames import (
    Batch,
    BatchEntry,
    BrokerEntry,
    Frame,
    Payload,
    StreamDecoder,
)
from protoframe.generated.pulsar.pulsar_api import (
    BaseCommand,
    BrokerEntryMetadata,
    CommandConnect,
    CommandPing,
    CommandSend,
    MessageMetadata,
    SingleMessageMetadata,
)
from protoframe.runtime.codec.checksums import crc32c
from protoframe.runtime.codec.protowire import varint_bytes
from protoframe.runtime.errors import (
    BadMagicError,
    ChecksumFailure,
    ChecksumMismatchError,
    DecodeError,
    FrameTooLargeError,
    MissingBodyError,
    MissingRequiredFieldError,
    SizeMismatchError,
    TruncatedError,
    UnknownCommandError,
    UnknownCommandTypeError,
)
from tests.support.paths import DATA

VECTORS = DATA / "pulsar_vectors"
Type = BaseCommand.Type
U32 = struct.Struct(">I")


def send_frame(producer_id: int = 7, sequence_id: int = 42, data: bytes = b"hello") -> Frame:
    return Frame(
        command=BaseCommand(type_=Type.SEND,
                            send=CommandSend(producer_id=producer_id, sequence_id=sequence_id)),
        payload=Payload(
            metadata=MessageMetadata(producer_name="prod", sequence_id=sequence_id,
                                     publish_time=1700000000000),
            data=data,
        ),
    )


def ping_frame() -> Frame:
    return Frame(command=BaseCommand(type_=Type.PING, ping=CommandPing()))


def connect_frame() -> Frame:
    return Frame(command=BaseCommand(type_=Type.CONNECT,
                                     connect=CommandConnect(client_version="test")))


def frame_from_command(command: bytes, rest: bytes = b"") -> bytes:
    """A frame around raw BaseCommand bytes (and raw payload bytes), sizes consistent."""
    return U32.pack(4 + len(command) + len(rest)) + U32.pack(len(command)) + command + rest


def payload_offsets(raw: bytes) -> tuple[int, int, int]:
    """(magic, metadata_size, data) offsets of a payload frame without broker entry."""
    magic = 8 + U32.unpack_from(raw, 4)[0]
    assert raw[magic:magic + 2] == b"\x0e\x01"
    size_at = magic + 6
    return magic, size_at, size_at + 4 + U32.unpack_from(raw, size_at)[0]


def with_fixed_crc(raw: bytes) -> bytes:
    """Recompute the payload checksum so that only the intended damage remains."""
    magic, size_at, _ = payload_offsets(raw)
    out = bytearray(raw)
    U32.pack_into(out, magic + 2, crc32c(raw[size_at:]))
    return bytes(out)


def raises(fn: Callable[[], object]) -> DecodeError:
    with pytest.raises(DecodeError) as info:
        fn()
    return info.value


# --- one error type per kind of damage -------------------------------------------------------


def test_checksum_mismatch_carries_the_decoded_frame() -> None:
    good = send_frame()
    raw = bytearray(good.encode())
    raw[-1] ^= 0x01  # last byte of the data
    exc = raises(lambda: Frame.decode(bytes(raw)))
    assert type(exc) is ChecksumFailure
    assert isinstance(exc, ChecksumMismatchError)
    frame = exc.value
    assert isinstance(frame, Frame)
    # A client can still answer it (e.g. SEND_ERROR ChecksumError) with the command's ids.
    assert frame.command.type_ is Type.SEND and frame.command.send is not None
    assert frame.command.send.producer_id == 7
    assert frame.command.send.sequence_id == 42
    # The checksum is verified before the content it covers is parsed (as the Java client
    # does), so corrupt metadata is never trusted: the payload is left out.
    assert frame.payload is None
    assert exc.pos == len(raw)


@pytest.mark.parametrize("bit", [0x01, 0x80, 0xFF])
def test_any_flipped_data_byte_is_a_checksum_failure(bit: int) -> None:
    raw = send_frame(data=bytes(range(64))).encode()
    _, _, data_at = payload_offsets(raw)
    for i in range(data_at, len(raw)):
        damaged = bytearray(raw)
        damaged[i] ^= bit
        exc = raises(partial(Frame.decode, bytes(damaged)))
        assert type(exc) is ChecksumFailure, i
        assert isinstance(exc, ChecksumFailure) and isinstance(exc.value, Frame)


def test_flipped_checksum_field_is_a_checksum_failure() -> None:
    raw = bytearray(send_frame().encode())
    magic, _, _ = payload_offsets(bytes(raw))
    raw[magic + 2] ^= 0x10
    assert type(raises(lambda: Frame.decode(bytes(raw)))) is ChecksumFailure


def test_any_flipped_metadata_byte_is_a_checksum_failure() -> None:
    raw = send_frame().encode()
    _, size_at, data_at = payload_offsets(raw)
    wrong: list[tuple[int, str]] = []
    for i in range(size_at, data_at):
        damaged = bytearray(raw)
        damaged[i] ^= 0xFF
        exc = raises(partial(Frame.decode, bytes(damaged)))
        if not isinstance(exc, ChecksumFailure):
            wrong.append((i - size_at, type(exc).__name__))
    assert wrong == []


def test_bad_payload_magic() -> None:
    raw = bytearray(send_frame().encode())
    magic, _, _ = payload_offsets(bytes(raw))
    assert raw[magic:magic + 2] == b"\x0e\x01"
    raw[magic + 1] = 0x03
    exc = raises(lambda: Frame.decode(bytes(raw)))
    assert type(exc) is BadMagicError
    assert "0xe03" in str(exc)


def test_bad_magic_from_a_go_vector() -> None:
    raw = bytearray((VECTORS / "go_rawCompatSingleMessage.bin").read_bytes())
    raw[1] = 0x03
    assert type(raises(lambda: Payload.decode(bytes(raw)))) is BadMagicError


@pytest.mark.parametrize("name", ["rs_payload_send.bin", "rs_simple_connect.bin"])
def test_every_prefix_is_truncated(name: str) -> None:
    raw = (VECTORS / name).read_bytes()
    for n in range(len(raw)):
        exc = raises(partial(Frame.decode, raw[:n]))
        assert type(exc) is TruncatedError, n


def test_every_prefix_of_a_payload_is_truncated_or_size_mismatch() -> None:
    raw = (VECTORS / "go_rawCompatSingleMessage.bin").read_bytes()
    for n in range(len(raw)):
        exc = raises(partial(Payload.decode, raw[:n]))
        # Cutting into the metadata makes metadata_size run past the end; past it, the data
        # is shorter than the checksum says.
        assert type(exc) in (TruncatedError, SizeMismatchError, ChecksumFailure), n


def test_oversize_frame_is_refused_from_its_header_alone() -> None:
    decoder = StreamDecoder(max_frame_size=1024)
    header = U32.pack(1024)  # 4 + 1024 bytes: one over the limit
    with pytest.raises(FrameTooLargeError) as info:
        decoder.feed(header)
    assert type(info.value) is FrameTooLargeError
    assert decoder.buffered == 0
    # Nothing after an oversize frame can be trusted: the stream stays stopped.
    with pytest.raises(FrameTooLargeError):
        decoder.feed(b"\x00" * 100)
    assert decoder.buffered == 0


def test_oversize_header_split_across_feeds() -> None:
    decoder = StreamDecoder(max_frame_size=1 << 16)
    header = U32.pack(0xFFFFFFF0)
    for byte in header[:3]:
        assert decoder.feed(bytes([byte])) == []
        assert decoder.buffered <= 3
    with pytest.raises(FrameTooLargeError):
        decoder.feed(header[3:])
    assert decoder.buffered == 0


def test_oversize_frame_after_good_frames_reports_them() -> None:
    good = ping_frame()
    decoder = StreamDecoder(max_frame_size=1 << 16)
    with pytest.raises(FrameTooLargeError) as info:
        decoder.feed(good.encode() * 2 + U32.pack(1 << 20) + b"x" * 50)
    assert list(info.value.frames_before) == [good, good]
    assert decoder.buffered == 0


def test_oversize_refused_with_the_body_never_buffered() -> None:
    decoder = StreamDecoder(max_frame_size=4096)
    big = send_frame(data=bytes(10000)).encode()
    with pytest.raises(FrameTooLargeError):
        decoder.feed(big[:4])
    assert decoder.buffered == 0


def test_unknown_command_type() -> None:
    command = b"\x08" + varint_bytes(1000)  # BaseCommand.type = 1000
    exc = raises(lambda: Frame.decode(frame_from_command(command)))
    assert type(exc) is UnknownCommandTypeError
    assert isinstance(exc, UnknownCommandError)
    assert exc.command_type == 1000
    assert str(exc).startswith("BaseCommand.type is 1000, not a command type this peer knows")
    assert "required" not in str(exc)


def test_unknown_command_type_with_a_known_body() -> None:
    ping_body = ping_frame().command.encode()[2:]  # the `ping` field, without the type
    command = b"\x08" + varint_bytes(1000) + ping_body
    exc = raises(lambda: Frame.decode(frame_from_command(command)))
    assert type(exc) is UnknownCommandTypeError
    assert exc.command_type == 1000


@pytest.mark.parametrize(("types", "expected"), [
    ([1000, 18], None),  # the last value of a singular field wins: PING, a known one
    # An unknown value replaces nothing (protobuf keeps it among the unknown fields).
    ([18, 1000], None),
    ([1000, 1001], 1001),
    ([-1], -1),  # an int32 enum: ten bytes on the wire, read back negative
    ([2**31 - 1], 2**31 - 1),
])
def test_the_command_type_reported_is_the_one_in_force(types: list[int],
                                                        expected: int | None) -> None:
    ping_body = ping_frame().command.encode()[2:]
    command = b"".join(b"\x08" + varint_bytes(t & (2**64 - 1)) for t in types) + ping_body
    if expected is None:
        assert Frame.decode(frame_from_command(command)).command.type_ is Type.PING
        return
    exc = raises(lambda: Frame.decode(frame_from_command(command)))
    assert isinstance(exc, UnknownCommandTypeError) and exc.command_type == expected


def test_the_proto_message_alone_still_reports_a_missing_required_field() -> None:
    # Without the frame, BaseCommand is a plain proto2 message: an unknown value of its closed
    # enum goes to the unknown fields, so the required field is absent (protobuf's rule).
    with pytest.raises(MissingRequiredFieldError):
        BaseCommand.decode(b"\x08" + varint_bytes(1000))


def test_missing_command_type() -> None:
    ping_body = ping_frame().command.encode()[2:]
    assert type(raises(lambda: Frame.decode(frame_from_command(ping_body)))) is \
        UnknownCommandError


@pytest.mark.parametrize("command_type", [Type.SEND, Type.CONNECT, Type.PING, Type.MESSAGE])
def test_type_without_its_body(command_type: BaseCommand.Type) -> None:
    raw = Frame(command=BaseCommand(type_=command_type)).encode()
    exc = raises(lambda: Frame.decode(raw))
    assert type(exc) is MissingBodyError
    assert command_type.name in str(exc)


def test_type_with_another_commands_body() -> None:
    command = BaseCommand(type_=Type.PONG, ping=CommandPing())
    assert type(raises(lambda: Frame.decode(Frame(command=command).encode()))) is \
        MissingBodyError


@pytest.mark.parametrize("extra", [1, 5, 1000, None])
def test_command_size_larger_than_the_frame(extra: int | None) -> None:
    raw = bytearray(connect_frame().encode())
    size = U32.unpack_from(raw, 4)[0]
    U32.pack_into(raw, 4, 0xFFFFFFFF if extra is None else size + extra)
    exc = raises(lambda: Frame.decode(bytes(raw)))
    assert type(exc) is SizeMismatchError


@pytest.mark.parametrize("extra", [6, 10, 0x7FFFFFFF])
def test_metadata_size_runs_past_the_payload(extra: int) -> None:
    raw = bytearray(send_frame(data=b"hello").encode())
    _, size_at, _ = payload_offsets(bytes(raw))
    U32.pack_into(raw, size_at, U32.unpack_from(raw, size_at)[0] + extra)
    exc = raises(lambda: Frame.decode(with_fixed_crc(bytes(raw))))
    assert type(exc) is SizeMismatchError


def test_broker_entry_metadata_size_runs_past_the_frame() -> None:
    frame = send_frame()
    assert frame.payload is not None
    frame.payload.broker_entry = BrokerEntry(
        metadata=BrokerEntryMetadata(broker_timestamp=1646983036054, index=5))
    raw = bytearray(frame.encode())
    at = raw.index(b"\x0e\x02") + 2
    U32.pack_into(raw, at, len(raw))
    assert type(raises(lambda: Frame.decode(bytes(raw)))) is SizeMismatchError


def test_checksum_failure_with_broker_entry_keeps_the_command() -> None:
    frame = send_frame()
    assert frame.payload is not None
    frame.payload.broker_entry = BrokerEntry(
        metadata=BrokerEntryMetadata(broker_timestamp=1646983036054, index=5))
    raw = bytearray(frame.encode())
    raw[-1] ^= 0x20
    exc = raises(lambda: Frame.decode(bytes(raw)))
    assert isinstance(exc, ChecksumFailure) and isinstance(exc.value, Frame)
    assert exc.value.command == frame.command
    assert exc.value.payload is None  # nothing the checksum covers is trusted


def test_batch_entry_payload_size_runs_past_the_end() -> None:
    entries = [BatchEntry(metadata=SingleMessageMetadata(payload_size=0), data=b"hello")
               for _ in range(3)]
    raw = Batch(entries=entries).encode()
    assert Batch.decode(raw).entries == entries
    exc = raises(lambda: Batch.decode(raw[:-1]))
    assert type(exc) is SizeMismatchError
    # A payload_size that lies (larger than what follows) in the last entry.
    last = BatchEntry(metadata=SingleMessageMetadata(payload_size=0), data=b"hello").encode()
    lying = last.replace(b"\x18\x05", b"\x18\x06")
    assert lying != last
    exc = raises(lambda: Batch.decode(raw[:-len(last)] + lying))
    assert type(exc) is SizeMismatchError


def test_batch_entry_payload_size_in_a_go_vector_runs_past_the_end() -> None:
    payload = Payload.decode((VECTORS / "go_rawBatchMessage10.bin").read_bytes())
    data = bytearray(payload.data)
    # The last entry's SingleMessageMetadata says payload_size 5 (0x18 0x05): make it 6.
    at = data.rindex(b"\x18\x05")
    data[at + 1] = 0x06
    assert type(raises(lambda: Batch.decode(bytes(data)))) is SizeMismatchError


def test_bytes_after_total_size_are_a_size_mismatch() -> None:
    raw = connect_frame().encode()
    assert type(raises(lambda: Frame.decode(raw + b"xyz"))) is SizeMismatchError


@pytest.mark.parametrize(
    ("junk", "error"),
    [
        # Bytes after the command are read as a payload (any command may carry one): one byte
        # cannot hold its magic, longer junk has the wrong magic.
        (b"\x00", SizeMismatchError),
        (b"xyz", BadMagicError),
        (b"\x00\x00\x00\x00\x00", BadMagicError),
    ],
)
def test_trailing_garbage_inside_total_size(junk: bytes, error: type[DecodeError]) -> None:
    command = connect_frame().command.encode()
    exc = raises(lambda: Frame.decode(frame_from_command(command, junk)))
    assert type(exc) is error


def test_metadata_size_smaller_than_the_metadata() -> None:
    raw = bytearray(send_frame().encode())
    _, size_at, _ = payload_offsets(bytes(raw))
    U32.pack_into(raw, size_at, U32.unpack_from(raw, size_at)[0] - 1)
    exc = raises(lambda: Frame.decode(with_fixed_crc(bytes(raw))))
    assert type(exc) is SizeMismatchError


def test_command_size_smaller_than_the_command() -> None:
    raw = bytearray(connect_frame().encode())
    U32.pack_into(raw, 4, U32.unpack_from(raw, 4)[0] - 1)
    exc = raises(lambda: StreamDecoder().feed(bytes(raw)))
    assert type(exc) is SizeMismatchError


@pytest.mark.parametrize("total_size", [0, 1, 2, 3])
def test_frame_too_short_for_command_size(total_size: int) -> None:
    # A complete frame as far as the stream is concerned; TruncatedError would suggest
    # waiting for more bytes.
    raw = U32.pack(total_size) + bytes(total_size)
    exc = raises(lambda: StreamDecoder().feed(raw))
    assert type(exc) is SizeMismatchError


def test_error_kinds_are_distinct_types() -> None:
    """One exception class per kind, none a subclass of another (except ChecksumFailure)."""
    kinds = [ChecksumMismatchError, BadMagicError, TruncatedError, FrameTooLargeError,
             UnknownCommandError, MissingBodyError, SizeMismatchError]
    for a in kinds:
        assert issubclass(a, DecodeError) and issubclass(a, ValueError)
        for b in kinds:
            assert a is b or not issubclass(a, b), (a, b)
    assert issubclass(ChecksumFailure, ChecksumMismatchError)


# --- the stream carries on after a bad frame -------------------------------------------------


def test_stream_continues_after_a_bad_frame() -> None:
    good1, good2, good3 = ping_frame(), connect_frame(), send_frame(sequence_id=3)
    bad = bytearray(send_frame(sequence_id=9).encode())
    magic, _, _ = payload_offsets(bytes(bad))
    bad[magic + 1] = 0x03
    decoder = StreamDecoder()
    with pytest.raises(BadMagicError) as info:
        decoder.feed(good1.encode() + bytes(bad) + good2.encode() + good3.encode())
    assert list(info.value.frames_before) == [good1]
    assert decoder.feed(b"") == [good2, good3]
    assert decoder.buffered == 0


def test_stream_reports_checksum_failure_with_frame_and_continues() -> None:
    good = ping_frame()
    bad = bytearray(send_frame(producer_id=5, sequence_id=77).encode())
    bad[-1] ^= 0xFF
    decoder = StreamDecoder()
    with pytest.raises(ChecksumFailure) as info:
        decoder.feed(good.encode() + bytes(bad) + good.encode())
    assert list(info.value.frames_before) == [good]
    value = info.value.value
    assert isinstance(value, Frame) and value.command.send is not None
    assert (value.command.send.producer_id, value.command.send.sequence_id) == (5, 77)
    assert decoder.feed(b"") == [good]


def test_stream_bad_frames_in_a_row_then_split_good_frame() -> None:
    good = send_frame(sequence_id=1)
    unknown = frame_from_command(b"\x08" + varint_bytes(1000))
    no_body = Frame(command=BaseCommand(type_=Type.SEND)).encode()
    wire = good.encode()
    decoder = StreamDecoder()
    with pytest.raises(UnknownCommandError) as info1:
        decoder.feed(unknown + no_body + wire[:10])
    assert list(info1.value.frames_before) == []
    with pytest.raises(MissingBodyError) as info2:
        decoder.feed(b"")
    assert list(info2.value.frames_before) == []
    assert decoder.buffered == 10
    assert decoder.feed(b"") == []
    assert decoder.feed(wire[10:]) == [good]
    assert decoder.buffered == 0


def test_stream_error_in_a_later_feed_reports_only_that_feeds_frames() -> None:
    good = ping_frame()
    bad = frame_from_command(b"\x08" + varint_bytes(1000))
    decoder = StreamDecoder()
    assert decoder.feed(good.encode()) == [good]
    with pytest.raises(UnknownCommandError) as info:
        decoder.feed(good.encode() + bad)
    assert list(info.value.frames_before) == [good]
    assert decoder.feed(good.encode()) == [good]
