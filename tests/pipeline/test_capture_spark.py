"""The capture pipeline in a real local Spark session (pipeline/capture_decode.py).

A client-side Pulsar capture over two connections and two files (handshakes, producers, SENDs
with payloads and their receipts, keepalives, a corrupt and an undecodable frame) is read
through the ``protoframe_capture`` data source, decoded with ``mapInArrow`` and queried:
command counts by type, and SEND -> SEND_RECEIPT latency per (producer_id, sequence_id) and
connection. Expected values are computed from the same frames in plain Python.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from protoframe.generated.pulsar import frames, pulsar_api  # noqa: E402
from protoframe.generated.pulsar import spark as pulsar_spark  # noqa: E402
from protoframe.pipeline.capture_decode import (  # noqa: E402
    RAW_SCHEMA,
    capture_schema,
    decode_captures,
    read_captures,
)
from protoframe.pipeline.queries import command_counts, latency_summary, pulsar_send_latency  # noqa: E402
from protoframe.runtime.codec.capture import (  # noqa: E402
    CaptureRecord,
    CaptureWriter,
    Direction,
    write_records,
)

Type = pulsar_api.BaseCommand.Type
MS = 1_000_000


@dataclass
class Capture:
    """What the test capture holds, as the queries should find it."""

    paths: list[Path] = field(default_factory=list)
    counts: Counter[tuple[str, str | None]] = field(default_factory=Counter)
    latency: dict[tuple[int, int, int], int | None] = field(default_factory=dict)
    sends: list[pulsar_api.BaseCommand] = field(default_factory=list)
    records: int = 0


def _command(type_: pulsar_api.BaseCommand.Type, **body: Any) -> pulsar_api.BaseCommand:
    return pulsar_api.BaseCommand(type_=type_, **body)


def _build_capture(directory: Path) -> Capture:
    cap = Capture()
    for conn in (1, 2):
        path = directory / f"conn-{conn}.pfcap"
        cap.paths.append(path)
        with CaptureWriter(path) as writer:
            now = conn * 1000 * MS

            def record(direction: Direction, frame: frames.Frame | bytes, name: str | None,
                       at: int, writer: CaptureWriter = writer, conn: int = conn) -> None:
                data = frame if isinstance(frame, bytes) else frame.encode()
                writer.write(direction, conn, data, timestamp_ns=at)
                cap.counts["out" if direction else "in", name] += 1
                cap.records += 1

            record(Direction.OUT, frames.Frame(command=_command(
                Type.CONNECT, connect=pulsar_api.CommandConnect(client_version="t"))),
                "CONNECT", now)
            record(Direction.IN, frames.Frame(command=_command(
                Type.CONNECTED, connected=pulsar_api.CommandConnected(server_version="s"))),
                "CONNECTED", now + MS)
            for producer in (1, 2):
                record(Direction.OUT, frames.Frame(command=_command(
                    Type.PRODUCER, producer=pulsar_api.CommandProducer(
                        topic="t", producer_id=producer, request_id=producer))),
                    "PRODUCER", now + 2 * MS)
                record(Direction.IN, frames.Frame(command=_command(
                    Type.PRODUCER_SUCCESS, producer_success=pulsar_api.CommandProducerSuccess(
                        request_id=producer, producer_name=f"p{producer}"))),
                    "PRODUCER_SUCCESS", now + 3 * MS)
            for seq in range(30):
                for producer in (1, 2):
                    at = now + (10 + seq) * MS + producer
                    send = _command(Type.SEND, send=pulsar_api.CommandSend(
                        producer_id=producer, sequence_id=seq, num_messages=1))
                    metadata = pulsar_api.MessageMetadata(
                        producer_name=f"p{producer}", sequence_id=seq, publish_time=at // MS)
                    record(Direction.OUT, frames.Frame(command=send, payload=frames.Payload(
                        metadata=metadata, data=b"m%d" % seq)), "SEND", at)
                    cap.sends.append(send)
                    if seq == 29 and producer == 2:  # still waiting when the capture ended
                        cap.latency[conn, producer, seq] = None
                        continue
                    delay = (seq % 7 + conn) * MS + producer
                    record(Direction.IN, frames.Frame(command=_command(
                        Type.SEND_RECEIPT, send_receipt=pulsar_api.CommandSendReceipt(
                            producer_id=producer, sequence_id=seq))), "SEND_RECEIPT",
                        at + delay)
                    cap.latency[conn, producer, seq] = delay
            record(Direction.IN, frames.Frame(command=_command(
                Type.PING, ping=pulsar_api.CommandPing())), "PING", now + 50 * MS)
            record(Direction.OUT, frames.Frame(command=_command(
                Type.PONG, pong=pulsar_api.CommandPong())), "PONG", now + 51 * MS)
            if conn == 2:
                corrupt = bytearray(frames.Frame(command=cap.sends[-1], payload=frames.Payload(
                    metadata=pulsar_api.MessageMetadata(producer_name="p", sequence_id=99,
                                                        publish_time=1), data=b"x")).encode())
                corrupt[-1] ^= 1
                record(Direction.OUT, bytes(corrupt), "SEND", now + 60 * MS)
                record(Direction.IN, b"\x00\x00\x00\x03\x00\x00\x00", None, now + 61 * MS)
    return cap


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Capture:
    return _build_capture(tmp_path_factory.mktemp("captures"))


def test_raw_records(spark: SparkSession, capture: Capture) -> None:
    raw = read_captures(spark, [str(p) for p in capture.paths], partitions=5)
    assert raw.schema == RAW_SCHEMA
    assert raw.rdd.getNumPartitions() >= 4  # two files cut into record-aligned parts
    rows = raw.groupBy("connection_id", "direction").count().collect()
    assert sum(r["count"] for r in rows) == capture.records
    assert {r["connection_id"] for r in rows} == {1, 2}


def test_decode_and_count_commands(spark: SparkSession, capture: Capture) -> None:
    decoded = decode_captures(spark, str(capture.paths[0].parent), protocol="pulsar",
                              partitions=3)
    assert decoded.schema == capture_schema("pulsar")
    counts = {(r["direction"], r["command_type"]): r["count"]
              for r in command_counts(decoded).collect()}
    assert counts == dict(capture.counts)
    errors = decoded.where(F.col("error").isNotNull()).orderBy("ts_ns").collect()
    assert [r["command_type"] for r in errors] == ["SEND", None]
    assert errors[0]["error"].startswith("ChecksumFailure")
    assert errors[0]["command"]["send"]["sequence_id"] == 29  # the command still decodes
    assert errors[1]["command"] is None and errors[1]["frame_size"] == 7


def test_send_latency(spark: SparkSession, capture: Capture) -> None:
    decoded = decode_captures(spark, [str(p) for p in capture.paths])
    latency = pulsar_send_latency(decoded.where(F.col("error").isNull()))
    got = {(r["connection_id"], int(r["producer_id"]), int(r["sequence_id"])): r["latency_ns"]
           for r in latency.collect()}
    assert got == capture.latency
    summary = {r["connection_id"]: r for r in latency_summary(latency).collect()}
    assert summary[1]["sends"] == 60 and summary[1]["receipts"] == 59
    assert summary[2]["max_ns"] == max(v for (c, _, _), v in capture.latency.items()
                                       if c == 2 and v is not None)


def test_decoded_commands_come_back_typed(spark: SparkSession, capture: Capture) -> None:
    decoded = decode_captures(spark, [str(p) for p in capture.paths])
    rows = (decoded.where((F.col("command_type") == "SEND") & F.col("error").isNull())
            .orderBy("connection_id", "ts_ns").select("command").collect())
    commands = [pulsar_spark.BaseCommand.from_row(r["command"]) for r in rows]
    assert commands == capture.sends


def test_both_ways_of_decoding_agree(spark: SparkSession, capture: Capture) -> None:
    paths = [str(p) for p in capture.paths]
    fused = decode_captures(spark, paths, partitions=3)  # parts read inside mapInArrow
    via_source = decode_captures(spark, read_captures(spark, paths, partitions=2))
    order = ["connection_id", "ts_ns", "direction"]
    assert fused.orderBy(*order).collect() == via_source.orderBy(*order).collect()


def test_columnar_and_row_paths_agree(spark: SparkSession, capture: Capture,
                                      tmp_path: Path) -> None:
    empty = tmp_path / "empty.pfcap"  # a capture of no frames: an empty run
    write_records(empty, [])
    paths = [*(str(p) for p in capture.paths), str(empty)]
    order = ["connection_id", "ts_ns", "direction"]
    columnar = decode_captures(spark, paths, partitions=3).orderBy(*order).collect()
    rows = decode_captures(spark, paths, partitions=3, columnar=False).orderBy(*order).collect()
    assert len(columnar) == capture.records
    assert columnar == rows
    raw = read_captures(spark, paths, partitions=2)
    assert decode_captures(spark, raw).orderBy(*order).collect() == rows
    assert decode_captures(spark, raw, columnar=False).orderBy(*order).collect() == rows


@pytest.mark.parametrize("protocol", ["pravega", "tubemq"])
def test_columnar_and_row_paths_agree_on_other_protocols(spark: SparkSession, tmp_path: Path,
                                                         protocol: str) -> None:
    """Pravega's and TubeMQ's frames (the capture benchmark's, and a damaged one) decode to the
    same rows through Spark columnar as by the row path: their Arrow columns pass Spark's
    checks of the generated schema."""
    from bench.bench_capture_columnar import frames_of

    wire = frames_of(protocol, 40)
    wire[5] = wire[5][:-3]
    path = tmp_path / f"{protocol}.pfcap"
    write_records(path, [CaptureRecord(i, Direction(i % 2), 1, w) for i, w in enumerate(wire)])
    order = ["connection_id", "ts_ns", "direction"]
    columnar = decode_captures(spark, str(path), protocol=protocol).orderBy(*order).collect()
    rows = decode_captures(spark, str(path), protocol=protocol,
                           columnar=False).orderBy(*order).collect()
    assert len(columnar) == len(wire)
    assert columnar == rows
    assert rows[5]["error"] and all(r["command_type"] for i, r in enumerate(rows) if i != 5)
