"""What a reader group keeps in its table segment, one entry per segment and per reader.

A segment's entry says which reader holds it (none when free), the offset of the first event
not yet consumed, and whether the segment was read to its sealed end (an ended segment is never
held again; its successors join the group once all their predecessors ended). Every change to
it is a conditional put at the version read, so two readers racing for one segment cannot both
win. A reader's entry only says it is a member: the member count sets each reader's fair share
of the segments.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

__all__ = ["READER_PREFIX", "SEGMENT_PREFIX", "SegmentClaim", "decode_claim", "encode_claim",
           "group_table_name", "reader_key", "segment_key"]

SEGMENT_PREFIX = b"segment/"
READER_PREFIX = b"reader/"


def group_table_name(scope: str, group: str) -> str:
    """The table segment holding the state of reader group ``group`` in ``scope``."""
    if not scope or not group or "/" in scope or "/" in group:
        raise ValueError(f"bad reader group {scope!r}/{group!r}")
    return f"_system/_tables/{scope}/_RG{group}"


def segment_key(segment: str) -> bytes:
    return SEGMENT_PREFIX + segment.encode()


def reader_key(reader: str) -> bytes:
    if not reader:
        raise ValueError("a reader id cannot be empty")
    return READER_PREFIX + reader.encode()


@dataclass(frozen=True, slots=True)
class SegmentClaim:
    """One segment's entry: its holder (None if free), its read position, the entry's
    table version, which the next change of it must be conditioned on, and whether it was
    read to its end."""

    segment: str
    owner: str | None
    offset: int
    version: int
    ended: bool = False


def encode_claim(owner: str | None, offset: int, ended: bool = False) -> bytes:
    if offset < 0:
        raise ValueError(f"negative read position {offset}")
    if ended and owner is not None:
        raise ValueError("an ended segment has no holder")
    return json.dumps({"owner": owner, "offset": offset, "ended": ended},
                      sort_keys=True).encode()


def decode_claim(segment: str, value: bytes, version: int) -> SegmentClaim:
    """The claim in ``value``; ``ValueError`` if it is not one (a table not of a group)."""
    try:
        fields = json.loads(value)
        owner, offset = fields["owner"], fields["offset"]
        ended = fields.get("ended", False)  # entries written before segments could end
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ValueError(f"{segment}: not a reader group entry: {value!r}") from exc
    if not (owner is None or isinstance(owner, str)) or not isinstance(offset, int) \
            or not isinstance(ended, bool):
        raise ValueError(f"{segment}: not a reader group entry: {value!r}")
    return SegmentClaim(segment, owner, offset, version, ended)
