"""The broker log's records: what each record holds, and how it is encoded and decoded.

Each record body starts with a type byte (topic, entry, cursor, deleted subscription,
partitioned topic, deduplication state) followed by fixed-width big-endian fields and
u16-length names; ``logframes`` frames the bodies in the file. ``storage`` writes and reads
them; ``snapshot_bodies`` gives the records that rebuild the live state when the log is
compacted.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from . import logframes as lf
from .entries import Entry, EntryTable
from .subscriptions import Subscription, mask_to_words, words_to_mask
from .topics import Topic

_STR = struct.Struct(">H")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")

_TOPIC, _ENTRY, _CURSOR, _SUB_DELETED, _PARTITIONED, _DEDUP, _DEDUP_EXPIRED = range(1, 8)
_ENTRY_HEAD = struct.Struct(">BQQiBqQQ")
_TOPIC_HEAD = struct.Struct(">BQQ")
_CURSOR_HEAD = struct.Struct(">BQ")
_PARTITIONED_HEAD = struct.Struct(">BI")
_DEDUP_HEAD = struct.Struct(">BQqqqq")


@dataclass(slots=True)
class TopicRecord:
    ledger_id: int
    next_entry_id: int
    name: str


@dataclass(slots=True)
class EntryRecord:
    ledger_id: int
    entry_id: int
    num_messages: int
    is_batch: bool
    publish_time: int
    first_sequence_id: int
    highest_sequence_id: int
    producer_name: str
    key: bytes
    payload: bytes  # empty when read from a log: the payload stays there
    payload_offset: int = -1
    payload_size: int = 0


@dataclass(slots=True)
class CursorRecord:
    ledger_id: int
    subscription: str
    sub_type: int
    mark_delete: int
    acked: list[int]
    partial: dict[int, int]


@dataclass(slots=True)
class SubscriptionDeletedRecord:
    ledger_id: int
    subscription: str


@dataclass(slots=True)
class PartitionedRecord:
    name: str
    partitions: int


@dataclass(slots=True)
class DedupRecord:
    ledger_id: int
    producer_name: str
    highest: int
    first: int
    last: int
    entry_id: int


@dataclass(slots=True)
class DedupExpiredRecord:
    """A producer name's deduplication state expired: the entries before this record no
    longer count for it (without the record, a restart would bring the name back)."""

    ledger_id: int
    producer_name: str


Record = (TopicRecord | EntryRecord | CursorRecord | SubscriptionDeletedRecord
          | PartitionedRecord | DedupRecord | DedupExpiredRecord)


def _str(value: str | bytes) -> bytes:
    data = value.encode() if isinstance(value, str) else value
    return _STR.pack(len(data)) + data


def _read_str(body: bytes, pos: int) -> tuple[bytes, int]:
    (size,) = _STR.unpack_from(body, pos)
    pos += 2
    if pos + size > len(body):
        raise ValueError("string runs past the record")
    return body[pos:pos + size], pos + size


def encode_topic(topic: Topic) -> bytes:
    return _TOPIC_HEAD.pack(_TOPIC, topic.ledger_id, topic.next_entry_id) + _str(topic.name)


def entry_head(topic: Topic, entry: Entry, producer_name: str, first: int,
               highest: int) -> bytes:
    """The record body of an entry up to its payload, which follows it unchanged."""
    return (_ENTRY_HEAD.pack(_ENTRY, topic.ledger_id, entry.entry_id, entry.num_messages,
                             int(entry.is_batch), entry.publish_time, first, highest)
            + _str(producer_name) + _U32.pack(len(entry.key)) + entry.key)


def encode_cursor(sub: Subscription) -> bytes:
    out = bytearray(_CURSOR_HEAD.pack(_CURSOR, sub.topic.ledger_id))
    out += _str(sub.name)
    out += bytes([int(sub.sub_type)])
    out += _I64.pack(sub.mark_delete)
    acked = sorted(sub.acked)
    out += _U32.pack(len(acked))
    out += struct.pack(f">{len(acked)}q", *acked)
    out += _U32.pack(len(sub.partial))
    for entry_id, mask in sorted(sub.partial.items()):
        words = mask_to_words(mask)
        out += _I64.pack(entry_id) + _U32.pack(len(words))
        out += struct.pack(f">{len(words)}q", *words)
    return bytes(out)


def encode_subscription_deleted(topic: Topic, name: str) -> bytes:
    return _CURSOR_HEAD.pack(_SUB_DELETED, topic.ledger_id) + _str(name)


def encode_partitioned(name: str, partitions: int) -> bytes:
    return _PARTITIONED_HEAD.pack(_PARTITIONED, partitions) + _str(name)


def encode_dedup_expired(topic: Topic, producer_name: str) -> bytes:
    return _CURSOR_HEAD.pack(_DEDUP_EXPIRED, topic.ledger_id) + _str(producer_name)


def encode_dedup(topic: Topic) -> list[bytes]:
    return [_DEDUP_HEAD.pack(_DEDUP, topic.ledger_id, highest, first, last, entry_id) + _str(name)
            for name, highest, first, last, entry_id in topic.dedup.snapshot()]


def decode_record(body: bytes, body_offset: int = -1) -> Record:
    """A record from its body; an entry's payload is copied out unless ``body_offset`` (where
    the body is in the log) is given, when only its place is kept."""
    kind = body[0]
    if kind == _ENTRY:
        (_, ledger, entry_id, num, flags, publish_time, first,
         highest) = _ENTRY_HEAD.unpack_from(body, 0)
        name, pos = _read_str(body, _ENTRY_HEAD.size)
        (key_size,) = _U32.unpack_from(body, pos)
        pos += 4
        key = body[pos:pos + key_size]
        pos += key_size
        if pos > len(body):
            raise ValueError("key runs past the record")
        if body_offset < 0:
            return EntryRecord(ledger, entry_id, num, bool(flags & 1), publish_time, first,
                               highest, name.decode(), key, body[pos:], -1, len(body) - pos)
        return EntryRecord(ledger, entry_id, num, bool(flags & 1), publish_time, first, highest,
                           name.decode(), key, b"", body_offset + pos, len(body) - pos)
    if kind == _TOPIC:
        (_, ledger, next_entry_id) = _TOPIC_HEAD.unpack_from(body, 0)
        name, _ = _read_str(body, _TOPIC_HEAD.size)
        return TopicRecord(ledger, next_entry_id, name.decode())
    if kind == _CURSOR:
        (_, ledger) = _CURSOR_HEAD.unpack_from(body, 0)
        sub, pos = _read_str(body, _CURSOR_HEAD.size)
        sub_type = body[pos]
        (mark_delete,) = _I64.unpack_from(body, pos + 1)
        pos += 9
        (count,) = _U32.unpack_from(body, pos)
        pos += 4
        acked = list(struct.unpack_from(f">{count}q", body, pos))
        pos += 8 * count
        (count,) = _U32.unpack_from(body, pos)
        pos += 4
        partial = {}
        for _ in range(count):
            (entry_id,) = _I64.unpack_from(body, pos)
            (nwords,) = _U32.unpack_from(body, pos + 8)
            pos += 12
            partial[entry_id] = words_to_mask(struct.unpack_from(f">{nwords}q", body, pos))
            pos += 8 * nwords
        return CursorRecord(ledger, sub.decode(), sub_type, mark_delete, acked, partial)
    if kind == _SUB_DELETED:
        (_, ledger) = _CURSOR_HEAD.unpack_from(body, 0)
        sub, _ = _read_str(body, _CURSOR_HEAD.size)
        return SubscriptionDeletedRecord(ledger, sub.decode())
    if kind == _PARTITIONED:
        (_, partitions) = _PARTITIONED_HEAD.unpack_from(body, 0)
        name, _ = _read_str(body, _PARTITIONED_HEAD.size)
        return PartitionedRecord(name.decode(), partitions)
    if kind == _DEDUP:
        (_, ledger, highest, first, last, entry_id) = _DEDUP_HEAD.unpack_from(body, 0)
        name, _ = _read_str(body, _DEDUP_HEAD.size)
        return DedupRecord(ledger, name.decode(), highest, first, last, entry_id)
    if kind == _DEDUP_EXPIRED:
        (_, ledger) = _CURSOR_HEAD.unpack_from(body, 0)
        name, _ = _read_str(body, _CURSOR_HEAD.size)
        return DedupExpiredRecord(ledger, name.decode())
    raise ValueError(f"unknown record type {kind}")


frame_record = lf.frame_record


class RecordCheck(lf.EntryCheck):
    """A record is usable if it decodes and, for an entry, its message passes its CRC32C. The
    last usable record stays decoded (``decoded``) so that loading does not decode it again."""

    def __init__(self) -> None:
        self.decoded: tuple[int, Record] | None = None

    def usable(self, body: bytes, body_offset: int) -> str | None:
        try:
            record = decode_record(body, body_offset)
            if isinstance(record, EntryRecord) and not lf.message_crc_ok(
                    memoryview(body)[record.payload_offset - body_offset:]):
                return "message fails its CRC32C"
        except (ValueError, IndexError, struct.error, UnicodeDecodeError) as exc:
            return f"record is unreadable: {exc}"
        self.decoded = body_offset, record
        return None

    def names(self, body: bytes) -> tuple[int, int] | None:
        if len(body) >= _ENTRY_HEAD.size and body[0] == _ENTRY:
            (_, ledger, entry_id, *_rest) = _ENTRY_HEAD.unpack_from(body, 0)
            return int(ledger), int(entry_id)
        return None


# A compaction record: a whole body, or an entry's head with the entry whose payload follows
# and the table that holds it.
SnapshotItem = bytes | tuple[bytes, Entry, EntryTable]

ENCODING_ERRORS = (struct.error, ValueError, OverflowError, UnicodeEncodeError)


def snapshot_bodies(topics: Iterable[Topic], partitioned: dict[str, int]) -> Iterator[SnapshotItem]:
    """The records that rebuild the live state (used to compact the log)."""
    for name, partitions in partitioned.items():
        yield encode_partitioned(name, partitions)
    for topic in topics:
        # The topic record's entry id is where numbering resumes when no entry follows.
        yield _TOPIC_HEAD.pack(_TOPIC, topic.ledger_id, topic.first_available_id) + _str(topic.name)
        yield from encode_dedup(topic)
        for entry in topic.entries:
            if entry is not None:
                yield entry_head(topic, entry, "", 0, 0), entry, topic.entries
        for sub in topic.subscriptions.values():
            if sub.durable:
                yield encode_cursor(sub)
