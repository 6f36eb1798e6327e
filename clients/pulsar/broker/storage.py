"""Persistence: an append-only log of entries and cursors, with group commit.

Without a data directory everything lives in memory (``MemoryStorage``) and a commit completes
at once. With one, ``FileStorage`` appends records to ``<data-dir>/broker.log``; records
appended during one event-loop tick are written and fsynced together on a worker thread, and a
commit's callback runs only after the data appended before it is on disk. The broker sends
SEND_RECEIPT from that callback, so an acknowledged message survives a crash.

Each record is ``u32 length, u32 crc32c(body), body`` and the body starts with a type byte. On
start the log is replayed; a torn or corrupt tail (a crash during a write) is cut off, and the
live state is written to a fresh log that replaces the old one (compaction).
"""

from __future__ import annotations

import asyncio
import logging
import os
import struct
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import crc32c as _crc32c

from protoframe.runtime.codec.checksums import crc32c

from .entries import Entry
from .subscriptions import Subscription, mask_to_words, words_to_mask
from .topics import Topic

log = logging.getLogger(__name__)

LOG_NAME = "broker.log"

CommitCallback = Callable[[Exception | None], None]

_HDR = struct.Struct(">II")
_STR = struct.Struct(">H")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")

_TOPIC, _ENTRY, _CURSOR, _SUB_DELETED, _PARTITIONED, _DEDUP = range(1, 7)
_ENTRY_HEAD = struct.Struct(">BQQiBqQQ")
_TOPIC_HEAD = struct.Struct(">BQQ")
_CURSOR_HEAD = struct.Struct(">BQ")
_PARTITIONED_HEAD = struct.Struct(">BI")
_DEDUP_HEAD = struct.Struct(">BQqqqq")


class StorageError(Exception):
    """The log could not be written."""


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
    payload: bytes


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


Record = (TopicRecord | EntryRecord | CursorRecord | SubscriptionDeletedRecord
          | PartitionedRecord | DedupRecord)


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


def encode_dedup(topic: Topic) -> list[bytes]:
    return [_DEDUP_HEAD.pack(_DEDUP, topic.ledger_id, highest, first, last, entry_id) + _str(name)
            for name, highest, first, last, entry_id in topic.dedup.snapshot()]


def decode_record(body: bytes) -> Record:
    kind = body[0]
    if kind == _ENTRY:
        (_, ledger, entry_id, num, flags, publish_time, first,
         highest) = _ENTRY_HEAD.unpack_from(body, 0)
        name, pos = _read_str(body, _ENTRY_HEAD.size)
        (key_size,) = _U32.unpack_from(body, pos)
        pos += 4
        key = body[pos:pos + key_size]
        pos += key_size
        return EntryRecord(ledger, entry_id, num, bool(flags & 1), publish_time, first, highest,
                           name.decode(), key, body[pos:])
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
    raise ValueError(f"unknown record type {kind}")


def frame_record(body: bytes) -> bytes:
    return _HDR.pack(len(body), crc32c(body)) + body


def read_records(data: bytes) -> tuple[list[Record], int]:
    """Records of a log image and the length of its valid prefix."""
    records: list[Record] = []
    pos, end = 0, len(data)
    view = memoryview(data)
    while pos + 8 <= end:
        size, checksum = _HDR.unpack_from(data, pos)
        if size == 0 or pos + 8 + size > end:
            break
        if crc32c(view[pos + 8:pos + 8 + size]) != checksum:
            log.warning("log record at offset %d fails its checksum", pos)
            break
        try:
            records.append(decode_record(data[pos + 8:pos + 8 + size]))
        except (ValueError, IndexError, struct.error, UnicodeDecodeError) as exc:
            log.warning("log record at offset %d is unreadable: %s", pos, exc)
            break
        pos += 8 + size
    return records, pos


class Storage:
    """In-memory storage: nothing is written and every commit completes at once."""

    persistent = False

    def load(self) -> list[Record]:
        return []

    def rewrite(self, bodies: Iterable[bytes]) -> None:
        """Replace the log with these records (compaction)."""

    def topic_created(self, topic: Topic) -> None:
        """A new topic, with its ledger id."""

    def entry_added(self, topic: Topic, entry: Entry, producer_name: str, first: int,
                    highest: int) -> None:
        """A new entry; durable once a later commit completes."""

    def cursor_changed(self, sub: Subscription) -> None:
        """A subscription's cursor moved; it is written with the next commit."""

    def subscription_deleted(self, topic: Topic, name: str) -> None:
        """A durable subscription was removed."""

    def partitioned_topic_created(self, name: str, partitions: int) -> None:
        """A partitioned topic's partition count."""

    def commit(self, callback: CommitCallback) -> None:
        """Call ``callback(None)`` once everything added so far is durable (or with the error)."""
        callback(None)

    async def close(self) -> None:
        """Write what is pending and release the file."""


MemoryStorage = Storage


class FileStorage(Storage):
    """The append-only log in a data directory."""

    persistent = True

    def __init__(self, directory: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self.directory = Path(directory)
        self.path = self.directory / LOG_NAME
        self.fsync = fsync
        self._fd: int | None = None
        self._chunks: list[bytes] = []
        self._dirty: dict[int, Subscription] = {}
        self._pending_callbacks: list[CommitCallback] = []
        self._inflight_callbacks: list[CommitCallback] = []
        self._writing: asyncio.Future[None] | None = None
        self._scheduled = False
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="broker-log")
        self._closed = False
        self.bytes_written = 0

    def load(self) -> list[Record]:
        self.directory.mkdir(parents=True, exist_ok=True)
        data = self.path.read_bytes() if self.path.exists() else b""
        records, valid = read_records(data)
        if valid < len(data):
            log.warning("%s: cutting off %d bytes of torn or corrupt tail at offset %d",
                        self.path, len(data) - valid, valid)
            with open(self.path, "r+b") as f:
                f.truncate(valid)
                os.fsync(f.fileno())
        self._open()
        return records

    def _open(self) -> None:
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def rewrite(self, bodies: Iterable[bytes]) -> None:
        tmp = self.path.with_name(LOG_NAME + ".compact")
        with open(tmp, "wb") as f:
            for body in bodies:
                f.write(frame_record(body))
            f.flush()
            os.fsync(f.fileno())
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        os.replace(tmp, self.path)
        self._sync_directory()
        self._open()

    def _sync_directory(self) -> None:
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def topic_created(self, topic: Topic) -> None:
        self._add(frame_record(encode_topic(topic)))

    def entry_added(self, topic: Topic, entry: Entry, producer_name: str, first: int,
                    highest: int) -> None:
        head = entry_head(topic, entry, producer_name, first, highest)
        payload = entry.payload
        checksum = int(_crc32c.crc32c(payload, _crc32c.crc32c(head)))  # of head + payload
        self._chunks.append(_HDR.pack(len(head) + len(payload), checksum) + head)
        self._add(payload)

    def cursor_changed(self, sub: Subscription) -> None:
        if sub.durable:
            self._dirty[id(sub)] = sub
            self._schedule()

    def subscription_deleted(self, topic: Topic, name: str) -> None:
        for key, sub in list(self._dirty.items()):
            if sub.topic is topic and sub.name == name:
                del self._dirty[key]
        self._add(frame_record(encode_subscription_deleted(topic, name)))

    def partitioned_topic_created(self, name: str, partitions: int) -> None:
        self._add(frame_record(encode_partitioned(name, partitions)))

    def _add(self, chunk: bytes) -> None:
        self._chunks.append(chunk)
        self._schedule()

    def _schedule(self) -> None:
        if not self._scheduled and self._writing is None and not self._closed:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._start_write)

    def commit(self, callback: CommitCallback) -> None:
        if self._chunks or self._dirty:
            self._pending_callbacks.append(callback)
            self._schedule()
        elif self._writing is not None:
            self._inflight_callbacks.append(callback)
        else:
            callback(None)

    def _start_write(self) -> None:
        self._scheduled = False
        if self._writing is not None or self._closed:
            return
        for sub in self._dirty.values():
            self._chunks.append(frame_record(encode_cursor(sub)))
        self._dirty.clear()
        chunks, self._chunks = self._chunks, []
        self._inflight_callbacks, self._pending_callbacks = self._pending_callbacks, []
        if not chunks:
            self._finish(None)
            return
        loop = asyncio.get_running_loop()
        self._writing = loop.run_in_executor(self._executor, self._write, chunks)
        self._writing.add_done_callback(self._written)

    def _write(self, chunks: list[bytes]) -> None:
        """On the worker thread: append and make durable."""
        assert self._fd is not None
        data = b"".join(chunks)
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        if self.fsync:
            os.fsync(self._fd)
        self.bytes_written += len(data)

    def _written(self, future: asyncio.Future[None]) -> None:
        self._writing = None
        error: Exception | None = None
        exc = future.exception()
        if exc is not None:
            log.error("writing the log %s failed: %s", self.path, exc)
            error = StorageError(f"cannot write {self.path}: {exc}")
        self._finish(error)
        if (self._chunks or self._dirty) and not self._closed:
            self._start_write()

    def _finish(self, error: Exception | None) -> None:
        callbacks, self._inflight_callbacks = self._inflight_callbacks, []
        for callback in callbacks:
            try:
                callback(error)
            except Exception:
                log.exception("commit callback failed")

    async def close(self) -> None:
        self._closed = True
        if self._writing is not None:
            try:
                await self._writing
            except Exception:
                pass
        if self._chunks or self._dirty:
            for sub in self._dirty.values():
                self._chunks.append(frame_record(encode_cursor(sub)))
            self._dirty.clear()
            chunks, self._chunks = self._chunks, []
            if self._fd is not None:
                self._write(chunks)
        self._inflight_callbacks += self._pending_callbacks
        self._pending_callbacks = []
        self._finish(None)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._executor.shutdown(wait=True)


def snapshot_bodies(topics: Iterable[Topic], partitioned: dict[str, int]) -> Iterator[bytes]:
    """The records that rebuild the live state (used to compact the log)."""
    for name, partitions in partitioned.items():
        yield encode_partitioned(name, partitions)
    for topic in topics:
        # The topic record's entry id is where numbering resumes when no entry follows.
        yield _TOPIC_HEAD.pack(_TOPIC, topic.ledger_id, topic.first_available_id) + _str(topic.name)
        yield from encode_dedup(topic)
        for entry in topic.entries:
            yield entry_head(topic, entry, "", 0, 0) + entry.payload
        for sub in topic.subscriptions.values():
            if sub.durable:
                yield encode_cursor(sub)
