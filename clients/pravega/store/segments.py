"""The segment store's data: named segments of bytes, in memory and optionally in a directory.

Each segment is its bytes plus a little metadata (sealed or not, its start offset, the last
event number of each writer). Truncation moves the start offset forward and drops the bytes
before it from memory; offsets stay those of the whole segment. With a directory, a
segment's bytes go to ``<name>.data`` (appended and flushed before an append is acknowledged)
and its metadata to ``<name>.meta.json`` (rewritten on change); ``SegmentTable`` reloads both
when it is created again on the same directory.

Writers' last event numbers are what make appends idempotent (a writer that reconnects sends
again every event above the number the store reports), so they must never disagree with the
bytes. The metadata also records the segment's length. Each append writes the data file first
and then replaces the metadata, and it is acknowledged only after both. A crash between the
two leaves the data file longer than the metadata says, and loading cuts it back: nobody was
told those bytes were stored, and their writer sends them again. The data file keeps the
truncated bytes (it is only ever appended to); loading skips them.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, unquote
from uuid import UUID

__all__ = ["Segment", "SegmentTable"]

log = logging.getLogger(__name__)


@dataclass
class Segment:
    """One segment: its bytes from ``start_offset`` on, whether it is sealed, and each
    writer's last event number."""

    name: str
    data: bytearray = field(default_factory=bytearray)
    sealed: bool = False
    writers: dict[UUID, int] = field(default_factory=dict)
    last_modified_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    start_offset: int = 0

    @property
    def length(self) -> int:
        """Bytes ever appended to the segment: the offset the next append lands at."""
        return self.start_offset + len(self.data)

    def read(self, offset: int, end: int) -> bytes:
        """The bytes at segment offsets ``offset`` (not below ``start_offset``) to ``end``."""
        return bytes(self.data[offset - self.start_offset:end - self.start_offset])


class SegmentTable:
    """Every segment of one store, by name; ``directory=None`` keeps them in memory only."""

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self.directory = Path(directory) if directory is not None else None
        self.segments: dict[str, Segment] = {}
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._load()

    def get(self, name: str) -> Segment | None:
        """The segment called ``name``, if it exists."""
        return self.segments.get(name)

    def create(self, name: str) -> Segment | None:
        """Create an empty segment; None if one of that name exists."""
        if name in self.segments:
            return None
        segment = Segment(name)
        self.segments[name] = segment
        self._write_meta(segment)
        if self.directory is not None:
            self._data_path(name).write_bytes(b"")
        return segment

    def append(self, segment: Segment, data: bytes, writer_id: UUID | None = None,
               last_event_number: int | None = None) -> None:
        """Add ``data`` at the end of ``segment`` (durably, with a directory), recording
        ``last_event_number`` as ``writer_id``'s last event with it."""
        segment.data += data
        segment.last_modified_ms = int(time.time() * 1000)
        if self.directory is not None:
            with self._data_path(segment.name).open("ab") as out:
                out.write(data)
                out.flush()
        if writer_id is not None and last_event_number is not None:
            segment.writers[writer_id] = last_event_number
        self._write_meta(segment)  # the new length, even without a writer (see the docstring)

    def seal(self, segment: Segment) -> None:
        """Refuse further appends to ``segment``."""
        segment.sealed = True
        self._write_meta(segment)

    def truncate(self, segment: Segment, offset: int) -> None:
        """Drop ``segment``'s bytes before ``offset``, which must lie between its start offset
        and its length."""
        if not segment.start_offset <= offset <= segment.length:
            raise ValueError(f"truncation offset {offset} outside "
                             f"[{segment.start_offset}, {segment.length}]")
        del segment.data[:offset - segment.start_offset]
        segment.start_offset = offset
        segment.last_modified_ms = int(time.time() * 1000)
        self._write_meta(segment)

    def truncation_limit(self, segment: Segment) -> int | None:
        """The highest offset ``segment`` can be truncated at (None: not known here)."""
        return segment.length

    def delete(self, name: str) -> bool:
        """Forget a segment; False if there was none."""
        if self.segments.pop(name, None) is None:
            return False
        if self.directory is not None:
            self._data_path(name).unlink(missing_ok=True)
            self._meta_path(name).unlink(missing_ok=True)
        return True

    # ---- the directory -------------------------------------------------------------------

    def _data_path(self, name: str) -> Path:
        assert self.directory is not None
        return self.directory / f"{quote(name, safe='')}.data"

    def _meta_path(self, name: str) -> Path:
        assert self.directory is not None
        return self.directory / f"{quote(name, safe='')}.meta.json"

    def _write_meta(self, segment: Segment) -> None:
        if self.directory is None:
            return
        meta = {
            "sealed": segment.sealed,
            "writers": {str(k): v for k, v in segment.writers.items()},
            "length": segment.length,
            "start_offset": segment.start_offset,
        }
        path = self._meta_path(segment.name)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(meta))
        temporary.replace(path)  # a crash leaves the old metadata or the new, never half

    def _load(self) -> None:
        assert self.directory is not None
        for meta_path in sorted(self.directory.glob("*.meta.json")):
            name = unquote(meta_path.name.removesuffix(".meta.json"))
            meta = json.loads(meta_path.read_text())
            data_path = self._data_path(name)
            data = bytearray(data_path.read_bytes()) if data_path.exists() else bytearray()
            length = int(meta.get("length", len(data)))  # older files: trust the data
            if len(data) > length:
                # An append whose metadata was never written (a crash between the two); it
                # was never acknowledged, so its writer sends it again. Keeping it would
                # store it twice.
                log.warning("segment %s: dropping %d unacknowledged bytes past offset %d",
                            name, len(data) - length, length)
                del data[length:]
                with data_path.open("r+b") as out:
                    out.truncate(length)
            start = int(meta.get("start_offset", 0))  # older files: never truncated
            del data[:start]
            segment = Segment(
                name,
                data,
                bool(meta["sealed"]),
                {UUID(k): int(v) for k, v in meta["writers"].items()},
                start_offset=start,
            )
            self.segments[name] = segment
