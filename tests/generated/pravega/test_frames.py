"""Pravega wire commands generated from specs/pravega/pravega.yaml.

Expected bytes are written out by hand from the layouts in the reference (type, length, then
the fields in upstream order; strings as u16 length + modified UTF-8, UUIDs as two longs), not
produced by the encoder under test.
"""

from __future__ import annotations

import re
import struct
from typing import Any
from uuid import UUID

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protoframe.generated.pravega import frames as pv
from protoframe.generated.pravega.frames import (
    AppendBlockEnd,
    ConditionalAppend,
    CreateSegment,
    DataAppended,
    ErrorMessage,
    Event,
    EventRun,
    Frame,
    GetStreamSegmentInfo,
    Hello,
    KeepAlive,
    NoSuchSegment,
    Padding,
    PartialEvent,
    ReadSegment,
    SegmentCreated,
    SegmentIsSealed,
    SegmentRead,
    SetupAppend,
    StreamDecoder,
    StreamSegmentInfo,
    WrongHost,
)
from protoframe.generated.pravega.machines import command_of
from protoframe.generator.frame_ir import (
    ArrayField,
    BoolField,
    BytesField,
    FrameField,
    IntField,
    StringField,
    StructDef,
    StructField,
    UuidField,
)
from protoframe.generator.frame_model import load_frame_spec
from protoframe.generator.proto_model import load_protocol
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
from tests.support.examples import scaled
from tests.support.paths import ROOT

WRITER = UUID("00112233-4455-6677-8899-aabbccddeeff")
WRITER_HEX = "00112233445566778899aabbccddeeff"


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


HELLO = h("ffffff81 00000008 0000000f 00000005")
KEEP_ALIVE = h("00000064 00000000")

# SETUP_APPEND: request_id 1, writer, segment "scope/stream/0" (14 bytes), empty token.
SETUP_APPEND = h("00000001 0000002a 0000000000000001" + WRITER_HEX
                 + "000e 73636f70652f73747265616d2f30 0000")

# DATA_APPENDED with every optional trailing field present.
DATA_APPENDED_FULL = h("00000007 00000030" + WRITER_HEX
                       + "0000000000000005 0000000000000004 0000000000000009 0000000000000400")

# CONDITIONAL_APPEND with an embedded EVENT (type 0, length 2, "hi") and request_id 7.
CONDITIONAL_APPEND = h("00000005 00000032" + WRITER_HEX
                       + "0000000000000001 0000000000000000"
                       + "00000000 00000002 6869"
                       + "0000000000000007")

READ_SEGMENT = h("00000009 00000019 0001 73 0000000000000010 00000100 0000 0000000000000002")
SEGMENT_READ = h("0000000a 0000001c 0001 73 0000000000000010 01 00 00000003 78797a"
                 " 0000000000000002")
WRONG_HOST = h("00000032 00000012 0000000000000002 0001 73 0003 683a31 0000")
NO_SUCH_SEGMENT = h("00000035 00000015 0000000000000002 0001 73 0000 ffffffffffffffff")
ERROR_MESSAGE = h("0000003d 00000014 0000000000000004 0001 73 0003 626164 00000000")
# APPEND_BLOCK_END: 10 bytes of whole events in the block, 6 bytes of data, 1 event, last
# event number 1, request_id 9.
CREATE_SEGMENT = h("00000014 0000001a 0000000000000001 0001 73 00000000 00 0000"
                   " 0000000000000000")
SEGMENT_IS_SEALED = h("00000033 00000015 0000000000000002 0001 73 0000 0000000000000005")
APPEND_BLOCK_END = h("00000004 00000032" + WRITER_HEX
                     + "0000000a 00000006 000000000002 00000001 0000000000000001"
                       " 0000000000000009")

# GET_STREAM_SEGMENT_INFO: request_id 6, segment "s", empty token; and its answer: exists,
# not sealed, not deleted, last modified 1000 ms, write offset 0x75, start offset 0.
GET_STREAM_SEGMENT_INFO = h("0000000b 0000000d 0000000000000006 0001 73 0000")
STREAM_SEGMENT_INFO = h("0000000c 00000026 0000000000000006 0001 73 01 00 00"
                        " 00000000000003e8 0000000000000075 0000000000000000")

VECTORS: list[tuple[bytes, Any]] = [
    (HELLO, Hello(high_version=15, low_version=5)),
    (KEEP_ALIVE, KeepAlive()),
    (SETUP_APPEND, SetupAppend(request_id=1, writer_id=WRITER, segment="scope/stream/0",
                               delegation_token="")),
    (DATA_APPENDED_FULL, DataAppended(writer_id=WRITER, event_number=5, previous_event_number=4,
                                      request_id=9, current_segment_write_offset=1024)),
    (CONDITIONAL_APPEND, ConditionalAppend(writer_id=WRITER, event_number=1, expected_offset=0,
                                           event=Event(data=b"hi"), request_id=7)),
    (READ_SEGMENT, ReadSegment(segment="s", offset=16, suggested_length=256, delegation_token="",
                               request_id=2)),
    (SEGMENT_READ, SegmentRead(segment="s", offset=16, at_tail=True, end_of_segment=False,
                               data=b"xyz", request_id=2)),
    (WRONG_HOST, WrongHost(request_id=2, segment="s", correct_host="h:1",
                           server_stack_trace="")),
    (NO_SUCH_SEGMENT, NoSuchSegment(request_id=2, segment="s", server_stack_trace="",
                                    offset=-1)),
    (ERROR_MESSAGE, ErrorMessage(request_id=4, segment="s", message="bad", error_code=0)),
    (CREATE_SEGMENT, CreateSegment(request_id=1, segment="s", target_rate=0, scale_type=0,
                                   delegation_token="", rollover_size_bytes=0)),
    (SEGMENT_IS_SEALED, SegmentIsSealed(request_id=2, segment="s", server_stack_trace="",
                                        offset=5)),
    (APPEND_BLOCK_END, AppendBlockEnd(writer_id=WRITER, size_of_whole_events=10,
                                      data=h("00000000 0002"), num_events=1,
                                      last_event_number=1, request_id=9)),
    (GET_STREAM_SEGMENT_INFO, GetStreamSegmentInfo(request_id=6, segment="s",
                                                   delegation_token="")),
    (STREAM_SEGMENT_INFO, StreamSegmentInfo(request_id=6, segment="s", exists=True,
                                            is_sealed=False, is_deleted=False,
                                            last_modified=1000, write_offset=0x75,
                                            start_offset=0)),
]


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

SPEC = load_frame_spec(ROOT / "specs/pravega/pravega.yaml", "specs/pravega/pravega.yaml",
                       load_protocol(ROOT / "specs", "pravega", "specs"))
_text = st.text(st.characters(codec="utf-16", exclude_categories=["Cs"]), max_size=20)


def _strategy(f: FrameField) -> st.SearchStrategy[Any]:
    if isinstance(f, IntField):
        bits = f.width * 8
        if f.signed:
            return st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
        return st.integers(0, (1 << bits) - 1)
    if isinstance(f, BoolField):
        return st.booleans()
    if isinstance(f, UuidField):
        return st.uuids()
    if isinstance(f, StringField):
        return _text
    if isinstance(f, BytesField):
        return st.binary(max_size=40)
    if isinstance(f, StructField):
        assert f.struct is not None
        return _struct_strategy(f.struct)
    if isinstance(f, ArrayField):
        assert f.element is not None
        return st.lists(_strategy(f.element), max_size=3)
    raise AssertionError(f.kind)


def _struct_strategy(s: StructDef) -> st.SearchStrategy[Any]:
    cls = getattr(pv, s.name)
    built = st.builds(cls, **{f.name: st.none() | _strategy(f) if f.when is not None
                              else _strategy(f) for f in s.data_fields})
    if any(f.when is not None for f in s.data_fields):
        # A field present only under a condition (a table key's version, absent when the key
        # is empty) must be None exactly when the condition fails: keep what encodes.
        return built.filter(_encodes)
    return built


def _encodes(value: Any) -> bool:
    try:
        value.encode()
    except EncodeError:
        return False
    return True


COMMANDS = [c.case.structs[0] for c in SPEC.commands.values() if c.case is not None]


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


@settings(max_examples=scaled(300), deadline=None)
@given(st.one_of([_struct_strategy(s) for s in COMMANDS]))
def test_round_trip_every_command(body: Any) -> None:
    frame = Frame(body=body)
    wire = frame.encode()
    (type_code, length) = struct.unpack_from(">ii", wire)
    assert length == len(wire) - 8
    assert type_code == SPEC.commands[_command_name(body)].value
    assert Frame.decode(wire) == frame
    assert StreamDecoder().feed(wire + wire) == [frame, frame]


def _command_name(body: Any) -> str:
    return next(n for n, c in SPEC.commands.items() if c.body_type == type(body).__name__)
