"""The capture pipeline's decoding, columnar against the row path, in one process and in Spark.

For each protocol (``BENCH_CAPTURE_PROTOCOLS``, comma-separated; "pulsar,pravega,tubemq" by
default), a
capture of N frames (N = 100,000 unless ``BENCH_CAPTURE_N`` says otherwise) is written to a
temporary directory and decoded into the rows of ``capture_schema(protocol)`` two ways. The
frames: for Pulsar, the SEND frames of ``bench spark_decode`` (command, MessageMetadata with
properties, a 64-byte payload); for Pravega, an append and read session's mix
(``pravega_frames``: APPEND_BLOCK_END with 64 bytes of events, DATA_APPENDED, READ_SEGMENT,
SEGMENT_READ with 64 bytes, in turn); for TubeMQ, a producer's SEND_MESSAGE_P2B requests (the
239-byte frame of ``bench frames``) and their SEND_MESSAGE_B2P responses, in turn
(``tubemq_frames``). The two ways (``BENCH_CAPTURE_SPARK=0`` leaves Spark
out):

* columnar: each batch of frames straight into the Arrow struct column of the frame, in C
  (``runtime/spark/columnar_frames.py``, the default of ``decode_captures``);
* row path: ``decode_frame`` per frame, then the generated ``FRAME.to_arrow``
  (``decode_captures(..., columnar=False)``), which is what the pipeline did before.

In one process: ``pipeline.capture_decode.decode_parts`` over the whole file (reading
included), best of three. Through Spark: ``decode_captures`` in ``local[2]`` written to the
``noop`` sink, after a warm-up run of each; skipped with the reason without Java 17+. Both ways
must give equal batches (in one process) and equal rows (a sample in Spark) before anything is
timed. Wall-clock times on a shared machine move with its load (printed alongside); the
instruction counts of ``bench instructions`` are the stable measure.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

N = int(os.environ.get("BENCH_CAPTURE_N", "100000"))
PROTOCOLS = os.environ.get("BENCH_CAPTURE_PROTOCOLS", "pulsar,pravega,tubemq").split(",")
SPARK = os.environ.get("BENCH_CAPTURE_SPARK", "1") != "0"  # "0": the one-process rows only
SAMPLE_N = 500
BATCH_ROWS = 10_000


def _write(path: Path, count: int, wire: list[bytes]) -> None:
    from protoframe.runtime.codec.capture import CaptureWriter, Direction

    with CaptureWriter(path, buffer_size=1 << 20) as writer:
        for i in range(count):
            writer.write(Direction.OUT, 1 + i % 4, wire[i % len(wire)],
                         1_700_000_000_000_000_000 + i)


def pravega_frames(count: int) -> list[bytes]:
    """``count`` Pravega frames of a writer's and a reader's session, four commands in turn."""
    from uuid import UUID

    from protoframe.generated.pravega import frames as pv

    writer = UUID("5f0c3a3e-7d2b-4c1e-9a57-2f4d1b8e6c90")
    segment = "examples/orders/0.#epoch.0"
    out = []
    for i in range(count):
        data = pv.EventRun(events=[pv.Event(data=bytes([i % 251]) * 56)]).encode()
        body: Any
        match i % 4:
            case 0:
                body = pv.AppendBlockEnd(writer_id=writer, size_of_whole_events=len(data),
                                         data=data, num_events=1, last_event_number=i,
                                         request_id=i)
            case 1:
                body = pv.DataAppended(writer_id=writer, event_number=i,
                                       previous_event_number=i - 1, request_id=i,
                                       current_segment_write_offset=64 * i)
            case 2:
                body = pv.ReadSegment(segment=segment, offset=64 * i, suggested_length=1 << 20,
                                      delegation_token="", request_id=i)
            case _:
                body = pv.SegmentRead(segment=segment, offset=64 * i, at_tail=i % 8 == 3,
                                      end_of_segment=False, data=data, request_id=i)
        out.append(pv.Frame(body=body).encode())
    return out


def tubemq_frames(count: int) -> list[bytes]:
    """``count`` TubeMQ frames of a producer's session: requests and responses in turn."""
    from bench.frames_protocols import tubemq_ours_encode
    from protoframe.generated.tubemq import broker_service, frames, machines

    request = frames.Frame.decode(tubemq_ours_encode())
    out = []
    for i in range(count):
        if i % 2 == 0:
            request.serial_no = i
            out.append(request.encode())
        else:
            body = broker_service.SendMessageResponseB2P(
                success=True, errCode=200, errMsg="OK", messageId=1_000_000 + i,
                appendTime=1_700_000_000_000 + i, appendOffset=64 * i)
            out.append(machines.frame_of_send_message_b2p(body, serial_no=i - 1).encode())
    return out


def frames_of(protocol: str, count: int) -> list[bytes]:
    """The benchmark's ``count`` frames of ``protocol`` (see the module docstring)."""
    if protocol == "pravega":
        return pravega_frames(count)
    if protocol == "tubemq":
        return tubemq_frames(count)
    from bench.bench_spark_decode import _frames

    return _frames(count)


def _in_process(protocol: str, path: Path) -> tuple[float, float]:
    import pyarrow as pa

    from protoframe.pipeline.capture_decode import decode_parts

    parts = pa.RecordBatch.from_pydict({"path": [str(path)], "start": [0],
                                        "end": [path.stat().st_size]})

    def decode(columnar: bool) -> list[Any]:
        return list(decode_parts(protocol, "client", True, BATCH_ROWS, iter([parts]),
                                 columnar=columnar))

    mine, theirs = decode(True), decode(False)
    _expect(len(mine) == len(theirs) and all(
        a.equals(b) for a, b in zip(mine, theirs, strict=True)), "the two paths disagree")
    del mine, theirs

    def best(columnar: bool) -> float:
        times = []
        for _ in range(3):
            t = time.perf_counter()
            decode(columnar)
            times.append(time.perf_counter() - t)
        return min(times)

    return best(True), best(False)


def _spark(protocol: str, full: Path, sample: Path) -> tuple[float, float] | str:
    from protoframe.pipeline.capture_decode import decode_captures
    from protoframe.pipeline.spark_session import JAVA_HINT, java_version, local_session

    if (java_version() or 0) < 17:
        return JAVA_HINT
    spark = local_session("protoframe-bench-capture-columnar")
    try:
        def frame(path: Path, columnar: bool) -> Any:
            return decode_captures(spark, str(path), protocol=protocol, columnar=columnar)

        order = ["connection_id", "ts_ns"]
        _expect(frame(sample, True).orderBy(*order).collect()
                == frame(sample, False).orderBy(*order).collect(), "the two paths disagree")

        def run(path: Path, columnar: bool) -> float:
            t = time.perf_counter()
            frame(path, columnar).write.format("noop").mode("overwrite").save()
            return time.perf_counter() - t

        run(sample, True)
        run(sample, False)
        return run(full, True), run(full, False)
    finally:
        spark.stop()


def main() -> None:
    from bench.bench_spark_decode import DISTINCT

    started = time.perf_counter()
    print(f"{'decoding':<58}{'columnar s':>11}{'row path s':>11}{'ratio':>8}")
    loads = []
    for protocol in PROTOCOLS:
        with tempfile.TemporaryDirectory(prefix="protoframe-capture-columnar-") as tmp:
            wire = frames_of(protocol, DISTINCT)
            full, sample = Path(tmp) / "full.pfcap", Path(tmp) / "sample.pfcap"
            _write(full, N, wire)
            _write(sample, SAMPLE_N, wire)
            sizes = sorted({len(w) for w in wire})
            print(f"{protocol}: {N:,} frames of {sizes[0]}-{sizes[-1]} bytes, "
                  f"{full.stat().st_size / 1e6:.1f} MB; batches of {BATCH_ROWS:,}")
            columnar_s, rows_s = _in_process(protocol, full)
            print(f"{'  one process (decode_parts, reading included)':<58}{columnar_s:>11.2f}"
                  f"{rows_s:>11.2f}{rows_s / columnar_s:>7.2f}x")
            loads.append(os.getloadavg())
            spark = _spark(protocol, full, sample) if SPARK else "BENCH_CAPTURE_SPARK=0"
            if isinstance(spark, str):
                print(f"{'  Spark local[2] (decode_captures -> noop)':<58}  skipped: {spark}")
            else:
                print(f"{'  Spark local[2] (decode_captures -> noop)':<58}{spark[0]:>11.2f}"
                      f"{spark[1]:>11.2f}{spark[1] / spark[0]:>7.2f}x")
    print("load average "
          + "; ".join(" ".join(f"{x:.2f}" for x in load) for load in loads)
          + " (after each protocol's in-process runs), "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} (at the end); "
          f"{os.cpu_count()} CPUs; total {time.perf_counter() - started:.0f} s")


def _expect(condition: bool, message: str) -> None:
    """An assertion that ``python -O`` does not remove."""
    if not condition:
        raise AssertionError(message)


if __name__ == "__main__":
    main()
