"""Typed calls about a segment as a whole: its state and its truncation.

Truncation drops a segment's data before an offset; offsets after it keep their meaning, and a
read before it fails with ``SegmentIsTruncated``, which says where the data now starts.
"""

from __future__ import annotations

from dataclasses import dataclass

from protoframe.runtime.errors import RequestFailed

from .connection import PravegaConnection
from .errors import NoSuchSegment, reply_error

__all__ = ["SegmentInfo", "segment_info", "truncate_segment"]


@dataclass(frozen=True)
class SegmentInfo:
    """What GET_STREAM_SEGMENT_INFO says about an existing segment."""

    segment: str
    sealed: bool
    start_offset: int  # the first offset still readable
    length: int  # where the next append lands
    last_modified_ms: int


async def segment_info(connection: PravegaConnection, segment: str, *,
                       delegation_token: str = "") -> SegmentInfo:
    """The state of ``segment``; raises ``NoSuchSegment`` if it does not exist."""
    try:
        info = await connection.requests.get_stream_segment_info(segment, delegation_token)
    except RequestFailed as exc:
        raise reply_error(exc) from None
    if not info.exists or info.is_deleted:
        # The store describes a missing segment rather than refusing the request.
        raise NoSuchSegment("no such segment", segment, info)
    return SegmentInfo(segment=info.segment, sealed=info.is_sealed,
                       start_offset=info.start_offset, length=info.write_offset,
                       last_modified_ms=info.last_modified)


async def truncate_segment(connection: PravegaConnection, segment: str, offset: int, *,
                           delegation_token: str = "") -> None:
    """Drop the data of ``segment`` before ``offset``.

    ``offset`` must lie between the segment's start offset and its length: otherwise this
    raises ``SegmentIsTruncated`` (its ``start_offset`` is the segment's). Truncating at the
    start offset again changes nothing, so a repeated call after a lost answer is harmless.
    Raises ``NoSuchSegment`` for a missing segment.
    """
    try:
        await connection.requests.truncate_segment(segment, offset, delegation_token)
    except RequestFailed as exc:
        raise reply_error(exc) from None
