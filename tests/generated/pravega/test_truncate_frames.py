"""Pravega's truncation commands (TRUNCATE_SEGMENT 38, SEGMENT_TRUNCATED 39 and the
SEGMENT_IS_TRUNCATED 56 refusal) generated from specs/pravega/pravega.yaml.

Expected bytes are written out by hand from the upstream field order: TRUNCATE_SEGMENT is the
request id, the segment, the i64 truncation offset and the delegation token; SEGMENT_TRUNCATED
is the request id and the segment; SEGMENT_IS_TRUNCATED adds the start offset, a stack trace
and (from newer stores) the offset the request named. Segment "t" is ``0001 74``, an empty
string ``0000``.
"""

from __future__ import annotations

from typing import Any

import pytest

from protoframe.generated.pravega.frames import (
    Frame,
    SegmentIsTruncated,
    SegmentTruncated,
    TruncateSegment,
)
from protoframe.generated.pravega.machines import command_of
from protoframe.runtime.errors import DecodeError


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


VECTORS: list[tuple[str, bytes, Any]] = [
    ("TRUNCATE_SEGMENT",
     h("00000026 00000015 0000000000000007 0001 74 0000000000000040 0000"),
     TruncateSegment(request_id=7, segment="t", truncation_offset=0x40, delegation_token="")),
    ("SEGMENT_TRUNCATED", h("00000027 0000000b 0000000000000007 0001 74"),
     SegmentTruncated(request_id=7, segment="t")),
    ("SEGMENT_IS_TRUNCATED",
     h("00000038 0000001d 0000000000000008 0001 74 0000000000000040 0000 0000000000000010"),
     SegmentIsTruncated(request_id=8, segment="t", start_offset=0x40, server_stack_trace="",
                        offset=0x10)),
]
IDS = [name for name, _, _ in VECTORS]


@pytest.mark.parametrize(("name", "wire", "body"), VECTORS, ids=IDS)
def test_encode_matches_the_hand_written_bytes(name: str, wire: bytes, body: Any) -> None:
    assert Frame(body=body).encode() == wire


@pytest.mark.parametrize(("name", "wire", "body"), VECTORS, ids=IDS)
def test_decode_gives_the_values_back_under_the_command_name(name: str, wire: bytes,
                                                             body: Any) -> None:
    frame = Frame.decode(wire)
    assert frame.body == body
    assert command_of(frame) == (name, body)


def test_segment_is_truncated_from_an_older_store_has_no_offset() -> None:
    """Older stores stop after the start offset; the optional fields take their defaults."""
    body = Frame.decode(h("00000038 00000013 0000000000000008 0001 74 0000000000000040")).body
    assert body == SegmentIsTruncated(request_id=8, segment="t", start_offset=0x40,
                                      server_stack_trace="", offset=-1)


def test_a_truncate_segment_cut_short_is_refused() -> None:
    with pytest.raises(DecodeError):
        Frame.decode(h("00000026 0000000f 0000000000000007 0001 74 00000000"))
