"""The decoding step of the Spark pipeline (pipeline/capture_decode.py), without Spark.

``decode_batches`` (the ``mapInArrow`` body) and ``decode_parts`` run directly on Arrow
batches; tests/pipeline/test_capture_spark.py runs the same code inside Spark. The module imports
pyspark and pyarrow, which only the spark extra installs.
"""

from __future__ import annotations

import random
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

import pyarrow as pa  # noqa: E402

from protoframe.generated.pulsar import frames, pulsar_api  # noqa: E402
from protoframe.generated.pulsar import spark as pulsar_spark  # noqa: E402
from protoframe.generator.build import generate  # noqa: E402
from protoframe.generator.output import write_files  # noqa: E402
from protoframe.pipeline.capture_decode import (  # noqa: E402
    capture_schema,
    decode_batches,
    decode_parts,
    generated_spark,
)
from protoframe.runtime.codec.capture import (  # noqa: E402
    CaptureRecord,
    Direction,
    split_offsets,
    write_records,
)
from tests.support.generate import import_generated  # noqa: E402
from tests.support.pravega_frames import VECTORS as PRAVEGA_VECTORS  # noqa: E402
from tests.support.pulsar_frames import sample_wire_frames  # noqa: E402
from tests.support.spark_rows import DEMO_YAML  # noqa: E402
from tests.support.tubemq_commands import COMMANDS as TUBEMQ_COMMANDS  # noqa: E402
from tests.support.tubemq_commands import filled  # noqa: E402


def _raw_batch(records: list[CaptureRecord]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({
        "ts_ns": pa.array([r.timestamp_ns for r in records], pa.int64()),
        "direction": pa.array(["out" if r.direction else "in" for r in records]),
        "connection_id": pa.array([r.connection_id for r in records], pa.int64()),
        "frame": pa.array([r.frame for r in records], pa.binary()),
    })


def test_decode_batches_pulsar() -> None:
    wire = sample_wire_frames()
    corrupt = bytearray(wire[1])
    corrupt[-1] ^= 0xFF  # the payload no longer matches its crc32c
    records = [CaptureRecord(i, Direction(i % 2), 3, f) for i, f in
               enumerate([*wire, bytes(corrupt), b"\x00\x00\x00\x02\x00"])]
    (out,) = decode_batches("pulsar", "client", iter([_raw_batch(records)]))
    assert out.schema.names == capture_schema("pulsar").fieldNames()
    rows = out.to_pylist()
    assert [r["command_type"] for r in rows] == ["CONNECT", "SEND", "CONNECT", "SEND", None]
    assert [r["frame_size"] for r in rows] == [len(r.frame) for r in records]
    assert rows[0]["error"] is None and rows[0]["payload"] is None
    assert rows[1]["payload"]["data"] == b"hello"
    assert rows[1]["payload"]["metadata"]["producer_name"] == "p"
    assert rows[3]["error"].startswith("ChecksumFailure")  # decoded all the same
    assert rows[3]["command"]["send"]["sequence_id"] == 2
    assert rows[4]["error"] is not None and rows[4]["command"] is None
    decoded = [frames.Frame.decode(f) for f in wire]
    assert [pulsar_spark.FRAME.from_row(r) for r in rows[:3]] == decoded
    assert generated_spark("pulsar") is pulsar_spark


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    tmp = tmp_path_factory.mktemp("capture_demo")
    (tmp / "specs" / "demo").mkdir(parents=True)
    (tmp / "specs" / "demo" / "demo.yaml").write_text(DEMO_YAML)
    out = generate(tmp / "specs", "specs", ["demo"])
    write_files(tmp / "capture_demo_pkg", out.files, out.protocols)
    return import_generated(tmp, "demo.frames", "capture_demo_pkg")


def test_decode_batches_any_protocol(demo: ModuleType) -> None:
    wire = [demo.Frame(body=demo.Bye(reason="done")).encode(), b"\x00\x00\x00\x01\x07"]
    records = [CaptureRecord(1, Direction.IN, 9, f) for f in wire]
    (out,) = decode_batches("capture_demo_pkg.demo", "server", iter([_raw_batch(records)]))
    rows = out.to_pylist()
    assert [r["command_type"] for r in rows] == ["BYE", None]
    assert rows[0]["body"] == {"Hello": None, "Bye": {"reason": "done"}}
    assert rows[1]["error"].startswith("UnknownCommandTypeError")
    assert out.schema.names == capture_schema("capture_demo_pkg.demo").fieldNames()


def test_decode_batches_rejects_what_it_cannot_decode_with() -> None:
    with pytest.raises(ValueError, match="side"):
        next(decode_batches("pulsar", "peer", iter([])))
    with pytest.raises(ValueError, match="not a protocol name"):
        generated_spark("../etc")


def test_decode_parts_reads_and_decodes_file_ranges(tmp_path: Path) -> None:
    wire = sample_wire_frames()
    records = [CaptureRecord(i, Direction(i % 2), 1 + i % 3, wire[i % 3]) for i in range(50)]
    path = tmp_path / "c.pfcap"
    write_records(path, records)
    ranges = split_offsets(path, 4)
    parts = pa.RecordBatch.from_pydict({"path": [str(path)] * len(ranges),
                                        "start": [a for a, _ in ranges],
                                        "end": [b for _, b in ranges]})
    out = list(decode_parts("pulsar", "client", True, 7, iter([parts])))
    assert all(b.num_rows <= 7 for b in out)
    rows = [r for b in out for r in b.to_pylist()]
    assert [(r["ts_ns"], r["connection_id"], r["frame_size"]) for r in rows] == [
        (r.timestamp_ns, r.connection_id, len(r.frame)) for r in records]
    assert [r["direction"] for r in rows] == ["in", "out"] * 25
    assert [r["command_type"] for r in rows] == ["CONNECT", "SEND", "CONNECT"] * 16 + [
        "CONNECT", "SEND"]


def _damaged(wire: list[bytes]) -> list[bytes]:
    """Each frame cut short, with a byte flipped, and with a byte after it."""
    out = []
    for w in wire:
        flipped = bytearray(w)
        flipped[len(w) // 2] ^= 0x41
        out += [w[: len(w) - 1], bytes(flipped), w + b"\x00"]
    return out


def _pulsar_wire() -> list[bytes]:
    with_entry = frames.Frame(
        command=pulsar_api.BaseCommand(type_=pulsar_api.BaseCommand.Type.MESSAGE,
                                       message=pulsar_api.CommandMessage(
                                           consumer_id=1, message_id=pulsar_api.MessageIdData(
                                               ledgerId=3, entryId=4))),
        payload=frames.Payload(
            broker_entry=frames.BrokerEntry(metadata=pulsar_api.BrokerEntryMetadata(
                broker_timestamp=5, index=6)),
            metadata=pulsar_api.MessageMetadata(producer_name="p", sequence_id=7,
                                                publish_time=8),
            data=b"entry"))
    return [*sample_wire_frames(), with_entry.encode()]


def _tubemq_wire() -> list[bytes]:
    rng = random.Random(21)
    return [build(filled(cls, rng, 0.5), serial_no=i).encode()
            for i, (_, build, cls) in enumerate(TUBEMQ_COMMANDS)]


@pytest.mark.parametrize("protocol", ["pulsar", "pravega", "tubemq"])
def test_columnar_and_row_paths_agree_on_captures(tmp_path: Path, protocol: str) -> None:
    wire = {"pulsar": _pulsar_wire, "pravega": lambda: [w for w, _ in PRAVEGA_VECTORS],
            "tubemq": _tubemq_wire}[protocol]()
    wire = wire * 3 + _damaged(wire)
    records = [CaptureRecord(i, Direction(i % 2), 1 + i % 2, w) for i, w in enumerate(wire)]
    path = tmp_path / "c.pfcap"
    empty = tmp_path / "empty.pfcap"
    write_records(path, records)
    write_records(empty, [])
    parts = pa.RecordBatch.from_pydict({"path": [str(empty), str(path)], "start": [0, 0],
                                        "end": [empty.stat().st_size, path.stat().st_size]})
    got = list(decode_parts(protocol, "client", True, 8, iter([parts])))
    want = list(decode_parts(protocol, "client", True, 8, iter([parts]), columnar=False))
    assert len(got) == len(want) == -(-len(wire) // 8)
    for mine, theirs in zip(got, want, strict=True):
        assert mine.schema == theirs.schema
        assert mine.equals(theirs)
    rows = [r for b in got for r in b.to_pylist()]
    assert [r["frame_size"] for r in rows] == [len(w) for w in wire]
    assert any(r["error"] for r in rows) and any(r["error"] is None for r in rows)
    batch = _raw_batch(records)
    (via_raw,) = decode_batches(protocol, "client", iter([batch]))
    (rows_raw,) = decode_batches(protocol, "client", iter([batch]), columnar=False)
    assert via_raw.equals(rows_raw)
    assert via_raw.to_pylist() == rows
