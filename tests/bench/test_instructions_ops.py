"""The statements ``bench instructions`` counts: each runs in its worker's namespace, and the
rows that set ours beside the hand-written ``struct`` code do the same work (the same values
decoded, the same bytes encoded), so their instruction ratio means something."""

from __future__ import annotations

from typing import Any

import pytest

from bench import bench_instructions_worker as worker
from bench.bench_instructions import OPS
from bench.frames_protocols import tank_batch_values


@pytest.mark.parametrize("statement", sorted({op.statement for op in OPS}))
def test_every_statement_runs_in_the_worker(statement: str) -> None:
    if statement.startswith("capture_"):  # the capture rows need the spark extra
        pytest.importorskip("pyarrow")
        pytest.importorskip("pyspark")
    exec(compile(statement, "<bench>", "eval"), vars(worker))  # noqa: S102 (the bench's own)


def _value(statement: str) -> Any:
    return eval(compile(statement, "<bench>", "eval"), vars(worker))  # noqa: S307


def test_the_tank_rows_compare_the_same_work() -> None:
    assert _value("tank_ours_decode(TANK_WIRE)") == _value("tank_hand_decode(TANK_WIRE)")
    assert _value("tank_ours_encode()") == _value("tank_hand_encode()") == worker.TANK_WIRE
    assert len(worker.TANK_WIRE) == 210
    assert tank_batch_values(worker.TANK_BUNDLE) == _value("tank_hand_batch(TANK_BUNDLE)")
    assert len(_value("tank_hand_batch(TANK_BUNDLE)")) == 100
    assert len(worker.TANK_BUNDLE) == 11382


def test_the_tubemq_rows_compare_the_same_work() -> None:
    assert _value("tubemq_ours_decode(TUBEMQ_WIRE)") == _value("tubemq_hand_decode(TUBEMQ_WIRE)")
    assert _value("tubemq_ours_encode()") == _value("tubemq_hand_encode()") == worker.TUBEMQ_WIRE
    assert len(worker.TUBEMQ_WIRE) == 239


def test_the_capture_rows_compare_the_same_work() -> None:
    pytest.importorskip("pyarrow")
    pytest.importorskip("pyspark")
    columnar, rows = _value("capture_columnar()"), _value("capture_rows()")
    assert all(a.equals(b) for a, b in zip(columnar, rows, strict=True))
    assert len(columnar.frames) == worker.CAPTURE_FRAMES
    assert columnar.errors.null_count == worker.CAPTURE_FRAMES  # every frame decoded
