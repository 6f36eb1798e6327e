"""Decoding a Pulsar capture in Spark: protoframe's mapInArrow decoder against a plain UDF.

A capture of N Pulsar SEND frames (command, MessageMetadata with properties, a 64-byte
payload; N = 1,000,000 unless ``BENCH_SPARK_N`` says otherwise) is written to a temporary
directory and read with the ``protoframe_capture`` data source in Spark ``local[2]``. Two
jobs turn the raw frames into the same typed rows (``capture_schema("pulsar")``: capture
columns, frame size, command type, error, the whole BaseCommand struct and the payload with
its metadata) and write them to Spark's ``noop`` sink, which materializes every column:

* ours: ``pipeline.capture_decode.decode_captures`` -- ``mapInArrow`` over record-aligned
  parts of the file, each task reading its parts and decoding them with the generated
  ``frames``/``spark`` modules, rows built column by column as Arrow arrays;
* udf: the raw frames from the ``protoframe_capture`` data source (``read_captures``; a
  row-at-a-time UDF needs one row per frame first), then a plain (pickled) Python UDF using
  the official protobuf runtime (upb):
  ``struct`` unpacks the frame, ``FromString`` parses the command and the metadata, the crc32c
  is checked as ours does, and a descriptor-driven converter (precomputed per message type)
  builds the same nested row. The ``_pb2`` module is compiled from specs/pulsar/PulsarApi.proto
  with ``grpc_tools.protoc --python_out`` into a temporary directory at start.

For reference a third job runs ours over the same data source as the UDF (``read_captures``
then ``mapInArrow``) on ``min(N, 200,000)`` frames, which shows what reading the parts inside
``mapInArrow`` saves.

Before anything is timed the jobs decode a sample and must produce equal rows. Each then runs
once on a small capture to start the Python workers (imports, JIT), and the timed runs follow.
Then, in the same ``local[2]`` session, N protobuf values (the demo's ``OrderPlaced`` events, a
binary column in a Parquet file) are decoded into the same struct column by ours (``mapInArrow``
and the columnar decoder, and again with the per-row generated codec) and by Spark's own
``from_protobuf`` (the spark-protobuf package
matching the installed PySpark, which the session loads with ``spark.jars.packages``; see
``bench.spark_protobuf`` and ``bench.spark_orders``). Both must produce equal rows on a sample
first. When the package cannot be fetched its row says why and the rest of the bench runs;
a build of it made on the machine can stand in (``bench.spark_protobuf.LOCAL_JARS_ENV``).

About three to four minutes in all at the default N; ``BENCH_SPARK_N=100000`` for a quick run.
Timings on a shared machine vary from run to run; the ratio is what to look at.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PROTO = REPO / "specs" / "pulsar" / "PulsarApi.proto"

N = int(os.environ.get("BENCH_SPARK_N", "1000000"))
REF_N = min(N, 200_000)  # rows for the reference job (ours over the data source)
WARMUP_N = 20_000
SAMPLE_N = 300
DISTINCT = 4096  # distinct frames, cycled; every one is decoded in full each time
TARGET = 3.0
ORDERS_TARGET = 1.0  # ours at least as many rows/s as from_protobuf (issue 21)


def _frames(count: int) -> list[bytes]:
    from protoframe.generated.pulsar import frames, pulsar_api

    out = []
    for i in range(count):
        command = pulsar_api.BaseCommand(
            type_=pulsar_api.BaseCommand.Type.SEND,
            send=pulsar_api.CommandSend(producer_id=i % 8, sequence_id=1_000_000 + i,
                                        num_messages=1))
        metadata = pulsar_api.MessageMetadata(
            producer_name=f"standalone-0-{i % 8}", sequence_id=1_000_000 + i,
            publish_time=1_700_000_000_000 + i,
            properties=[pulsar_api.KeyValue(key="app", value="orders"),
                        pulsar_api.KeyValue(key="trace-id", value=f"{i:016x}")],
            partition_key=f"order-{i % 100}", uncompressed_size=64)
        payload = frames.Payload(metadata=metadata, data=bytes([i % 251]) * 64)
        out.append(frames.Frame(command=command, payload=payload).encode())
    return out


def _write_capture(path: Path, count: int, wire: list[bytes]) -> None:
    from protoframe.runtime.codec.capture import CaptureWriter, Direction

    with CaptureWriter(path, buffer_size=1 << 20) as writer:
        write = writer.write
        for i in range(count):
            write(Direction.OUT, 1 + i % 4, wire[i % len(wire)], 1_700_000_000_000_000_000 + i)


def _compile_official(out: Path) -> None:
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO.parent}",
                    f"--python_out={out}", str(PROTO)], check=True)


def make_udf_decoder() -> Callable[[bytes], tuple[Any, ...]]:
    """The baseline's per-row function: frame bytes -> the decoded columns as a tuple.

    Runs in the Python workers, where ``PulsarApi_pb2`` is importable (PYTHONPATH).
    """
    import importlib
    import struct

    import crc32c
    from google.protobuf.descriptor import FieldDescriptor

    pb: Any = importlib.import_module("PulsarApi_pb2")  # compiled at start, see _run

    converters: dict[str, Callable[[Any], tuple[Any, ...]]] = {}
    uint64 = {FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64}

    def converter(desc: Any, path: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
        if desc.full_name in converters:
            return converters[desc.full_name]
        index: dict[int, tuple[int, Callable[[Any], Any]]] = {}
        defaults: list[Any] = []

        def convert(msg: Any) -> tuple[Any, ...]:
            out = list(defaults)
            for fd, value in msg.ListFields():
                i, conv = index[fd.number]
                out[i] = conv(value)
            return tuple(out)

        converters[desc.full_name] = convert
        for i, fd in enumerate(desc.fields):
            one: Callable[[Any], Any]
            if fd.type == FieldDescriptor.TYPE_MESSAGE:
                if fd.message_type.full_name in (*path, desc.full_name):
                    one = _serialize  # a message inside its own type: bytes
                else:
                    one = converter(fd.message_type, (*path, desc.full_name))
            elif fd.type == FieldDescriptor.TYPE_ENUM:
                names = {v.number: v.name for v in fd.enum_type.values}
                one = _enum_namer(names)
            elif fd.type in uint64:
                one = Decimal
            else:
                one = _same
            index[fd.number] = (i, _each(one) if fd.is_repeated else one)
            defaults.append([] if fd.is_repeated else None)
        return convert

    command_row = converter(pb.BaseCommand.DESCRIPTOR, ())
    metadata_row = converter(pb.MessageMetadata.DESCRIPTOR, ())
    broker_row = converter(pb.BrokerEntryMetadata.DESCRIPTOR, ())
    type_names = {v.number: v.name for v in pb.BaseCommand.Type.DESCRIPTOR.values}
    header = struct.Struct(">II")
    magic_checksum = struct.Struct(">HI")
    u32 = struct.Struct(">I")

    def decode(frame: bytes) -> tuple[Any, ...]:
        try:
            total, size = header.unpack_from(frame, 0)
            end = 4 + total
            command = pb.BaseCommand.FromString(frame[8 : 8 + size])
            pos = 8 + size
            payload = None
            if pos < end:
                broker = None
                if u32.unpack_from(frame, pos)[0] >> 16 == 0x0E02:
                    (bsize,) = u32.unpack_from(frame, pos + 2)
                    broker = (broker_row(pb.BrokerEntryMetadata.FromString(
                        frame[pos + 6 : pos + 6 + bsize])),)
                    pos += 6 + bsize
                magic, checksum = magic_checksum.unpack_from(frame, pos)
                if magic != 0x0E01 or crc32c.crc32c(frame[pos + 6 : end]) != checksum:
                    raise ValueError("bad payload magic or checksum")
                (msize,) = u32.unpack_from(frame, pos + 6)
                start = pos + 10
                metadata = pb.MessageMetadata.FromString(frame[start : start + msize])
                payload = (broker, metadata_row(metadata), frame[start + msize : end])
            return (len(frame), type_names[command.type], None, command_row(command), payload)
        except Exception as exc:  # one bad frame must not stop the job
            return (len(frame), None, f"{type(exc).__name__}: {exc}", None, None)

    return decode


def _serialize(msg: Any) -> bytes:
    data: bytes = msg.SerializeToString()
    return data


def _same(value: Any) -> Any:
    return value


def _enum_namer(names: dict[int, str]) -> Callable[[int], str]:
    return lambda v: names.get(v, str(v))


def _each(one: Callable[[Any], Any]) -> Callable[[Any], list[Any]]:
    return lambda values: [one(v) for v in values]


_DECODER: list[Callable[[bytes], tuple[Any, ...]]] = []


def udf_decode(frame: bytes) -> tuple[Any, ...]:
    """The UDF body: builds the converter once per worker process."""
    if not _DECODER:
        _DECODER.append(make_udf_decoder())
    return _DECODER[0](frame)


def main() -> None:
    from protoframe.pipeline.spark_session import JAVA_HINT, java_version

    if (java_version() or 0) < 17:
        print(f"skipped: {JAVA_HINT}")
        return
    work = Path(tempfile.mkdtemp(prefix="protoframe-bench-spark-"))
    try:
        _run(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run(work: Path) -> None:
    started = time.perf_counter()
    official = work / "official"
    official.mkdir()
    _compile_official(official)
    # Workers import PulsarApi_pb2 from here; the session adds the repository itself.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(official), os.environ.get("PYTHONPATH", "")) if p)
    sys.path.insert(0, str(official))

    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    from bench import spark_orders
    from bench.spark_protobuf import IVY_DIR, resolve
    from protoframe.generated.pulsar import spark as pulsar_spark
    from protoframe.pipeline.capture_decode import (
        CAPTURE_FIELDS,
        capture_schema,
        decode_captures,
        read_captures,
    )
    from protoframe.pipeline.spark_session import local_session

    resolving = time.perf_counter()
    package = resolve()
    status = ("NOT AVAILABLE" if package.error is not None
              else f"jars {', '.join(package.jars)}" if package.jars
              else f"cached in {IVY_DIR}")
    print(f"spark-protobuf: {package.coordinate}: {status} "
          f"({time.perf_counter() - resolving:.1f} s)")
    orders_values = spark_orders.order_values(DISTINCT)
    for name, count in (("orders_sample", SAMPLE_N), ("orders_warmup", WARMUP_N),
                        ("orders_full", N)):
        spark_orders.write_values(work / f"{name}.parquet", count, orders_values)
    descriptor_set = spark_orders.write_descriptor_set(work / "events.desc")

    writing = time.perf_counter()
    wire = _frames(DISTINCT)
    captures = {}
    for name, count in (("sample", SAMPLE_N), ("warmup", WARMUP_N), ("ref", REF_N),
                        ("full", N)):
        (work / name).mkdir()
        _write_capture(work / name / "capture.pfcap", count, wire)
        captures[name] = str(work / name)
    size = os.path.getsize(Path(captures["full"]) / "capture.pfcap")
    print(f"capture: {N:,} SEND frames, {size / 1e6:.1f} MB, "
          f"{len(wire[0])} bytes a frame; written in {time.perf_counter() - writing:.1f} s")

    spark = local_session("protoframe-bench-spark-decode", conf=package.session_conf())
    schema = capture_schema("pulsar")
    decoded_schema = StructType(schema.fields[len(CAPTURE_FIELDS):])
    decode_udf = F.udf(lambda frame: udf_decode(frame), decoded_schema)
    capture_cols = [f.name for f in CAPTURE_FIELDS]

    def ours(path: str) -> DataFrame:
        return decode_captures(spark, path, protocol="pulsar")

    def ours_source(path: str) -> DataFrame:
        return decode_captures(spark, read_captures(spark, path), protocol="pulsar")

    def udf(path: str) -> DataFrame:
        raw = read_captures(spark, path)
        return raw.select(*capture_cols, decode_udf("frame").alias("d")).select(
            *capture_cols, "d.*")

    # Same rows from both, before timing anything.
    mine = ours(captures["sample"]).orderBy("ts_ns").collect()
    theirs = udf(captures["sample"]).orderBy("ts_ns").collect()
    assert udf(captures["sample"]).schema.simpleString() == schema.simpleString()
    assert mine == theirs, "the two decoders disagree"
    assert ours_source(captures["sample"]).orderBy("ts_ns").collect() == mine
    assert all(r["error"] is None and r["command_type"] == "SEND" for r in mine)
    first = pulsar_spark.BaseCommand.from_row(mine[0]["command"])
    assert first.send is not None and first.send.sequence_id == 1_000_000

    def run(make: Callable[[str], DataFrame], path: str) -> float:
        t = time.perf_counter()
        make(path).write.format("noop").mode("overwrite").save()
        return time.perf_counter() - t

    for make in (ours, ours_source, udf):
        run(make, captures["warmup"])
    ours_s = run(ours, captures["full"])
    udf_s = run(udf, captures["full"])
    source_s = run(ours_source, captures["ref"])
    ours_rate, udf_rate = N / ours_s, N / udf_s
    orders = _orders(spark, work, descriptor_set, package.error)
    spark.stop()

    print(f"{'decoder':<50}{'rows':>11}{'seconds':>10}{'rows/s':>11}")
    for label, rows, seconds in (
        ("ours: file parts -> mapInArrow (decode_captures)", N, ours_s),
        ("udf: data source -> Python UDF + official protobuf", N, udf_s),
        ("(ours over the data source, for reference)", REF_N, source_s),
    ):
        print(f"{label:<50}{rows:>11,}{seconds:>10.1f}{rows / seconds:>11,.0f}")
    ratio = ours_rate / udf_rate
    verdict = "meets" if ratio >= TARGET else "MISSES"
    print(f"ratio ours/udf: {ratio:.2f}x ({verdict} the {TARGET:.0f}x target); "
          f"local[2], {os.cpu_count()} CPUs")

    print()
    print(f"{N:,} protobuf values ({spark_orders.MESSAGE}, "
          f"{sum(map(len, orders_values)) / len(orders_values):.0f} bytes on average) "
          "-> one struct column, same session:")
    print(f"{'decoder':<50}{'rows':>11}{'seconds':>10}{'rows/s':>11}")
    for label, seconds_or_error in orders:
        if isinstance(seconds_or_error, str):
            print(f"{label:<50}  not run: {seconds_or_error}")
        else:
            print(f"{label:<50}{N:>11,}{seconds_or_error:>10.1f}{N / seconds_or_error:>11,.0f}")
    (_, columnar_s), (_, rows_s), (_, theirs_s) = orders
    assert not isinstance(columnar_s, str) and not isinstance(rows_s, str)
    print(f"ratio columnar/row path (rows/s): {rows_s / columnar_s:.2f}x")
    if not isinstance(theirs_s, str):
        ratio = theirs_s / columnar_s
        verdict = "meets" if ratio >= ORDERS_TARGET else "MISSES"
        print(f"ratio ours (columnar)/from_protobuf (rows/s): {ratio:.2f}x ({verdict} the "
              f"{ORDERS_TARGET:.1f}x target)")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"total {time.perf_counter() - started:.0f} s")


def _orders(spark: Any, work: Path, descriptor_set: Path,
            package_error: str | None) -> list[tuple[str, float | str]]:
    """Ours and from_protobuf on the same protobuf values: (label, seconds or why not run)."""
    from bench import spark_orders

    def read(name: str) -> Any:
        return spark.read.parquet(str(work / f"{name}.parquet"))

    def run(df: Any) -> float:
        t = time.perf_counter()
        df.write.format("noop").mode("overwrite").save()
        return time.perf_counter() - t

    ours_label = "ours: mapInArrow + columnar decode (C -> Arrow)"
    rows_label = "ours: mapInArrow + OrderPlaced.decode per row"
    theirs_label = "from_protobuf (spark-protobuf, JVM)"
    mine = spark_orders.ours(read("orders_sample"))
    mine_rows = mine.collect()
    _expect(len(mine_rows) == SAMPLE_N, "ours lost rows")
    row_path = spark_orders.ours(read("orders_sample"), columnar=False)
    _expect(row_path.schema == mine.schema, "the row path's schema differs")
    _expect(row_path.collect() == mine_rows, "columnar and row path decode different rows")
    theirs_result: float | str
    if package_error is not None:
        theirs_result = package_error
    else:
        theirs = spark_orders.from_protobuf(read("orders_sample"), descriptor_set)
        _expect(spark_orders.without_nullability(theirs.schema)
                == spark_orders.without_nullability(mine.schema),
                f"struct types differ: {theirs.schema.simpleString()} vs "
                f"{mine.schema.simpleString()}")
        _expect(theirs.collect() == mine_rows, "ours and from_protobuf decode different rows")
        run(spark_orders.from_protobuf(read("orders_warmup"), descriptor_set))
        theirs_result = -1.0
    run(spark_orders.ours(read("orders_warmup")))
    run(spark_orders.ours(read("orders_warmup"), columnar=False))
    ours_s = run(spark_orders.ours(read("orders_full")))
    rows_s = run(spark_orders.ours(read("orders_full"), columnar=False))
    if not isinstance(theirs_result, str):
        theirs_result = run(spark_orders.from_protobuf(read("orders_full"), descriptor_set))
    return [(ours_label, ours_s), (rows_label, rows_s), (theirs_label, theirs_result)]


def _expect(condition: bool, message: str) -> None:
    """An assertion that ``python -O`` does not remove."""
    if not condition:
        raise AssertionError(message)


if __name__ == "__main__":
    main()
