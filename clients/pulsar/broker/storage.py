"""Persistence: an append-only log of entries and cursors, with group commit.

Without a data directory everything lives in memory (``MemoryStorage``) and a commit completes
at once. With one, ``FileStorage`` appends records to ``<data-dir>/broker.log``; records
appended during one event-loop tick are written and fsynced together on a worker thread, and a
commit's callback runs only after the data appended before it is on disk. The broker sends
SEND_RECEIPT from that callback, so an acknowledged message survives a crash.

Records are framed as ``logframes`` describes; their bodies are ``records``'. On start
the log is streamed and replayed: a torn tail (a crash during a write) is cut off (a copy of the
cut bytes is kept in ``quarantine/``); damage with valid records after it refuses the start
with a report (``CorruptLogError``) unless the storage was opened with ``repair``, which moves
the damaged bytes to ``quarantine/`` and goes on with the rest. Entries whose message fails
Pulsar's CRC32C count as damage. The live state is then written to a fresh log that replaces
the old one (compaction).

Persisted entries keep only their place in the log; their payloads are read back on demand
through a cache of ``cache_bytes``, so a backlog costs disk, not memory.

Reads stay on the event loop (``os.pread``), by measurement on the 2-core test machine under
load: a 1.1 KB read from the page cache takes 8-14 us and a cold random one 130-670 us, while
handing one read to a worker thread and back (``run_in_executor``) takes 150-860 us, more than
the cold read it would move. Only batching many reads per hand-off (about 3 us a read at 64 a
batch) would pay, at the cost of an asynchronous dispatch path; a backlog is drained in log
order, which the kernel's readahead serves from the page cache.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from array import array
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import crc32c as _crc32c

from . import logframes as lf
from .damage_report import damage_report, describe
from .entries import Entry, EntryTable
from .payload_cache import PayloadCache
from .records import (
    ENCODING_ERRORS,
    Record,
    RecordCheck,
    SnapshotItem,
    decode_record,
    encode_cursor,
    encode_dedup_expired,
    encode_partitioned,
    encode_subscription_deleted,
    encode_topic,
    entry_head,
    frame_record,
)
from .subscriptions import Subscription
from .topics import Topic

log = logging.getLogger(__name__)

LOG_NAME = "broker.log"
QUARANTINE = "quarantine"
DAMAGE_REPORT = "broker.log.damage.json"
DEFAULT_CACHE_BYTES = 32 * 1024 * 1024

CommitCallback = Callable[[Exception | None], None]

class StorageError(Exception):
    """The log could not be written, or read back."""


class DamagedEntryError(StorageError):
    """A persisted payload read back from the log fails its message's CRC32C: the file was
    damaged while the broker ran. It is never served; a restart reports it (recovery checks
    every entry)."""


class CorruptLogError(Exception):
    """The log is damaged where valid records follow; ``report`` says what the damage covers."""

    def __init__(self, message: str, report: dict[str, object]) -> None:
        super().__init__(message)
        self.report = report


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

    def read_key(self, offset: int, size: int) -> bytes:
        """A persisted entry's key (entries in memory storage keep theirs)."""
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

    def dedup_expired(self, topic: Topic, producer_name: str) -> None:
        """A producer name's deduplication state expired; written with the next commit."""

    def commit(self, callback: CommitCallback) -> None:
        """Call ``callback(None)`` once everything added so far is durable (or with the error)."""
        callback(None)

    async def close(self) -> None:
        """Write what is pending and release the file."""


MemoryStorage = Storage



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
        check = RecordCheck()
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
                f"may be in it; the broker does not start on it.\n{describe(report)}\n"
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
        return damage_report(str(self.path), self._loaded_size, self.damage, names, missing)

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
        # New payload offsets, per table in its order: applied once the new log is in place.
        moved: dict[int, tuple[EntryTable, array[int]]] = {}
        with open(tmp, "wb") as f:
            f.write(lf.FILE_MAGIC)
            pos = len(lf.FILE_MAGIC)
            for item in bodies:
                if isinstance(item, bytes):
                    data = frame_record(item)
                    f.write(data)
                    pos += len(data)
                    continue
                head, entry, table = item
                # Straight from the old log: a compaction must not churn the cache.
                payload = (os.pread(self._read_fd, entry.size, entry.offset)
                           if entry.source is self and self._read_fd is not None
                           else entry.payload)
                checksum = int(_crc32c.crc32c(payload, _crc32c.crc32c(head)))
                header = lf.record_header(len(head) + len(payload), checksum)
                f.write(header)
                f.write(head)
                f.write(payload)
                at = pos + len(header) + len(head)
                moved.setdefault(id(table), (table, array("q")))[1].append(at)
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
        for table, offsets in moved.values():
            table.relocate(self, offsets)

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
            if not lf.message_crc_ok(data):
                raise DamagedEntryError(f"{self.path}: the payload at byte {offset} fails its "
                                        "CRC32C")
            self.cache.put(offset, data)
        return data

    def read_key(self, offset: int, size: int) -> bytes:
        assert self._read_fd is not None, "the log is closed"
        data = os.pread(self._read_fd, size, offset)
        if len(data) != size:
            raise StorageError(f"{self.path}: short read at {offset}")
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

    def dedup_expired(self, topic: Topic, producer_name: str) -> None:
        self._add(frame_record(encode_dedup_expired(topic, producer_name)))

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
            for topic, entry, at in batch.entries:
                self.cache.put(base + at, entry.payload)
                topic.stored(entry.entry_id, self, base + at)
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




