"""The capture pipeline's decoding, columnar against the row path, in one process and in Spark.

A capture of N Pulsar SEND frames (N = 100,000 unless ``BENCH_CAPTURE_N`` says otherwise; the
frames of ``bench spark_decode``: command, MessageMetadata with properties, a 64-byte payload)
is written to a temporary directory and decoded into the rows of ``capture_schema("pulsar")``
two ways:

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
SAMPLE_N = 500
BATCH_ROWS = 10_000


def _write(path: Path, count: int, wire: list[bytes]) -> None:
    from protoframe.runtime.codec.capture import CaptureWriter, Direction

    with CaptureWriter(path, buffer_size=1 << 20) as writer:
        for i in range(count):
            writer.write(Direction.OUT, 1 + i % 4, wire[i % len(wire)],
                         1_700_000_000_000_000_000 + i)


def _in_process(path: Path) -> tuple[float, float]:
    import pyarrow as pa

    from protoframe.pipeline.capture_decode import decode_parts

    parts = pa.RecordBatch.from_pydict({"path": [str(path)], "start": [0],
                                        "end": [path.stat().st_size]})

    def decode(columnar: bool) -> list[Any]:
        return list(decode_parts("pulsar", "client", True, BATCH_ROWS, iter([parts]),
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


def _spark(full: Path, sample: Path) -> tuple[float, float] | str:
    from protoframe.pipeline.capture_decode import decode_captures
    from protoframe.pipeline.spark_session import JAVA_HINT, java_version, local_session

    if (java_version() or 0) < 17:
        return JAVA_HINT
    spark = local_session("protoframe-bench-capture-columnar")
    try:
        def frame(path: Path, columnar: bool) -> Any:
            return decode_captures(spark, str(path), protocol="pulsar", columnar=columnar)

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
    from bench.bench_spark_decode import DISTINCT, _frames

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="protoframe-capture-columnar-") as tmp:
        wire = _frames(DISTINCT)
        full, sample = Path(tmp) / "full.pfcap", Path(tmp) / "sample.pfcap"
        _write(full, N, wire)
        _write(sample, SAMPLE_N, wire)
        print(f"capture: {N:,} Pulsar SEND frames of {len(wire[0])} bytes, "
              f"{full.stat().st_size / 1e6:.1f} MB; batches of {BATCH_ROWS:,}")
        print(f"{'decoding':<46}{'columnar s':>11}{'row path s':>11}{'ratio':>8}")
        columnar_s, rows_s = _in_process(full)
        print(f"{'one process (decode_parts, reading included)':<46}{columnar_s:>11.2f}"
              f"{rows_s:>11.2f}{rows_s / columnar_s:>7.2f}x")
        load = os.getloadavg()
        spark = _spark(full, sample)
        if isinstance(spark, str):
            print(f"{'Spark local[2] (decode_captures -> noop)':<46}  skipped: {spark}")
        else:
            print(f"{'Spark local[2] (decode_captures -> noop)':<46}{spark[0]:>11.2f}"
                  f"{spark[1]:>11.2f}{spark[1] / spark[0]:>7.2f}x")
    print(f"load average {' '.join(f'{x:.2f}' for x in load)} (after the in-process runs), "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} (at the end); "
          f"{os.cpu_count()} CPUs; total {time.perf_counter() - started:.0f} s")


def _expect(condition: bool, message: str) -> None:
    """An assertion that ``python -O`` does not remove."""
    if not condition:
        raise AssertionError(message)


if __name__ == "__main__":
    main()
