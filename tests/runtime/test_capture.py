"""The capture format (runtime/codec/capture.py): the writer, the reader and the record-aligned
splits, and the taps that cut byte streams into frames.

None of it needs pyarrow or pyspark; tests/pipeline/test_capture_decode.py tests the decoding
step of the Spark pipeline on Arrow batches, and tests/pipeline/test_capture_spark.py inside
Spark.
"""

from __future__ import annotations

import io
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protoframe.generated.pulsar import frames, pulsar_api
from protoframe.runtime.codec.capture import (
    HEADER_SIZE,
    MAGIC,
    CaptureFormatError,
    CaptureRecord,
    CaptureWriter,
    Direction,
    capture_bytes,
    read_columns,
    read_records,
    split_offsets,
    write_records,
)
from protoframe.runtime.errors import FrameTooLargeError, TruncatedError
from tests.support.examples import scaled
from tests.support.pulsar_frames import sample_wire_frames

Type = pulsar_api.BaseCommand.Type

RECORDS = st.lists(st.builds(
    CaptureRecord,
    timestamp_ns=st.integers(0, 2**63 - 1),
    direction=st.sampled_from(Direction),
    connection_id=st.integers(0, 2**32 - 1),
    frame=st.binary(max_size=300),
), max_size=40)


def test_layout_is_the_documented_one() -> None:
    data = capture_bytes([CaptureRecord(0x0102030405060708, Direction.OUT, 7, b"abc")])
    assert data == MAGIC + bytes.fromhex("0102030405060708 01 00000007 00000003") + b"abc"
    assert MAGIC == b"PFCAP\x01\r\n" and HEADER_SIZE == 17


@settings(max_examples=scaled(60), deadline=None)
@given(records=RECORDS)
def test_write_read_round_trip(records: list[CaptureRecord]) -> None:
    data = capture_bytes(records)
    assert list(read_records(io.BytesIO(data))) == records
    columns = list(read_columns(io.BytesIO(data), batch_rows=7))
    assert sum(len(ts) for ts, _, _, _ in columns) == len(records)
    assert all(len(ts) <= 7 for ts, _, _, _ in columns)


@settings(max_examples=scaled(40), deadline=None)
@given(records=RECORDS, parts=st.integers(1, 9))
def test_splits_are_record_aligned_and_cover_the_file(tmp_path_factory: pytest.TempPathFactory,
                                                      records: list[CaptureRecord],
                                                      parts: int) -> None:
    path = tmp_path_factory.mktemp("split") / "c.pfcap"
    write_records(path, records)
    ranges = split_offsets(path, parts)
    assert ranges[0][0] == 0 and ranges[-1][1] == path.stat().st_size
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    assert len(ranges) <= max(1, parts) + 1
    assert [r for start, end in ranges for r in read_records(path, start, end)] == records


def test_a_big_frame_crosses_read_chunks(tmp_path: Path) -> None:
    records = [CaptureRecord(i, Direction.IN, 1, bytes([i]) * (3 << 20)) for i in range(3)]
    path = tmp_path / "big.pfcap"
    write_records(path, records)
    assert list(read_records(path)) == records
    assert [r for s, e in split_offsets(path, 3) for r in read_records(path, s, e)] == records


def test_not_a_capture_file() -> None:
    with pytest.raises(CaptureFormatError, match="not a capture file"):
        list(read_records(io.BytesIO(b"PCAP....")))
    bad = MAGIC + bytes.fromhex("0000000000000001 07 00000001 00000000")
    with pytest.raises(CaptureFormatError, match="bad record header"):
        list(read_records(io.BytesIO(bad)))


def test_a_cut_file_is_an_error_unless_not_strict() -> None:
    records = [CaptureRecord(1, Direction.IN, 1, b"one"), CaptureRecord(2, Direction.OUT, 1, b"2")]
    data = capture_bytes(records)
    for cut in (1, 5, HEADER_SIZE):  # the last record is HEADER_SIZE + 1 bytes
        with pytest.raises(TruncatedError, match="cut short"):
            list(read_records(io.BytesIO(data[:-cut])))
        assert list(read_records(io.BytesIO(data[:-cut]), strict=False)) == records[:1]


def test_writer_rejects_what_the_format_cannot_hold() -> None:
    writer = CaptureWriter(io.BytesIO())
    for args in ((2, 1, b""), (0, 2**32, b""), (0, -1, b"")):
        with pytest.raises(ValueError):
            writer.write(*args)
    with pytest.raises(ValueError, match="timestamp"):
        writer.write(0, 1, b"", timestamp_ns=2**63)
    writer.close()
    with pytest.raises(ValueError, match="closed"):
        writer.write(0, 1, b"")


def test_writer_is_safe_across_threads(tmp_path: Path) -> None:
    path = tmp_path / "threads.pfcap"
    with CaptureWriter(path) as writer:
        def run(conn: int) -> None:
            for i in range(300):
                writer.write(i % 2, conn, conn.to_bytes(4, "big") * (i % 17), timestamp_ns=i)

        threads = [threading.Thread(target=run, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    records = list(read_records(path))
    assert len(records) == 8 * 300 == writer.records
    for r in records:
        assert r.frame == r.connection_id.to_bytes(4, "big") * (r.timestamp_ns % 17)


@settings(max_examples=scaled(40), deadline=None)
@given(cuts=st.lists(st.integers(0, 300), max_size=8))
def test_tap_cuts_a_byte_stream_into_frames(cuts: list[int]) -> None:
    wire = sample_wire_frames()
    stream = b"".join(wire)
    out = io.BytesIO()
    writer = CaptureWriter(out, clock=lambda: 5)
    tap = writer.connection(frames.frame_length)
    other = writer.connection()
    positions = sorted({0, len(stream), *(min(c, len(stream)) for c in cuts)})
    recorded = 0
    for start, end in zip(positions, positions[1:], strict=False):
        recorded += tap.received_bytes(stream[start:end])
    other.sent(b"raw")
    writer.flush()
    records = list(read_records(io.BytesIO(out.getvalue())))
    assert recorded == len(wire)
    assert [r.frame for r in records[:-1]] == wire
    assert {r.connection_id for r in records[:-1]} == {tap.connection_id}
    assert records[-1] == CaptureRecord(5, Direction.OUT, other.connection_id, b"raw")
    assert tap.connection_id != other.connection_id


def test_tap_refuses_an_oversize_frame() -> None:
    tap = CaptureWriter(io.BytesIO()).connection(frames.frame_length, max_frame_size=64)
    with pytest.raises(FrameTooLargeError):
        tap.sent_bytes((1000).to_bytes(4, "big") + b"x")
    with pytest.raises(ValueError, match="no frame_length"):
        CaptureWriter(io.BytesIO()).connection().sent_bytes(b"x")
