"""Persistence: an append-only log of entries and cursors, with group commit.

Without a data directory everything lives in memory (``MemoryStorage``) and a commit completes
at once. With one, ``FileStorage`` appends records to ``<data-dir>/broker.log``; records
appended during one event-loop tick are written and fsynced together on a worker thread, and a
commit's callback runs only after the data appended before it is on disk. The broker sends
SEND_RECEIPT from that callback, so an acknowledged message survives a crash.

Records are framed as ``logframes`` describes and each body starts with a type byte. On start
the log is streamed and replayed: a torn tail (a crash during a write) is cut off (a copy of the
cut bytes is kept in ``quarantine/``); damage with valid records after it refuses the start
with a report (``CorruptLogError``) unless the storage was opened with ``repair``, which moves
the damaged bytes to ``quarantine/`` and goes on with the rest. Entries whose message fails
Pulsar's CRC32C count as damage. The live state is then written to a fresh log that replaces
the old one (compaction).

Persisted entries keep only their place in the log; their payloads are read back on demand
through a cache of ``cache_bytes``, so a backlog costs disk, not memory.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import struct
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import crc32c as _crc32c

from . import logframes as lf
from .entries import Entry
from .subscriptions import Subscription, mask_to_words, words_to_mask
from .topics import Topic

log = logging.getLogger(__name__)

LOG_NAME = "broker.log"
QUARANTINE = "quarantine"
DAMAGE_REPORT = "broker.log.damage.json"
DEFAULT_CACHE_BYTES = 32 * 1024 * 1024

CommitCallback = Callable[[Exception | None], None]

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


class CorruptLogError(Exception):
    """The log is damaged where valid records follow; ``report`` says what the damage covers."""

    def __init__(self, message: str, report: dict[str, object]) -> None:
        super().__init__(message)
        self.report = report


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
    raise ValueError(f"unknown record type {kind}")


frame_record = lf.frame_record


class _RecordCheck(lf.EntryCheck):
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


class Storage:
    """In-memory storage: nothing is written and every commit completes at once."""

    persistent = False

    def load(self) -> Iterator[Record]:
        """The records of the log, streamed; ``finish_recovery`` once they are applied."""
        return iter(())

    def finish_recovery(self, names: dict[int, str], missing: dict[str, list[int]]) -> None:
        """Decide about damage found while loading (raise ``CorruptLogError`` to refuse)."""

    @property
    def had_data(self) -> bool:
        return False

    def rewrite(self, bodies: Iterable[SnapshotItem]) -> None:
        """Replace the log with these records (compaction)."""

    def read_payload(self, offset: int, size: int) -> bytes:
        """A persisted entry's payload (entries in memory storage keep theirs)."""
        raise StorageError("memory storage holds no log to read from")

    def topic_created(self, topic: Topic) -> None:
        """A new topic, with its ledger id; raises before anything is queued if it cannot be
        encoded."""

    def entry_added(self, topic: Topic, entry: Entry, producer_name: str, first: int,
                    highest: int) -> None:
        """A new entry; durable once a later commit completes. Raises (with nothing queued)
        if the entry cannot be encoded."""

    def check_cursor(self, sub: Subscription) -> None:
        """Raise if the subscription's cursor cannot be written."""

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

# A compaction record: a whole body, or an entry's head with the entry whose payload follows.
SnapshotItem = bytes | tuple[bytes, Entry]

ENCODING_ERRORS = (struct.error, ValueError, OverflowError, UnicodeEncodeError)


class PayloadCache:
    """The most recently used payloads, up to ``capacity`` bytes."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.size = 0
        self._items: OrderedDict[int, bytes] = OrderedDict()

    def get(self, offset: int) -> bytes | None:
        data = self._items.get(offset)
        if data is not None:
            self._items.move_to_end(offset)
        return data

    def put(self, offset: int, data: bytes) -> None:
        if len(data) > self.capacity or offset in self._items:
            return
        self._items[offset] = data
        self.size += len(data)
        while self.size > self.capacity:
            _, old = self._items.popitem(last=False)
            self.size -= len(old)

    def clear(self) -> None:
        self._items.clear()
        self.size = 0


@dataclass(slots=True)
class _Batch:
    """What one group commit writes, and what to do when it is on disk (or fails)."""

    chunks: list[bytes]
    entries: list[tuple[Topic, Entry, int]]  # with the payload's offset in ``chunks``
    cursors: list[Subscription]


class FileStorage(Storage):
    """The append-only log in a data directory."""

    persistent = True

    def __init__(self, directory: str | os.PathLike[str], *, fsync: bool = True,
                 repair: bool = False, cache_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.directory = Path(directory)
        self.path = self.directory / LOG_NAME
        self.fsync = fsync
        self.repair = repair
        self.cache = PayloadCache(cache_bytes)
        self._fd: int | None = None
        self._read_fd: int | None = None
        self._end = 0  # size of the log once every queued write is done
        self._write_base = 0  # where the batch being written starts
        self._chunks: list[bytes] = []
        self._queued = 0  # bytes in _chunks
        self._entries: list[tuple[Topic, Entry, int]] = []
        self._dirty: dict[int, Subscription] = {}
        self._pending_callbacks: list[CommitCallback] = []
        self._inflight_callbacks: list[CommitCallback] = []
        self._writing: asyncio.Future[None] | None = None
        self._scheduled = False
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="broker-log")
        self._closed = False
        self._loaded_size = 0
        self.damage: list[lf.Damage] = []
        self.bytes_written = 0

    # --- recovery --------------------------------------------------------------------------

    def load(self) -> Iterator[Record]:
        self.directory.mkdir(parents=True, exist_ok=True)
        if not self.path.exists():
            self._open()
            return
        self._read_fd = os.open(self.path, os.O_RDONLY)
        size = self._loaded_size = os.fstat(self._read_fd).st_size
        check = _RecordCheck()
        for item in lf.scan(self._read_fd, size, check):
            if isinstance(item, lf.Damage):
                self.damage.append(item)
            elif check.decoded is not None and check.decoded[0] == item.body_offset:
                yield check.decoded[1]
            else:
                yield decode_record(item.body, item.body_offset)

    @property
    def had_data(self) -> bool:
        return self._loaded_size > 0

    def finish_recovery(self, names: dict[int, str], missing: dict[str, list[int]]) -> None:
        if not self.damage:
            if self._fd is None:
                self._open()
            return
        report = self._report(names, missing)
        middle = [d for d in self.damage if not d.tail]
        if middle and not self.repair:
            self._write_report(report)
            raise CorruptLogError(
                f"{self.path} is damaged where valid records follow, so acknowledged data "
                f"may be in it; the broker does not start on it.\n{_describe(report)}\n"
                f"Report: {self.directory / DAMAGE_REPORT}. Start with --repair to move the "
                f"damaged bytes to {self.directory / QUARANTINE}/ and go on with the rest.",
                report)
        where = self._quarantine(report)
        for damage in self.damage:
            what = "torn or corrupt tail" if damage.tail else "damaged range (--repair)"
            log.warning("%s: cutting off %d bytes of %s at offset %d (%s); copy in %s",
                        self.path, damage.size, what, damage.start, damage.reason, where)
        if report["missing"]:
            log.warning("%s: entries lost with the removed bytes: %s", self.path,
                        report["missing"])
        if self._fd is None:
            self._open()

    def _report(self, names: dict[int, str], missing: dict[str, list[int]]) -> dict[str, object]:
        regions = []
        for damage in self.damage:
            regions.append({
                "start": damage.start, "end": damage.end, "bytes": damage.size,
                "tail": damage.tail, "reason": damage.reason,
                "entries": [{"topic": names.get(ledger, f"ledger {ledger}"), "ledger": ledger,
                             "entry_id": entry_id} for ledger, entry_id in damage.entries]})
        return {"log": str(self.path), "size": self._loaded_size, "regions": regions,
                "missing": {topic: _ranges(ids) for topic, ids in missing.items() if ids}}

    def _write_report(self, report: dict[str, object]) -> None:
        (self.directory / DAMAGE_REPORT).write_text(json.dumps(report, indent=2) + "\n")

    def _quarantine(self, report: dict[str, object]) -> Path:
        """Copy every removed range next to the log, with the report; return the folder."""
        assert self._read_fd is not None
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        where = self.directory / QUARANTINE / stamp
        suffix = 1
        while where.exists():
            suffix += 1
            where = self.directory / QUARANTINE / f"{stamp}-{suffix}"
        where.mkdir(parents=True)
        for damage in self.damage:
            with open(where / f"bytes-{damage.start}-{damage.end}.bin", "wb") as out:
                pos = damage.start
                while pos < damage.end:
                    chunk = os.pread(self._read_fd, min(1 << 20, damage.end - pos), pos)
                    if not chunk:
                        break
                    out.write(chunk)
                    pos += len(chunk)
        (where / "report.json").write_text(json.dumps(report, indent=2) + "\n")
        return where

    def _open(self) -> None:
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._end = os.fstat(self._fd).st_size
        if self._end == 0:
            os.write(self._fd, lf.FILE_MAGIC)
            self._end = len(lf.FILE_MAGIC)
        if self._read_fd is None:
            self._read_fd = os.open(self.path, os.O_RDONLY)

    def rewrite(self, bodies: Iterable[SnapshotItem]) -> None:
        tmp = self.path.with_name(LOG_NAME + ".compact")
        moved: list[tuple[Entry, int]] = []
        with open(tmp, "wb") as f:
            f.write(lf.FILE_MAGIC)
            pos = len(lf.FILE_MAGIC)
            for item in bodies:
                if isinstance(item, bytes):
                    data = frame_record(item)
                    f.write(data)
                    pos += len(data)
                    continue
                head, entry = item
                # Straight from the old log: a compaction must not churn the cache.
                payload = (os.pread(self._read_fd, entry.size, entry.offset)
                           if entry.source is self and self._read_fd is not None
                           else entry.payload)
                checksum = int(_crc32c.crc32c(payload, _crc32c.crc32c(head)))
                header = lf.record_header(len(head) + len(payload), checksum)
                f.write(header)
                f.write(head)
                f.write(payload)
                moved.append((entry, pos + len(header) + len(head)))
                pos += len(header) + len(head) + len(payload)
            f.flush()
            os.fsync(f.fileno())
        for fd in (self._fd, self._read_fd):
            if fd is not None:
                os.close(fd)
        self._fd = self._read_fd = None
        os.replace(tmp, self.path)
        self._sync_directory()
        self._open()
        self.cache.clear()
        for entry, offset in moved:
            entry.stored(self, offset)

    def _sync_directory(self) -> None:
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    # --- reading ---------------------------------------------------------------------------

    def read_payload(self, offset: int, size: int) -> bytes:
        data = self.cache.get(offset)
        if data is None:
            assert self._read_fd is not None, "the log is closed"
            data = os.pread(self._read_fd, size, offset)
            if len(data) != size:
                raise StorageError(f"{self.path}: short read at {offset}")
            self.cache.put(offset, data)
        return data

    # --- writing ---------------------------------------------------------------------------

    def topic_created(self, topic: Topic) -> None:
        self._add(frame_record(encode_topic(topic)))

    def entry_added(self, topic: Topic, entry: Entry, producer_name: str, first: int,
                    highest: int) -> None:
        head = entry_head(topic, entry, producer_name, first, highest)
        payload = entry.payload
        checksum = int(_crc32c.crc32c(payload, _crc32c.crc32c(head)))  # of head + payload
        header = lf.record_header(len(head) + len(payload), checksum)
        self._entries.append((topic, entry, self._queued + len(header) + len(head)))
        self._chunks.append(header + head)
        self._queued += len(header) + len(head)
        self._add(payload)

    def check_cursor(self, sub: Subscription) -> None:
        encode_cursor(sub)

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
        self._queued += len(chunk)
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

    def _take_batch(self) -> _Batch:
        """Everything queued, with the dirty cursors encoded; a cursor that cannot be encoded
        is left out (and logged) rather than stopping every other write."""
        cursors = []
        for sub in self._dirty.values():
            try:
                self._chunks.append(frame_record(encode_cursor(sub)))
            except ENCODING_ERRORS as exc:
                log.error("%s: cursor of subscription %.100r cannot be written: %s",
                          sub.topic.name, sub.name, exc)
                continue
            cursors.append(sub)
        self._dirty.clear()
        batch = _Batch(self._chunks, self._entries, cursors)
        self._chunks, self._entries, self._queued = [], [], 0
        return batch

    def _start_write(self) -> None:
        self._scheduled = False
        if self._writing is not None or self._closed:
            return
        try:
            batch = self._take_batch()
        finally:
            self._inflight_callbacks, self._pending_callbacks = self._pending_callbacks, []
        if not batch.chunks:
            self._finish(None)
            return
        loop = asyncio.get_running_loop()
        base = self._end
        self._end += sum(len(c) for c in batch.chunks)
        self._write_base = base
        self._writing = loop.run_in_executor(self._executor, self._write, batch.chunks)
        self._writing.add_done_callback(lambda future: self._written(future, batch, base))

    def _write(self, chunks: list[bytes]) -> None:
        """On the worker thread: append and make durable; on failure, cut back to where the
        batch started, so that no partial batch stays in front of later ones."""
        assert self._fd is not None
        base = self._write_base
        data = b"".join(chunks)
        view = memoryview(data)
        try:
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
            if self.fsync:
                os.fsync(self._fd)
        except BaseException:
            try:
                os.ftruncate(self._fd, base)
            except OSError as exc:
                log.error("cannot cut %s back to %d after a failed write: %s", self.path, base,
                          exc)
            raise
        self.bytes_written += len(data)

    def _written(self, future: asyncio.Future[None], batch: _Batch, base: int) -> None:
        self._writing = None
        error: Exception | None = None
        exc = future.exception()
        if exc is None:
            for _topic, entry, at in batch.entries:
                self.cache.put(base + at, entry.payload)
                entry.stored(self, base + at)
        else:
            log.error("writing the log %s failed: %s", self.path, exc)
            error = StorageError(f"cannot write {self.path}: {exc}")
            self._end = base
            # Nothing of the batch is on disk: its entries are never served (their ids stay
            # unused) and its cursors are written again with the next batch.
            for topic, entry, _at in batch.entries:
                topic.forget(entry.entry_id)
            for sub in batch.cursors:
                self._dirty.setdefault(id(sub), sub)
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
        if (self._chunks or self._dirty) and self._fd is not None:
            batch = self._take_batch()
            self._write_base = self._end
            self._end += sum(len(c) for c in batch.chunks)
            self._write(batch.chunks)
        self._inflight_callbacks += self._pending_callbacks
        self._pending_callbacks = []
        self._finish(None)
        for fd in (self._fd, self._read_fd):
            if fd is not None:
                os.close(fd)
        self._fd = self._read_fd = None
        self._executor.shutdown(wait=True)


def _ranges(ids: list[int]) -> list[list[int]]:
    """[[first, last], ...] of sorted ids."""
    out: list[list[int]] = []
    for i in sorted(ids):
        if out and i == out[-1][1] + 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return out


def _describe(report: dict[str, object]) -> str:
    lines = []
    regions = report["regions"]
    assert isinstance(regions, list)
    for region in regions:
        entries = ", ".join(f"{e['topic']} entry {e['entry_id']}" for e in region["entries"])
        lines.append(f"  bytes {region['start']}-{region['end']} ({region['bytes']} bytes, "
                     f"{'tail' if region['tail'] else 'middle'}): {region['reason']}"
                     + (f"; held {entries}" if entries else ""))
    missing = report["missing"]
    assert isinstance(missing, dict)
    for topic, ranges in missing.items():
        lines.append(f"  {topic}: entries "
                     + ", ".join(f"{a}-{b}" if a != b else f"{a}" for a, b in ranges)
                     + " missing")
    return "\n".join(lines)


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
                yield entry_head(topic, entry, "", 0, 0), entry
        for sub in topic.subscriptions.values():
            if sub.durable:
                yield encode_cursor(sub)
