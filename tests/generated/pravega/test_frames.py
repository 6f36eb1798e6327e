"""Pravega wire commands generated from specs/pravega/pravega.yaml.

The hand-packed vectors and the value strategies are in ``tests/support/pravega_frames.py``,
shared with the Spark row tests.
"""

from __future__ import annotations

import re
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protoframe.generated.pravega import frames as pv
from protoframe.generated.pravega.frames import (
    DataAppended,
    Event,
    EventRun,
    Frame,
    Hello,
    KeepAlive,
    NoSuchSegment,
    Padding,
    PartialEvent,
    ReadSegment,
    SegmentCreated,
    StreamDecoder,
)
from protoframe.generated.pravega.machines import command_of
from protoframe.runtime.errors import (
    BadMagicError,
    EncodeError,
    FrameTooLargeError,
    InvalidUtf8Error,
    SizeMismatchError,
    TruncatedError,
    UnknownCommandError,
    UnknownCommandTypeError,
)
from tests.support.codec_modes import FIXTURE_PER_TEST
from tests.support.examples import scaled
from tests.support.paths import ROOT
from tests.support.pravega_frames import (
    COMMANDS,
    CONDITIONAL_APPEND,
    HELLO,
    KEEP_ALIVE,
    READ_SEGMENT,
    SETUP_APPEND,
    SPEC,
    VECTORS,
    WRITER,
    WRITER_HEX,
    WRONG_HOST,
    h,
    struct_strategy,
)

IDS = [type(body).__name__ for _, body in VECTORS]


@pytest.mark.parametrize(("wire", "body"), VECTORS, ids=IDS)
def test_encode_matches_the_hand_written_bytes(wire: bytes, body: Any) -> None:
    assert Frame(body=body).encode() == wire


@pytest.mark.parametrize(("wire", "body"), VECTORS, ids=IDS)
def test_decode_gives_the_values_back(wire: bytes, body: Any) -> None:
    assert Frame.decode(wire) == Frame(body=body)


def test_hello_is_sixteen_bytes_with_its_header() -> None:
    assert len(Frame(body=Hello(high_version=17, low_version=5)).encode()) == 16


# -- optional trailing fields and unknown trailing bytes --------------------------------------


def test_absent_optional_trailing_fields_read_as_minus_one() -> None:
    wire = h("00000007 00000018" + WRITER_HEX + "0000000000000005")
    body = Frame.decode(wire).body
    assert body == DataAppended(writer_id=WRITER, event_number=5)
    assert isinstance(body, DataAppended)
    assert (body.previous_event_number, body.request_id, body.current_segment_write_offset) == \
        (-1, -1, -1)


def test_a_partial_trailing_long_is_absent_and_skipped() -> None:
    # previous_event_number present, then 3 bytes: too few for request_id, so it reads -1
    # and the 3 bytes are skipped, as Java's `available() >= Long.BYTES` test does.
    wire = h("00000007 00000023" + WRITER_HEX + "0000000000000005 0000000000000004 aabbcc")
    body = Frame.decode(wire).body
    assert body == DataAppended(writer_id=WRITER, event_number=5, previous_event_number=4)


def test_absent_stack_trace_reads_empty_and_offset_minus_one() -> None:
    wire = h("00000035 0000000b 0000000000000002 0001 73")
    assert Frame.decode(wire).body == NoSuchSegment(request_id=2, segment="s")
    body = Frame.decode(wire).body
    assert isinstance(body, NoSuchSegment)
    assert (body.server_stack_trace, body.offset) == ("", -1)


def test_older_read_segment_without_request_id() -> None:
    wire = h("00000009 00000011 0001 73 0000000000000010 00000100 0000")
    body = Frame.decode(wire).body
    assert body == ReadSegment(segment="s", offset=16, suggested_length=256,
                               delegation_token="")
    assert isinstance(body, ReadSegment) and body.request_id == -1


def test_unknown_trailing_bytes_are_skipped() -> None:
    # A newer peer appended 4 bytes to HELLO and 2 to SEGMENT_CREATED.
    assert Frame.decode(h("ffffff81 0000000c 0000000f 00000005 deadbeef")).body == \
        Hello(high_version=15, low_version=5)
    assert Frame.decode(h("00000015 0000000d 0000000000000003 0001 73 0102")).body == \
        SegmentCreated(request_id=3, segment="s")
    stream = StreamDecoder()
    frames = stream.feed(h("ffffff81 0000000c 0000000f 00000005 deadbeef") + KEEP_ALIVE)
    assert [f.body for f in frames] == [Hello(high_version=15, low_version=5), KeepAlive()]


def test_structs_without_trailing_ignore_still_reject_leftovers() -> None:
    with pytest.raises(SizeMismatchError):
        Event.decode(h("00000000 00000001 61 62"))


# -- strings ----------------------------------------------------------------------------------


def test_modified_utf8_with_nul_and_a_non_bmp_character() -> None:
    # "a", NUL as C0 80, "b", U+1F600 as the surrogates D83D DE00 in three bytes each.
    segment = "a\x00b\U0001f600"
    wire = h("00000015 00000014 0000000000000003 000a 61 c080 62 eda0bd edb880")
    assert Frame(body=SegmentCreated(request_id=3, segment=segment)).encode() == wire
    assert Frame.decode(wire).body == SegmentCreated(request_id=3, segment=segment)


def test_invalid_modified_utf8_is_a_typed_error() -> None:
    with pytest.raises(InvalidUtf8Error):
        Frame.decode(h("00000015 0000000b 0000000000000003 0001 ff"))


def test_a_string_longer_than_its_u16_length_cannot_be_encoded() -> None:
    with pytest.raises(EncodeError):
        Frame(body=SegmentCreated(request_id=1, segment="x" * 70000)).encode()


# -- append records ---------------------------------------------------------------------------


def test_append_records() -> None:
    assert Padding(zeros=bytes(3)).encode() == h("ffffffff 00000003 000000")
    assert PartialEvent(data=b"ab").encode() == h("fffffffe 00000002 6162")
    run = EventRun(events=[Event(data=b"x"), Event(data=b"")])
    assert run.encode() == h("00000000 00000001 78 00000000 00000000")
    assert EventRun.decode(run.encode()) == run
    with pytest.raises(BadMagicError):
        Padding.decode(h("fffffffe 00000000"))


# -- errors -----------------------------------------------------------------------------------


def test_unknown_type_code() -> None:
    with pytest.raises(UnknownCommandError) as info:
        Frame.decode(h("000003e7 00000000"))
    assert isinstance(info.value, UnknownCommandTypeError) and info.value.command_type == 999
    with pytest.raises(UnknownCommandError):
        StreamDecoder().feed(h("00000000 00000000"))  # EVENT is not a top-level command


def test_truncated_frame() -> None:
    for cut in range(len(SETUP_APPEND)):
        with pytest.raises(TruncatedError):
            Frame.decode(SETUP_APPEND[:cut])


def test_bad_constant_in_embedded_event() -> None:
    wire = bytearray(CONDITIONAL_APPEND)
    wire[8 + 32 + 3] = 1  # the embedded EVENT's type becomes 1
    with pytest.raises(BadMagicError):
        Frame.decode(bytes(wire))


def test_oversize_frame_fails_before_its_body_is_buffered() -> None:
    stream = StreamDecoder()
    with pytest.raises(FrameTooLargeError):
        stream.feed(h("0000000a 00fffff8"))  # 8 + 0xFFFFF8 = 0x1000000 > 0xFFFFFF
    assert stream.buffered == 0
    limit = StreamDecoder(max_frame_size=16)
    assert limit.feed(HELLO) == [Frame(body=Hello(high_version=15, low_version=5))]
    with pytest.raises(FrameTooLargeError):
        limit.feed(h("00000009 00000009"))


def test_sizes_disagreeing_with_the_content() -> None:
    with pytest.raises(SizeMismatchError):  # HELLO's length leaves no room for low_version
        Frame.decode(h("ffffff81 00000004 0000000f"))
    with pytest.raises(SizeMismatchError):  # the event's length runs past the command
        Frame.decode(h("00000005 00000032" + WRITER_HEX + "0000000000000001 0000000000000000"
                       "00000000 000000ff 6869 0000000000000007"))
    with pytest.raises(SizeMismatchError):  # SEGMENT_READ data length past the command
        Frame.decode(h("0000000a 00000010 0001 73 0000000000000010 01 00 0000ffff"))
    with pytest.raises(SizeMismatchError):  # negative length
        StreamDecoder().feed(h("00000064 ffffffff"))


# -- stream decoding --------------------------------------------------------------------------


def test_stream_byte_by_byte() -> None:
    stream = StreamDecoder()
    wire = b"".join(w for w, _ in VECTORS)
    out: list[Frame] = []
    for i in range(len(wire)):
        out += stream.feed(wire[i : i + 1])
    assert out == [Frame(body=b) for _, b in VECTORS]
    assert stream.buffered == 0


def test_stream_several_frames_in_one_feed() -> None:
    stream = StreamDecoder()
    assert stream.feed(HELLO + KEEP_ALIVE + READ_SEGMENT[:5]) == [
        Frame(body=Hello(high_version=15, low_version=5)), Frame(body=KeepAlive())]
    assert stream.buffered == 5
    assert stream.feed(READ_SEGMENT[5:] + WRONG_HOST) == [Frame.decode(READ_SEGMENT),
                                                          Frame.decode(WRONG_HOST)]


def test_stream_continues_after_a_bad_frame() -> None:
    stream = StreamDecoder()
    with pytest.raises(UnknownCommandError) as info:
        stream.feed(HELLO + h("000003e7 00000000") + KEEP_ALIVE)
    assert info.value.frames_before == [Frame(body=Hello(high_version=15, low_version=5))]
    assert stream.feed(b"") == [Frame(body=KeepAlive())]


# -- every command round-trips ----------------------------------------------------------------

REFERENCE = ROOT.parent / "shared" / "reference" / "pravega" / "wire-commands.md"


def test_every_code_of_the_reference_table_is_a_command() -> None:
    """Codes and names as the reference lists them; EVENT, PADDING and PARTIAL_EVENT live
    only inside append data, so they are structs, not commands."""
    if not REFERENCE.exists():
        pytest.skip(f"{REFERENCE} is absent: nothing to compare the command codes with")
    table = {int(code): name for code, name in re.findall(
        r"^\|\s*(-?\d+)\s*\|\s*([A-Z_]+)\s*\|", REFERENCE.read_text(), re.MULTILINE)}
    assert len(table) > 60
    ours = {c.value: name for name, c in SPEC.commands.items()}
    assert ours == {code: name for code, name in table.items() if code not in (0, -1, -2)}


def test_a_command_known_only_by_its_code_keeps_its_payload() -> None:
    wire = struct.pack(">ii", 41, 5) + b"\x01\x02\x03\x04\x05"  # LOCATE_OFFSET
    frame = Frame.decode(wire)
    assert frame.body == pv.LocateOffset(payload=b"\x01\x02\x03\x04\x05")
    assert frame.encode() == wire
    assert command_of(frame)[0] == "LOCATE_OFFSET"


def test_every_command_of_the_spec_is_in_the_round_trip() -> None:
    assert len(COMMANDS) == 67
    assert {s.name for s in COMMANDS} >= {
        "Hello", "KeepAlive", "SetupAppend", "AppendSetup", "AppendBlockEnd", "DataAppended",
        "ConditionalAppend", "ReadSegment", "SegmentRead", "WrongHost", "NoSuchSegment",
        "SegmentIsSealed", "CreateSegment", "SegmentCreated", "ErrorMessage",
        "GetStreamSegmentInfo", "StreamSegmentInfo"}


@settings(max_examples=scaled(300), deadline=None, suppress_health_check=FIXTURE_PER_TEST)
@given(st.one_of([struct_strategy(s) for s in COMMANDS]))
def test_round_trip_every_command(either_codec: str, body: Any) -> None:
    frame = Frame(body=body)
    wire = frame.encode()
    (type_code, length) = struct.unpack_from(">ii", wire)
    assert length == len(wire) - 8
    assert type_code == SPEC.commands[_command_name(body)].value
    assert Frame.decode(wire) == frame
    assert StreamDecoder().feed(wire + wire) == [frame, frame]


def _command_name(body: Any) -> str:
    return next(n for n, c in SPEC.commands.items() if c.body_type == type(body).__name__)
