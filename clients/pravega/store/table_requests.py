"""The segment store's answers to the table-segment commands, without I/O.

``TableRequests`` maps each table request body to its reply bodies over a ``TableStore``.
Refusals the protocol has replies for (a missing table segment or key, a bad version, a table
segment that is not empty, an update of a sealed one) are replies; malformed requests (an
empty key, a continuation token we never issued, a reply that would not fit in a frame) are
ERROR_MESSAGE with the illegal argument code, as the Java store answers an
``IllegalArgumentException``.

Memory per request is bounded: a page of keys or entries stops at ``max_read_size`` bytes of
keys and values (and at the suggested count), and a READ_TABLE whose answer would not fit in
``max_frame_size`` is refused rather than built. Pages are in key byte order, and the
continuation token is ours: a marker byte and the last key of the page.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from protoframe.generated.pravega import frames

from ..table_keys import NO_VERSION, NOT_EXISTS, TableEntry
from .tables import (
    KeyDoesNotExist,
    TableConflict,
    TableSealed,
    TableSegment,
    TableStore,
    record_size,
)

__all__ = ["ILLEGAL_ARGUMENT", "TableRequests"]

ILLEGAL_ARGUMENT = 0  # ERROR_MESSAGE error code
_TOKEN_MARK = b"\x01"
# What a TABLE_READ takes besides its entries: the type, length, request id, the segment
# name's length and the entry count; each entry adds its two structs' fixed fields.
_READ_OVERHEAD = 8 + 8 + 2 + 4
_ENTRY_OVERHEAD = 4 + 4 + 8 + 4 + 4

Reply = list[frames.FrameBody]


class TableRequests:
    """Answers table-segment requests over ``store``."""

    def __init__(self, store: TableStore, *, max_read_size: int, max_frame_size: int,
                 name_taken: Callable[[str], bool] = lambda name: False) -> None:
        self.store = store
        self.max_read_size = max_read_size
        self.max_frame_size = max_frame_size
        self.name_taken = name_taken  # a stream segment of that name exists
        self.handlers: dict[str, Callable[[Any], Reply]] = {
            "CREATE_TABLE_SEGMENT": self.create,
            "DELETE_TABLE_SEGMENT": self.delete,
            "GET_TABLE_SEGMENT_INFO": self.info,
            "UPDATE_TABLE_ENTRIES": self.update,
            "REMOVE_TABLE_KEYS": self.remove,
            "READ_TABLE": self.read,
            "READ_TABLE_KEYS": self.read_keys,
            "READ_TABLE_ENTRIES": self.read_entries,
            "READ_TABLE_ENTRIES_DELTA": self.read_delta,
        }

    # ---- table segments --------------------------------------------------------------------

    def create(self, body: frames.CreateTableSegment) -> Reply:
        if self.name_taken(body.segment) or \
                self.store.create(body.segment, max(body.key_length, 0)) is None:
            return [frames.SegmentAlreadyExists(request_id=body.request_id,
                                                segment=body.segment)]
        return [frames.SegmentCreated(request_id=body.request_id, segment=body.segment)]

    def delete(self, body: frames.DeleteTableSegment) -> Reply:
        table = self.store.get(body.segment)
        if table is None:
            return [_no_such_segment(body.request_id, body.segment)]
        if body.must_be_empty and table.entries:
            return [frames.TableSegmentNotEmpty(request_id=body.request_id,
                                                segment=body.segment, server_stack_trace="")]
        self.store.delete(body.segment)
        return [frames.SegmentDeleted(request_id=body.request_id, segment=body.segment)]

    def info(self, body: frames.GetTableSegmentInfo) -> Reply:
        table = self.store.get(body.segment)
        if table is None:
            return [_no_such_segment(body.request_id, body.segment)]
        return [frames.TableSegmentInfo(
            request_id=body.request_id, segment=body.segment, start_offset=0,
            length=table.length, entry_count=len(table.entries), key_length=table.key_length)]

    # ---- updates ---------------------------------------------------------------------------

    def update(self, body: frames.UpdateTableEntries) -> Reply:
        table = self.store.get(body.segment)
        if table is None:
            return [_no_such_segment(body.request_id, body.segment, body.table_segment_offset)]
        refusal = self._check_keys(body.request_id, table, [e.key for e in body.entries]) \
            or self._check_offset(body.request_id, table, body.table_segment_offset)
        if refusal:
            return refusal
        updates = [(e.key.data, e.value.data, _version(e.key)) for e in body.entries]
        try:
            versions = self.store.put(table, updates)
        except TableConflict as exc:
            return [_conflict(body.request_id, body.segment, exc)]
        except TableSealed:
            return [_sealed(body.request_id, table)]
        return [frames.TableEntriesUpdated(request_id=body.request_id,
                                           updated_versions=versions)]

    def remove(self, body: frames.RemoveTableKeys) -> Reply:
        table = self.store.get(body.segment)
        if table is None:
            return [_no_such_segment(body.request_id, body.segment, body.table_segment_offset)]
        refusal = self._check_keys(body.request_id, table, body.keys) \
            or self._check_offset(body.request_id, table, body.table_segment_offset)
        if refusal:
            return refusal
        try:
            self.store.remove(table, [(k.data, _version(k)) for k in body.keys])
        except TableConflict as exc:
            return [_conflict(body.request_id, body.segment, exc)]
        except TableSealed:
            return [_sealed(body.request_id, table)]
        return [frames.TableKeysRemoved(request_id=body.request_id, segment=body.segment)]

    def _check_keys(self, request_id: int, table: TableSegment,
                    keys: list[frames.TableKey]) -> Reply:
        for key in keys:
            if not key.data:
                return [_illegal(request_id, table.name, "a table key cannot be empty")]
            if table.key_length and len(key.data) != table.key_length:
                return [_illegal(request_id, table.name,
                                 f"keys of this table segment are {table.key_length} bytes, "
                                 f"not {len(key.data)}")]
        return []

    def _check_offset(self, request_id: int, table: TableSegment, offset: int) -> Reply:
        if offset in (-1, table.length):
            return []
        # The Java store reports a table segment offset mismatch as its BadOffsetException,
        # SEGMENT_IS_TRUNCATED with the offset the segment really has.
        return [frames.SegmentIsTruncated(request_id=request_id, segment=table.name,
                                          start_offset=table.length, server_stack_trace="",
                                          offset=offset)]

    # ---- reads -----------------------------------------------------------------------------

    def read(self, body: frames.ReadTable) -> Reply:
        table = self.store.get(body.segment)
        if table is None:
            return [_no_such_segment(body.request_id, body.segment)]
        refusal = self._check_keys(body.request_id, table, body.keys)
        if refusal:
            return refusal
        size = _READ_OVERHEAD + len(body.segment.encode())
        entries = []
        for key in body.keys:
            entry = table.entries.get(key.data)
            value = entry.value if entry is not None else b""
            size += _ENTRY_OVERHEAD + len(key.data) + len(value)
            if size > self.max_frame_size:
                return [_illegal(body.request_id, body.segment,
                                 f"the values of {len(body.keys)} keys do not fit in one "
                                 f"reply of at most {self.max_frame_size} bytes")]
            version = entry.version if entry is not None else NOT_EXISTS
            entries.append(frames.TableEntry(
                key=frames.TableKey(data=key.data, key_version=version),
                value=frames.TableValue(data=value)))
        return [frames.TableRead(request_id=body.request_id, segment=body.segment,
                                 entries=entries)]

    def read_keys(self, body: frames.ReadTableKeys) -> Reply:
        table = self.store.get(body.segment)
        if table is None:
            return [_no_such_segment(body.request_id, body.segment)]
        page = self._page(table, body.continuation_token, body.suggested_key_count,
                          body.from_key, body.to_key, with_values=False)
        if isinstance(page, str):
            return [_illegal(body.request_id, body.segment, page)]
        entries, token = page
        return [frames.TableKeysRead(
            request_id=body.request_id, segment=body.segment,
            keys=[frames.TableKey(data=e.key, key_version=e.version) for e in entries],
            continuation_token=token)]

    def read_entries(self, body: frames.ReadTableEntries) -> Reply:
        table = self.store.get(body.segment)
        if table is None:
            return [_no_such_segment(body.request_id, body.segment)]
        page = self._page(table, body.continuation_token, body.suggested_entry_count,
                          body.from_key, body.to_key, with_values=True)
        if isinstance(page, str):
            return [_illegal(body.request_id, body.segment, page)]
        entries, token = page
        return [frames.TableEntriesRead(
            request_id=body.request_id, segment=body.segment,
            entries=[_wire_entry(e) for e in entries], continuation_token=token)]

    def _page(self, table: TableSegment, token: bytes, count: int, from_key: bytes | None,
              to_key: bytes | None, *, with_values: bool
              ) -> tuple[list[TableEntry], bytes] | str:
        """The next page after ``token`` (or the refusal's reason): the entries and the
        token that follows them. A page that ends with nothing left returns a token that
        continues to an empty page, as the Java store's does."""
        if token and not token.startswith(_TOKEN_MARK):
            return "not a continuation token of this segment store"
        after = token[len(_TOKEN_MARK):] if token else None
        keys = table.keys_from(after, from_key or None, count)
        entries: list[TableEntry] = []
        size = 0
        for key in keys:
            if len(entries) >= count or (entries and size >= self.max_read_size):
                break
            if to_key and key > to_key:
                break
            entry = table.entries[key]
            size += _ENTRY_OVERHEAD + len(key) + (len(entry.value) if with_values else 0)
            entries.append(entry)
        if not entries:
            return [], token
        return entries, _TOKEN_MARK + entries[-1].key

    def read_delta(self, body: frames.ReadTableEntriesDelta) -> Reply:
        table = self.store.get(body.segment)
        if table is None:
            return [_no_such_segment(body.request_id, body.segment)]
        if not 0 <= body.from_position <= table.length:
            return [_illegal(body.request_id, body.segment,
                             f"position {body.from_position} outside [0, {table.length}]")]
        changes = table.changes_since(body.from_position)
        entries: list[TableEntry] = []
        size = 0
        position = body.from_position
        consumed = 0
        for offset, key, entry in changes:
            if entry is None:
                # Removed: a delta read reports only what is there, and reading past a
                # removal costs no room in the reply.
                position = offset + record_size(key, None)
            elif len(entries) >= body.suggested_entry_count or \
                    (entries and size >= self.max_read_size):
                break
            else:
                size += _ENTRY_OVERHEAD + len(entry.key) + len(entry.value)
                entries.append(entry)
                position = offset + record_size(entry.key, entry.value)
            consumed += 1
        reached_end = consumed == len(changes)
        if reached_end:
            position = table.length
        return [frames.TableEntriesDeltaRead(
            request_id=body.request_id, segment=body.segment,
            entries=[_wire_entry(e) for e in entries], should_clear=False,
            reached_end=reached_end, last_position=position)]


def _version(key: frames.TableKey) -> int:
    return key.key_version if key.key_version is not None else NO_VERSION


def _wire_entry(entry: TableEntry) -> frames.TableEntry:
    return frames.TableEntry(key=frames.TableKey(data=entry.key, key_version=entry.version),
                             value=frames.TableValue(data=entry.value))


def _conflict(request_id: int, segment: str, exc: TableConflict) -> frames.FrameBody:
    if isinstance(exc, KeyDoesNotExist):
        return frames.TableKeyDoesNotExist(request_id=request_id, segment=segment,
                                           server_stack_trace="")
    return frames.TableKeyBadVersion(request_id=request_id, segment=segment,
                                     server_stack_trace="")


def _sealed(request_id: int, table: TableSegment) -> frames.SegmentIsSealed:
    return frames.SegmentIsSealed(request_id=request_id, segment=table.name, offset=table.length)


def _no_such_segment(request_id: int, segment: str, offset: int = -1) -> frames.NoSuchSegment:
    return frames.NoSuchSegment(request_id=request_id, segment=segment, offset=offset)


def _illegal(request_id: int, segment: str, message: str) -> frames.ErrorMessage:
    return frames.ErrorMessage(request_id=request_id, segment=segment, message=message,
                               error_code=ILLEGAL_ARGUMENT)
