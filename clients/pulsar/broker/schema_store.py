"""The schema registry's file in the data directory: ``<data-dir>/schemas.log``.

Records are framed as the broker's log frames them (``logframes``: magic, length, checksums),
each body a JSON object: a version added (``{"id", "version", "type", "data", "properties"}``,
data in base64) or a topic's schemas deleted (``{"id", "deleted": true}``). A registration is
written and fsynced before the producer or consumer is answered; registrations are rare (one
per new schema version), so the write is synchronous rather than group-committed.

On start the file is read as the broker's log is: a torn tail is cut, damage with valid
records after it refuses the start (``storage.CorruptLogError``) unless ``repair``; in both
cases the removed bytes are copied to ``quarantine/``. The live versions are then written to a
fresh file that replaces the old one.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from . import logframes as lf
from .storage import QUARANTINE, CorruptLogError

log = logging.getLogger(__name__)

__all__ = ["SCHEMA_LOG", "SchemaFile", "StoredSchema"]

SCHEMA_LOG = "schemas.log"


@dataclass(frozen=True, slots=True)
class StoredSchema:
    """One version of a topic's schema: its ``Schema.Type`` value, definition and properties."""

    type_: int
    data: bytes
    properties: tuple[tuple[str, str], ...] = ()


def _encode_added(schema_id: str, version: int, schema: StoredSchema) -> bytes:
    return json.dumps({"id": schema_id, "version": version, "type": schema.type_,
                       "data": base64.b64encode(schema.data).decode("ascii"),
                       "properties": [list(p) for p in schema.properties]},
                      ensure_ascii=False).encode("utf-8", "surrogatepass")


def _encode_deleted(schema_id: str) -> bytes:
    return json.dumps({"id": schema_id, "deleted": True},
                      ensure_ascii=False).encode("utf-8", "surrogatepass")


class _JsonCheck(lf.EntryCheck):
    """A record whose checksum holds must also be one of ours."""

    def usable(self, body: bytes, body_offset: int) -> str | None:
        try:
            record = json.loads(body.decode("utf-8", "surrogatepass"))
        except ValueError:
            return "record is not a schema record"
        if not isinstance(record, dict) or not isinstance(record.get("id"), str):
            return "record is not a schema record"
        return None


class SchemaFile:
    """Appends registry changes to ``schemas.log`` and reads them back."""

    def __init__(self, directory: str | os.PathLike[str], *, fsync: bool = True,
                 repair: bool = False) -> None:
        self.directory = Path(directory)
        self.path = self.directory / SCHEMA_LOG
        self.fsync = fsync
        self.repair = repair
        self._fd: int | None = None

    def load(self) -> Iterator[tuple[str, int, StoredSchema | None]]:
        """(schema id, version, schema) per record in file order; a deletion has version -1
        and no schema. Raises ``CorruptLogError`` on damage in the middle (unless repair)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        if not self.path.exists():
            return
        with open(self.path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            items = list(lf.scan(f.fileno(), size, _JsonCheck()))
            damage = [i for i in items if isinstance(i, lf.Damage)]
            if damage:
                self._handle_damage(f.fileno(), damage)
        for item in items:
            if isinstance(item, lf.ScannedRecord):
                record = json.loads(item.body.decode("utf-8", "surrogatepass"))
                if record.get("deleted"):
                    yield record["id"], -1, None
                    continue
                yield record["id"], int(record["version"]), StoredSchema(
                    int(record["type"]), base64.b64decode(record["data"]),
                    tuple((str(k), str(v)) for k, v in record["properties"]))

    def _handle_damage(self, fd: int, damage: list[lf.Damage]) -> None:
        description = "; ".join(f"{d.size} bytes at offset {d.start} ({d.reason})"
                                for d in damage)
        report: dict[str, object] = {"file": str(self.path), "damage": [
            {"start": d.start, "end": d.end, "tail": d.tail, "reason": d.reason}
            for d in damage]}
        if any(not d.tail for d in damage) and not self.repair:
            raise CorruptLogError(
                f"{self.path} is damaged where valid records follow, so registered schema "
                f"versions may be in it: {description}. Start with --repair to move the "
                f"damaged bytes to {self.directory / QUARANTINE}/ and go on with the rest.",
                report)
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        where = self.directory / QUARANTINE / f"schemas-{stamp}-{os.getpid()}"
        where.mkdir(parents=True, exist_ok=True)
        for d in damage:
            (where / f"bytes-{d.start}-{d.end}.bin").write_bytes(
                os.pread(fd, d.size, d.start))
        (where / "report.json").write_text(json.dumps(report, indent=2) + "\n")
        log.warning("%s: cut off %s; copy in %s", self.path, description, where)

    def rewrite(self, versions: Iterable[tuple[str, list[StoredSchema | None]]]) -> None:
        """Replace the file with these live versions (compaction) and open it for appends."""
        self.close()
        tmp = self.path.with_name(SCHEMA_LOG + ".compact")
        with open(tmp, "wb") as f:
            f.write(lf.FILE_MAGIC)
            for schema_id, schemas in versions:
                for version, schema in enumerate(schemas):
                    if schema is None:  # lost: later versions keep their numbers
                        continue
                    f.write(lf.frame_record(_encode_added(schema_id, version, schema)))
            f.flush()
            if self.fsync:
                os.fsync(f.fileno())
        os.replace(tmp, self.path)
        if self.fsync:
            fd = os.open(self.directory, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)

    def _append(self, body: bytes) -> None:
        if self._fd is None:
            raise OSError(f"{self.path} is not open (load and rewrite it first)")
        data = lf.frame_record(body)
        written = os.write(self._fd, data)
        if written != len(data):
            raise OSError(f"short write to {self.path}: {written} of {len(data)} bytes")
        if self.fsync:
            os.fsync(self._fd)

    def added(self, schema_id: str, version: int, schema: StoredSchema) -> None:
        self._append(_encode_added(schema_id, version, schema))

    def deleted(self, schema_id: str) -> None:
        self._append(_encode_deleted(schema_id))

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
