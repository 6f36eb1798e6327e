"""The batch container: many messages in one entry, and back.

A batched payload is the generated ``Batch`` layout: entries of ``u32 metadata size``,
``SingleMessageMetadata``, ``payload_size`` bytes of data. ``Batch``/``BatchEntry`` encode and
decode it in general; the two functions here are the hot paths:

* ``append_entry`` adds one entry whose metadata holds only ``payload_size`` and
  ``sequence_id`` (the common case) without building a metadata object: four byte strings
  (size prefix, two varint fields from lookup tables, the data) appended to a list that is
  joined once per batch. Messages with properties, keys or event times go through
  ``append_entry_with_metadata`` and the generated encoder.
* ``split_batch`` reads entries back. When an entry's metadata starts with ``payload_size``
  and holds at most ``sequence_id`` after it, nothing is decoded beyond those varints; any
  other metadata is decoded with the generated ``SingleMessageMetadata.decode_from``.

Both agree with ``Batch.encode``/``Batch.decode`` byte for byte (tests check it).
"""

from __future__ import annotations

from struct import Struct

from protoframe.generated.pulsar import pulsar_api as pb
from protoframe.generated.pulsar.frames import BatchEntry
from protoframe.runtime.codec.protowire import SMALL_VARINTS, read_varint, varint_bytes
from protoframe.runtime.errors import SizeMismatchError, TruncatedError

__all__ = [
    "BatchBuilder",
    "append_entry",
    "append_entry_with_metadata",
    "split_batch",
]

_U32 = Struct(">I")
_pack_u32 = _U32.pack
_unpack_u32 = _U32.unpack_from
_SMALL = SMALL_VARINTS
_TAG_PAYLOAD_SIZE = 0x18  # field 3, varint
_TAG_SEQUENCE_ID = 0x40  # field 8, varint
_MASK64 = 0xFFFF_FFFF_FFFF_FFFF
# Encoded ``sequence_id`` fields: whole for ids below 2**14; for ids below 2**28, the tag and
# the low 14 bits (continuation bits set), to which the high bits' varint byte(s) are added.
_SEQ_FIELD = [b"\x40" + v for v in SMALL_VARINTS]
_SEQ_FIELD_LOW = [b"\x40" + bytes(((i & 0x7F) | 0x80, (i >> 7) | 0x80)) for i in range(1 << 14)]
# Encoded ``payload_size`` fields by payload length (payload sizes repeat a lot).
SIZE_FIELD: dict[int, bytes] = {}
# The u32 metadata-size prefixes of fast-path entries (their metadata is at most 22 bytes).
U32_SMALL = [_pack_u32(i) for i in range(32)]
SEQ_FIELD = _SEQ_FIELD
SEQ_FIELD_LOW = _SEQ_FIELD_LOW


def size_field(n: int) -> bytes:
    """The encoded ``payload_size`` field for ``n`` bytes (cached)."""
    head = SIZE_FIELD.get(n)
    if head is None:
        head = b"\x18" + varint_bytes(n)
        if len(SIZE_FIELD) < 65536:
            SIZE_FIELD[n] = head
    return head


def sequence_field(sequence_id: int) -> bytes:
    """The encoded ``sequence_id`` field."""
    if 0 <= sequence_id < 0x4000:
        return _SEQ_FIELD[sequence_id]
    if 0 <= sequence_id < 0x1000_0000:
        return _SEQ_FIELD_LOW[sequence_id & 0x3FFF] + _SMALL[sequence_id >> 14]
    return b"\x40" + varint_bytes(sequence_id & _MASK64)


def append_entry(parts: list[bytes], data: bytes, sequence_id: int) -> int:
    """Append one batch entry with metadata ``{payload_size, sequence_id}`` to ``parts`` (to be
    joined); return the number of bytes it adds. (The producer inlines this.)"""
    n = len(data)
    head = SIZE_FIELD.get(n) or size_field(n)
    tail = sequence_field(sequence_id)
    size = len(head) + len(tail)
    parts += (U32_SMALL[size], head, tail, data)
    return size + 4 + n


def append_entry_with_metadata(parts: list[bytes], data: bytes,
                               metadata: pb.SingleMessageMetadata) -> int:
    """Append one batch entry with full metadata (``payload_size`` is filled in); return the
    number of bytes it adds."""
    entry = BatchEntry(metadata=metadata, data=data).encode()
    parts.append(entry)
    return len(entry)


def split_batch(buf: bytes, count: int = -1) -> list[tuple[bytes, pb.SingleMessageMetadata | None]]:
    """The entries of a batched payload, as ``(data, metadata)``.

    ``metadata`` is None when the entry's metadata holds nothing beyond ``payload_size`` and
    ``sequence_id``. ``count`` (``num_messages_in_batch``), when not -1, must match the number
    of entries. Raises a ``DecodeError`` subclass on malformed input.
    """
    out: list[tuple[bytes, pb.SingleMessageMetadata | None]] = []
    append = out.append
    pos = 0
    end = len(buf)
    try:
        while pos < end:
            msize = _unpack_u32(buf, pos)[0]
            mstart = pos + 4
            mend = mstart + msize
            if mend > end:
                raise SizeMismatchError(
                    f"batch entry metadata of {msize} bytes runs past the end of the batch")
            if msize and buf[mstart] == _TAG_PAYLOAD_SIZE:
                size = buf[mstart + 1]
                if size < 0x80:
                    p = mstart + 2
                else:
                    size, p = read_varint(buf, mstart + 1)
                if p == mend or (p < mend and buf[p] == _TAG_SEQUENCE_ID
                                 and _varint_end(buf, p + 1) == mend):
                    pos = mend + size
                    if pos > end:
                        raise SizeMismatchError(
                            f"batch entry data of {size} bytes runs past the end of the batch")
                    append((buf[mend:pos], None))
                    continue
                if p > mend:
                    raise SizeMismatchError("batch entry metadata is malformed")
            # Anything else: the generated decoder.
            entry, pos = BatchEntry.decode_from(buf, pos, end)
            append((entry.data, entry.metadata))
    except IndexError:
        raise TruncatedError("batch entry truncated") from None
    if count >= 0 and len(out) != count:
        raise SizeMismatchError(
            f"batch holds {len(out)} entries but its metadata says {count}")
    return out


def _varint_end(buf: bytes, pos: int) -> int:
    while buf[pos] >= 0x80:
        pos += 1
    return pos + 1


class BatchBuilder:
    """Messages collected for one batched SEND: the encoded entries and their bookkeeping."""

    __slots__ = ("parts", "nbytes", "count", "first_sequence_id", "last_sequence_id", "key",
                 "mixed_keys")

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.nbytes = 0
        self.count = 0
        self.first_sequence_id = -1
        self.last_sequence_id = -1
        self.key: str | None = None
        self.mixed_keys = False

    def __len__(self) -> int:
        return self.count

    def payload(self) -> bytes:
        """The batched payload (before compression)."""
        return b"".join(self.parts)

    def add(
        self,
        data: bytes,
        sequence_id: int,
        *,
        properties: dict[str, str] | None = None,
        partition_key: str | None = None,
        ordering_key: bytes | None = None,
        event_timestamp: int | None = None,
    ) -> int:
        """Add one message; return its index in the batch."""
        if properties or partition_key is not None or ordering_key is not None or \
                event_timestamp is not None:
            self.nbytes += append_entry_with_metadata(self.parts, data, pb.SingleMessageMetadata(
                payload_size=0,
                properties=[pb.KeyValue(key=k, value=v) for k, v in properties.items()]
                if properties else None,
                partition_key=partition_key,
                ordering_key=ordering_key,
                event_time=event_timestamp,
                sequence_id=sequence_id,
            ))
        else:
            self.nbytes += append_entry(self.parts, data, sequence_id)
        self.note_key(partition_key)
        index = self.count
        if index == 0:
            self.first_sequence_id = sequence_id
        self.last_sequence_id = sequence_id
        self.count = index + 1
        return index

    def note_key(self, key: str | None) -> None:
        if self.count == 0:
            self.key = key
        elif key != self.key:
            self.mixed_keys = True

    def common_key(self) -> str | None:
        """The key every message in the batch has, if they all have the same one."""
        return None if self.mixed_keys else self.key
