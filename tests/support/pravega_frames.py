"""Pravega frames as test data: hand-packed wire vectors and hypothesis values of every command.

Shared by the frame codec's tests and the Spark row tests. The expected bytes are written out by
hand from the reference layouts (type, length, then the fields in upstream order; strings as u16
length + modified UTF-8, UUIDs as two longs), not produced by the encoder under test.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from hypothesis import strategies as st

from protoframe.generated.pravega import frames as pv
from protoframe.generated.pravega.frames import (
    AppendBlockEnd,
    ConditionalAppend,
    CreateSegment,
    DataAppended,
    ErrorMessage,
    Event,
    GetStreamSegmentInfo,
    Hello,
    KeepAlive,
    NoSuchSegment,
    ReadSegment,
    SegmentIsSealed,
    SegmentRead,
    SetupAppend,
    StreamSegmentInfo,
    WrongHost,
)
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
from protoframe.runtime.errors import EncodeError
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


SPEC = load_frame_spec(ROOT / "specs/pravega/pravega.yaml", "specs/pravega/pravega.yaml",
                       load_protocol(ROOT / "specs", "pravega", "specs"))
_text = st.text(st.characters(codec="utf-16", exclude_categories=["Cs"]), max_size=20)


def field_strategy(f: FrameField) -> st.SearchStrategy[Any]:
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
        return struct_strategy(f.struct)
    if isinstance(f, ArrayField):
        assert f.element is not None
        return st.lists(field_strategy(f.element), max_size=3)
    raise AssertionError(f.kind)


def struct_strategy(s: StructDef) -> st.SearchStrategy[Any]:
    cls = getattr(pv, s.name)
    built = st.builds(cls, **{f.name: st.none() | field_strategy(f) if f.when is not None
                              else field_strategy(f) for f in s.data_fields})
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
