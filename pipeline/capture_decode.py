"""Decode frame captures into typed Spark DataFrames, for any generated protocol.

The driver walks each capture file's record headers once (``runtime/codec/capture.py``'s
``split_offsets``) and cuts it into record-aligned byte ranges, so one large file is read by
several tasks. Then:

* ``decode_captures(spark, paths)`` runs ``mapInArrow`` over those parts: each task reads its
  byte ranges and decodes the frames in the same Python worker, with the protocol's generated
  modules chosen by name: ``generated.<protocol>.spark`` (``decode_frame``, ``command_name``,
  ``FRAME``) over ``generated.<protocol>.frames``. Every batch of frames becomes one Arrow
  batch of rows: decoded straight into Arrow columns, in C, where the protocol's frame has a
  columnar plan (``runtime/spark/columnar_frames.py``: Pulsar's, Pravega's, TubeMQ's), else
  (and for a frame the columnar path leaves to it) frame by frame by ``decode_frame``, then
  column by column by the generated code.
* ``read_captures(spark, paths)`` reads the raw records through a Python data source,
  ``protoframe_capture`` (rows: ``ts_ns``, ``direction`` "in"/"out", ``connection_id``,
  ``frame`` bytes), for queries on the bytes themselves or other decoders;
  ``decode_captures(spark, raw_dataframe)`` decodes such a DataFrame with ``mapInArrow``.

The decoded DataFrame has one row per frame (one command):

    ts_ns           long, not null      capture timestamp, ns since the epoch
    direction       string, not null    "in" or "out", seen from the recording side
    connection_id   long, not null      the recorder's connection number
    frame_size      long, not null      bytes of the frame
    command_type    string              the command's name as the spec names it ("SEND"),
                                        null when the frame did not decode
    error           string              why the frame did not decode (or failed its
                                        checksum), else null
    <frame fields>                      the frame struct's fields with their generated
                                        schemas, nullable; for Pulsar ``command`` (the whole
                                        BaseCommand) and ``payload`` (broker entry metadata,
                                        MessageMetadata, data) when the frame has one

Java 17+ must be installed (``apt-get install openjdk-17-jre-headless``); ``local_session``
(``pipeline.spark_session``) checks it and sets up a local session the way the tests and
benchmarks use it.
"""

from __future__ import annotations

import glob
import importlib
import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

from protoframe.runtime.codec.capture import read_columns, split_offsets
from protoframe.runtime.spark.columnar_frames import (
    Decoded,
    SparkModule,
    decode_frames,
    row_frames,
)

SOURCE_NAME = "protoframe_capture"

_DIRECTIONS = pa.array(["in", "out"], pa.string())  # capture direction byte -> name

CAPTURE_FIELDS = [
    StructField("ts_ns", LongType(), False),
    StructField("direction", StringType(), False),
    StructField("connection_id", LongType(), False),
]
RAW_SCHEMA = StructType([*CAPTURE_FIELDS, StructField("frame", BinaryType(), False)])
_RAW_ARROW = pa.schema([
    pa.field("ts_ns", pa.int64(), nullable=False),
    pa.field("direction", pa.string(), nullable=False),
    pa.field("connection_id", pa.int64(), nullable=False),
    pa.field("frame", pa.binary(), nullable=False),
])
DECODE_FIELDS = [
    StructField("frame_size", LongType(), False),
    StructField("command_type", StringType(), True),
    StructField("error", StringType(), True),
]


def generated_spark(protocol: str) -> SparkModule:
    """The generated ``spark`` module of ``protocol``.

    A plain name selects ``generated.<protocol>.spark``; a dotted one names the protocol's
    package itself, for code generated elsewhere (``--out``): "mypkg.pulsar" selects
    ``mypkg.pulsar.spark``.
    """
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", protocol):
        raise ValueError(f"not a protocol name: {protocol!r}")
    package = protocol if "." in protocol else f"protoframe.generated.{protocol}"
    module = importlib.import_module(f"{package}.spark")
    if not hasattr(module, "FRAME"):
        raise ValueError(f"protocol {protocol!r} has no frame spec, so nothing to decode")
    return cast(SparkModule, module)


# --- reading capture files ----------------------------------------------------------------------


@dataclass(frozen=True)
class CapturePart(InputPartition):
    """Whole records of one capture file: those whose headers start in [start, end)."""

    path: str
    start: int
    end: int


def capture_files(paths: Sequence[str]) -> list[str]:
    """Files named by ``paths``: files as they are, directories' files, glob patterns."""
    out: list[str] = []
    for path in paths:
        if os.path.isdir(path):
            out += sorted(str(p) for p in Path(path).iterdir() if p.is_file()
                          and not p.name.startswith((".", "_")))
        elif any(ch in path for ch in "*?["):
            out += sorted(glob.glob(path))
        else:
            out.append(path)
    missing = [p for p in out if not os.path.isfile(p)]
    if missing:
        raise FileNotFoundError(f"no capture file at {', '.join(missing)}")
    return out


def plan_parts(paths: Sequence[str], partitions: int) -> list[CapturePart]:
    """Record-aligned parts of the files, about ``partitions`` of them, by size."""
    files = capture_files(paths)
    sizes = {p: os.path.getsize(p) for p in files}
    total = sum(sizes.values()) or 1
    parts: list[CapturePart] = []
    for path in files:
        share = max(1, round(partitions * sizes[path] / total))
        parts += [CapturePart(path, start, end) for start, end in split_offsets(path, share)]
    return parts


class CaptureReader(DataSourceReader):
    """Reads the parts ``plan_parts`` cuts, as Arrow batches of raw records."""

    def __init__(self, options: dict[str, str]) -> None:
        self.paths: list[str] = json.loads(options["paths"])
        self.partitions_wanted = int(options.get("partitions", "2"))
        self.strict = options.get("strict", "true").lower() == "true"
        self.batch_rows = int(options.get("batch_rows", "10000"))

    def partitions(self) -> Sequence[InputPartition]:
        return plan_parts(self.paths, self.partitions_wanted)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, CapturePart)
        for ts, dirs, conns, frames in read_columns(partition.path, partition.start,
                                                    partition.end, batch_rows=self.batch_rows,
                                                    strict=self.strict):
            yield pa.RecordBatch.from_arrays([
                pa.array(ts, pa.int64()),
                _DIRECTIONS.take(pa.array(dirs, pa.int8())),
                pa.array(conns, pa.int64()),
                pa.array(frames, pa.binary()),
            ], schema=_RAW_ARROW)


class CaptureDataSource(DataSource):
    """``spark.read.format("protoframe_capture")``: capture files as raw records.

    Options: ``paths`` (a JSON list of files, directories or glob patterns), ``partitions``
    (about how many parts to cut the files into), ``strict`` ("false" ignores a partial last
    record), ``batch_rows``.
    """

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        return RAW_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return CaptureReader(dict(self.options))


def read_captures(spark: SparkSession, paths: str | Sequence[str], *,
                  partitions: int | None = None, strict: bool = True) -> DataFrame:
    """Capture files as a DataFrame of raw records (``RAW_SCHEMA``)."""
    spark.dataSource.register(CaptureDataSource)
    if isinstance(paths, str):
        paths = [paths]
    wanted = partitions or spark.sparkContext.defaultParallelism
    return (spark.read.format(SOURCE_NAME)
            .option("paths", json.dumps([os.fspath(p) for p in paths]))
            .option("partitions", str(wanted))
            .option("strict", "true" if strict else "false")
            .load())


# --- decoding -----------------------------------------------------------------------------------


def capture_schema(protocol: str) -> StructType:
    """The schema of ``decode_captures(..., protocol)`` (see the module docstring)."""
    frame = generated_spark(protocol).FRAME.spark_schema
    taken = {f.name for f in CAPTURE_FIELDS + DECODE_FIELDS}
    clash = [f.name for f in frame.fields if f.name in taken]
    if clash:
        raise ValueError(f"{protocol} frame fields {clash} clash with the capture columns")
    return StructType([*CAPTURE_FIELDS, *DECODE_FIELDS,
                       *[StructField(f.name, f.dataType, True) for f in frame.fields]])


def _arrow_schema(module: SparkModule) -> Any:
    frame_fields = [f.with_nullable(True) for f in module.FRAME.arrow_type]
    return pa.schema([
        *[f for f in _RAW_ARROW if f.name != "frame"],
        pa.field("frame_size", pa.int64(), nullable=False),
        pa.field("command_type", pa.string()),
        pa.field("error", pa.string()),
        *frame_fields,
    ])


class _Decoder:
    """Turns columns of captured frames into record batches of decoded rows.

    The frames are decoded by ``runtime/spark/columnar_frames.py``: straight into Arrow
    columns where the protocol's frame has a columnar plan, frame by frame through the
    generated ``decode_frame`` otherwise (and for each frame the columnar path leaves to it).
    """

    def __init__(self, protocol: str, side: str, columnar: bool = True) -> None:
        if side not in ("client", "server"):
            raise ValueError(f"side must be 'client' or 'server', not {side!r}")
        self.module = generated_spark(protocol)
        self.decode = decode_frames if columnar else _row_frames
        self.schema = _arrow_schema(self.module)
        self.to_server = 1 if side == "client" else 0  # the direction byte of to-server frames

    def batch(self, ts: Any, directions: Any, connections: Any, datas: Any,
              to_server: list[bool]) -> Any:
        """One output batch; ``datas`` is a binary array of the frames (or their bytes)."""
        if not isinstance(datas, (pa.Array, pa.ChunkedArray)):
            datas = pa.array(datas, pa.binary())
        decoded = self.decode(self.module, datas, to_server)
        return pa.RecordBatch.from_arrays([
            ts, directions, connections, pc.binary_length(datas).cast(pa.int64()),
            decoded.names, decoded.errors, *decoded.frames.flatten(),
        ], schema=self.schema)


def _row_frames(module: SparkModule, datas: Any, to_server: list[bool]) -> Decoded:
    return row_frames(module, datas.to_pylist(), to_server)


def decode_batches(protocol: str, side: str, batches: Iterator[Any],
                   columnar: bool = True) -> Iterator[Any]:
    """``mapInArrow`` body over raw records (``RAW_SCHEMA`` batches) -> decoded rows.

    ``side`` is "client" when the capture was recorded by the client (its "out" frames go
    to the server) and "server" otherwise; it matters to protocols whose layouts differ by
    direction. ``columnar=False`` decodes frame by frame (the row path), for comparisons.
    """
    decoder = _Decoder(protocol, side, columnar)
    outbound = "out" if decoder.to_server else "in"
    for batch in batches:
        directions = batch.column("direction")
        yield decoder.batch(batch.column("ts_ns"), directions, batch.column("connection_id"),
                            batch.column("frame"),
                            [d == outbound for d in directions.to_pylist()])


def decode_parts(protocol: str, side: str, strict: bool, batch_rows: int,
                 batches: Iterator[Any], columnar: bool = True) -> Iterator[Any]:
    """``mapInArrow`` body over capture file parts (``PART_SCHEMA``) -> decoded rows.

    Reads each part's records and decodes them in the same Python worker, so frames never
    travel through the JVM before they are decoded.
    """
    decoder = _Decoder(protocol, side, columnar)
    for batch in batches:
        for path, start, end in zip(*(batch.column(n).to_pylist() for n in PART_FIELDS),
                                    strict=True):
            for ts, dirs, conns, datas in read_columns(path, start, end, batch_rows=batch_rows,
                                                       strict=strict):
                to_server = decoder.to_server
                yield decoder.batch(pa.array(ts, pa.int64()),
                                    _DIRECTIONS.take(pa.array(dirs, pa.int8())),
                                    pa.array(conns, pa.int64()), datas,
                                    [d == to_server for d in dirs])


PART_FIELDS = ("path", "start", "end")
PART_SCHEMA = StructType([StructField("path", StringType(), False),
                          StructField("start", LongType(), False),
                          StructField("end", LongType(), False)])


def decode_captures(spark: SparkSession, source: str | Sequence[str] | DataFrame, *,
                    protocol: str = "pulsar", side: str = "client",
                    partitions: int | None = None, strict: bool = True,
                    batch_rows: int = 10_000, columnar: bool = True) -> DataFrame:
    """Capture files (or a raw DataFrame from ``read_captures``) as typed rows, one per frame.

    ``protocol`` names the generated package to decode with (see ``generated_spark``). Given
    paths, the driver cuts the files into record-aligned parts (about ``partitions`` of them,
    by default twice the session's parallelism) and each task reads and decodes its parts in one
    ``mapInArrow`` call; given a DataFrame of raw records, ``mapInArrow`` decodes its frames.
    Frames are decoded straight into Arrow columns where the protocol's frame allows it
    (``runtime/spark/columnar_frames.py``); ``columnar=False`` decodes them one by one through
    the generated ``decode_frame`` (the same rows, slower: for comparisons).
    """
    schema = capture_schema(protocol)  # also checks the protocol before any task runs
    if isinstance(source, DataFrame):
        return source.mapInArrow(partial(_decode_batches, protocol, side, columnar), schema)
    paths = [source] if isinstance(source, str) else list(source)
    # Twice the parallelism by default: tasks finishing at different times even out.
    wanted = partitions or 2 * spark.sparkContext.defaultParallelism
    parts = [(p.path, p.start, p.end) for p in plan_parts(paths, wanted)]
    # One part per partition (and task), however many parts the files made.
    rdd = spark.sparkContext.parallelize(parts, max(1, len(parts)))
    table = spark.createDataFrame(rdd, PART_SCHEMA)
    return table.mapInArrow(partial(_decode_parts, protocol, side, strict, batch_rows, columnar),
                            schema)


def _decode_batches(protocol: str, side: str, columnar: bool,
                    batches: Iterator[Any]) -> Iterator[Any]:
    return decode_batches(protocol, side, batches, columnar)


def _decode_parts(protocol: str, side: str, strict: bool, batch_rows: int, columnar: bool,
                  batches: Iterator[Any]) -> Iterator[Any]:
    return decode_parts(protocol, side, strict, batch_rows, batches, columnar)
