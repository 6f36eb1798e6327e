"""Frame captures: a file format for frames as they cross connections, a writer and a reader.

Any connection of any protocol can record what it sends and receives through a
``CaptureWriter``; ``pipeline/capture_decode.py`` decodes the files in Spark with the
protocol's generated code. The format is deliberately minimal:

    file    = magic record*
    magic   = b"PFCAP\\x01\\r\\n"      8 bytes: "PFCAP", format version 1, CR LF
    record  = timestamp_ns  u64       nanoseconds since the Unix epoch, below 2**63
              direction     u8        0 = in (received by the recording side), 1 = out (sent)
              connection_id u32       the recorder's number for the connection
              length        u32       size of the frame in bytes
              frame         length bytes: exactly one whole frame as on the wire

All integers are big-endian; a record header is 17 bytes. The CR LF in the magic catches a
file mangled by newline translation. There is no index and no padding: a reader finds record
boundaries by walking the headers from the start (``split_offsets`` does it once, so Spark
can read one file in several parts). A file cut short by a crash ends in a partial record;
``read_records(..., strict=False)`` stops before it instead of raising.

Timestamps stay below 2**63 (year 2262) so they fit a signed 64-bit column (Spark's
LongType) unchanged.
"""

from __future__ import annotations

import enum
import io
import itertools
import os
import threading
import time
from collections.abc import Callable, Iterator
from struct import Struct
from types import TracebackType
from typing import BinaryIO, NamedTuple

from protoframe.runtime.errors import DecodeError, FrameTooLargeError, TruncatedError

MAGIC = b"PFCAP\x01\r\n"
HEADER = Struct(">QBII")  # timestamp_ns, direction, connection_id, length
HEADER_SIZE = HEADER.size  # 17
MAX_TIMESTAMP = 2**63 - 1
MAX_U32 = 2**32 - 1
READ_CHUNK = 1 << 22  # bytes read at a time when walking a file

BytesLike = bytes | bytearray | memoryview
FrameLength = Callable[[bytes, int, int, int], "int | None"]  # generated frame_length


class Direction(enum.IntEnum):
    """Which way a frame went, seen from the side that records it."""

    IN = 0  # received
    OUT = 1  # sent


class CaptureFormatError(DecodeError):
    """A file is not a capture, or holds a record that breaks the format."""


class CaptureRecord(NamedTuple):
    """One recorded frame."""

    timestamp_ns: int
    direction: Direction
    connection_id: int
    frame: bytes


class CaptureWriter:
    """Appends records to a capture file; safe to share between threads and connections.

    ``write`` records one whole frame. ``connection()`` hands out a ``ConnectionTap`` with its
    own connection id, for code that would rather not pass the id around, and which can also
    split a raw byte stream into frames with the protocol's generated ``frame_length``.
    Writes are buffered; ``flush`` or ``close`` (or leaving a ``with`` block) pushes them out.
    """

    def __init__(self, target: str | os.PathLike[str] | BinaryIO, *,
                 clock: Callable[[], int] = time.time_ns, buffer_size: int = 1 << 16) -> None:
        if isinstance(target, (str, os.PathLike)):
            self._file: BinaryIO = open(target, "wb", buffering=buffer_size)
            self._owns = True
        else:
            self._file = target
            self._owns = False
        self._clock = clock
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._closed = False
        self.records = 0
        self._file.write(MAGIC)

    def write(self, direction: Direction | int, connection_id: int, frame: BytesLike,
              timestamp_ns: int | None = None) -> None:
        """Record one whole frame; the timestamp defaults to the writer's clock, now."""
        ts = self._clock() if timestamp_ns is None else timestamp_ns
        if not 0 <= ts <= MAX_TIMESTAMP:
            raise ValueError(f"timestamp {ts} is outside 0..2**63-1")
        if direction not in (0, 1):
            raise ValueError(f"direction must be 0 (in) or 1 (out), not {direction!r}")
        if not 0 <= connection_id <= MAX_U32:
            raise ValueError(f"connection id {connection_id} does not fit in 32 bits")
        if len(frame) > MAX_U32:
            raise ValueError(f"a frame of {len(frame)} bytes does not fit the format")
        header = HEADER.pack(ts, int(direction), connection_id, len(frame))
        with self._lock:
            if self._closed:
                raise ValueError("write to a closed CaptureWriter")
            self._file.write(header)
            self._file.write(frame)
            self.records += 1

    def new_connection_id(self) -> int:
        """A connection id not handed out before by this writer (1, 2, 3, ...)."""
        with self._lock:
            return next(self._ids)

    def connection(self, frame_length: FrameLength | None = None,
                   max_frame_size: int = 16 << 20) -> ConnectionTap:
        """A tap for one connection, with a new connection id."""
        return ConnectionTap(self, self.new_connection_id(), frame_length, max_frame_size)

    def flush(self) -> None:
        with self._lock:
            self._file.flush()

    def close(self) -> None:
        """Flush, and close the file if the writer opened it."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._file.flush()
            if self._owns:
                self._file.close()

    def __enter__(self) -> CaptureWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class ConnectionTap:
    """One connection's handle on a ``CaptureWriter``.

    ``sent(frame)`` and ``received(frame)`` record whole frames. For code that only sees the
    byte stream, ``sent_bytes(data)`` and ``received_bytes(data)`` buffer each direction and
    record every frame the bytes complete, cut where the protocol's ``frame_length`` says
    (pass the generated ``frames.frame_length``). A frame announcing more than
    ``max_frame_size`` bytes raises ``FrameTooLargeError`` and drops that direction's buffer.
    """

    def __init__(self, writer: CaptureWriter, connection_id: int,
                 frame_length: FrameLength | None, max_frame_size: int) -> None:
        self.writer = writer
        self.connection_id = connection_id
        self._frame_length = frame_length
        self._max = max_frame_size
        self._pending = {Direction.IN: b"", Direction.OUT: b""}

    def sent(self, frame: BytesLike) -> None:
        self.writer.write(Direction.OUT, self.connection_id, frame)

    def received(self, frame: BytesLike) -> None:
        self.writer.write(Direction.IN, self.connection_id, frame)

    def sent_bytes(self, data: BytesLike) -> int:
        """Record the frames ``data`` completes on the way out; return how many."""
        return self._stream(Direction.OUT, data)

    def received_bytes(self, data: BytesLike) -> int:
        """Record the frames ``data`` completes on the way in; return how many."""
        return self._stream(Direction.IN, data)

    def _stream(self, direction: Direction, data: BytesLike) -> int:
        if self._frame_length is None:
            raise ValueError("this tap has no frame_length to split a byte stream with")
        buf = self._pending[direction] + bytes(data)
        pos, end, count = 0, len(buf), 0
        while pos < end:
            try:
                size = self._frame_length(buf, pos, end, self._max)
            except FrameTooLargeError:
                self._pending[direction] = b""
                raise
            if size is None or end - pos < size:
                break
            self.writer.write(direction, self.connection_id, buf[pos : pos + size])
            pos += size
            count += 1
        self._pending[direction] = buf[pos:]
        return count


# --- reading ------------------------------------------------------------------------------------


def _check_magic(head: bytes, name: str) -> None:
    if head != MAGIC:
        raise CaptureFormatError(f"{name}: not a capture file (magic {head[:8]!r})")


def _open(source: str | os.PathLike[str] | BinaryIO) -> tuple[BinaryIO, bool, str]:
    if isinstance(source, (str, os.PathLike)):
        return open(source, "rb"), True, os.fspath(source)
    return source, False, getattr(source, "name", "<stream>")


def read_records(source: str | os.PathLike[str] | BinaryIO, start: int = 0,
                 end: int | None = None, *, strict: bool = True) -> Iterator[CaptureRecord]:
    """The records of a capture file, in order.

    ``start``/``end`` select the records whose headers begin in that byte range, with
    ``start`` on a record boundary (0 or a value from ``split_offsets``); 0 means just after
    the magic, which is checked. With ``strict=False`` a partial last record (a file cut
    short) ends the iteration instead of raising ``TruncatedError``.
    """
    for batch in read_columns(source, start, end, strict=strict):
        yield from (CaptureRecord(t, Direction(d), c, f) for t, d, c, f in zip(*batch,
                                                                             strict=True))


Columns = tuple[list[int], list[int], list[int], list[bytes]]


def read_columns(source: str | os.PathLike[str] | BinaryIO, start: int = 0,
                 end: int | None = None, *, batch_rows: int = 10_000,
                 strict: bool = True) -> Iterator[Columns]:
    """The records of ``read_records`` column by column, up to ``batch_rows`` at a time.

    Each batch is (timestamps, directions, connection ids, frames); building columns
    directly saves a tuple per record, which is what the Spark reader wants.
    """
    fh, owned, name = _open(source)
    try:
        if start == 0:
            _check_magic(fh.read(len(MAGIC)), name)
            start = len(MAGIC)
        else:
            fh.seek(start)
        limit = end
        pos = start  # file offset of buf[0]
        buf = b""
        unpack = HEADER.unpack_from
        ts: list[int] = []
        dirs: list[int] = []
        conns: list[int] = []
        frames: list[bytes] = []
        eof = False
        while True:
            i = 0
            n = len(buf)
            while n - i >= HEADER_SIZE and (limit is None or pos + i < limit):
                t, d, c, length = unpack(buf, i)
                if d > 1 or t > MAX_TIMESTAMP:
                    raise CaptureFormatError(f"{name}: bad record header at offset {pos + i}")
                stop = i + HEADER_SIZE + length
                if stop > n:
                    break
                ts.append(t)
                dirs.append(d)
                conns.append(c)
                frames.append(buf[i + HEADER_SIZE : stop])
                i = stop
                if len(ts) >= batch_rows:
                    yield ts, dirs, conns, frames
                    ts, dirs, conns, frames = [], [], [], []
            buf = buf[i:]
            pos += i
            if (limit is not None and pos >= limit) or eof:
                break
            more = fh.read(max(READ_CHUNK, HEADER_SIZE + _pending_length(buf)))
            if not more:
                eof = True
            buf += more
        if buf and (limit is None or pos < limit):
            if strict:
                raise TruncatedError(f"{name}: partial record of {len(buf)} bytes at offset "
                                     f"{pos} (the file was cut short)")
        if ts:
            yield ts, dirs, conns, frames
    finally:
        if owned:
            fh.close()


def _pending_length(buf: bytes) -> int:
    """Bytes the record starting ``buf`` still needs to be whole (0 if its header is short)."""
    if len(buf) < HEADER_SIZE:
        return 0
    length: int = HEADER.unpack_from(buf, 0)[3]
    return length


def split_offsets(path: str | os.PathLike[str], parts: int) -> list[tuple[int, int]]:
    """Record-aligned byte ranges dividing a capture file into about ``parts`` equal parts.

    Walks the record headers once, reading large chunks and skipping frame bytes; each range
    holds whole records, and together they cover the file. Pass them to
    ``read_columns``/``read_records`` as ``start``/``end``.
    """
    size = os.path.getsize(path)
    target = max(1, (size - len(MAGIC)) // max(1, parts))
    cuts = [0]
    unpack = HEADER.unpack_from
    with open(path, "rb") as fh:
        _check_magic(fh.read(len(MAGIC)), os.fspath(path))
        pos = len(MAGIC)  # file offset of the next record header
        next_cut = pos + target
        base, buf = pos, fh.read(READ_CHUNK)  # buf holds the file from offset base
        while pos + HEADER_SIZE <= size:
            i = pos - base
            if i + HEADER_SIZE > len(buf):
                fh.seek(pos)
                base, buf = pos, fh.read(READ_CHUNK)
                i = 0
                if len(buf) < HEADER_SIZE:
                    break
            if pos >= next_cut:
                cuts.append(pos)
                next_cut = pos + target
            pos += HEADER_SIZE + unpack(buf, i)[3]
    ends = [*cuts[1:], size]
    return list(zip(cuts, ends, strict=True))


def write_records(target: str | os.PathLike[str] | BinaryIO,
                  records: list[CaptureRecord] | Iterator[CaptureRecord]) -> int:
    """Write ``records`` as a new capture file; return how many (for tests and tools)."""
    with CaptureWriter(target) as writer:
        for r in records:
            writer.write(r.direction, r.connection_id, r.frame, r.timestamp_ns)
        return writer.records


def capture_bytes(records: list[CaptureRecord]) -> bytes:
    """A whole capture file, in memory."""
    out = io.BytesIO()
    writer = CaptureWriter(out)
    for r in records:
        writer.write(r.direction, r.connection_id, r.frame, r.timestamp_ns)
    writer.flush()
    return out.getvalue()
