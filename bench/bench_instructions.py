"""Instructions per operation, counted by valgrind's callgrind: the frame and protobuf cases of
``bench frames`` and ``bench protobuf``, ours beside the hand-written ``struct`` code and, for
the whole frame, compiled ``construct``.

Wall-clock cells on a shared two-core machine move by 20-30% between runs, which hides changes
of a few percent. Callgrind counts the machine instructions the process executes instead: the
same code gives the same count to within 0.2%, whatever else the machine is doing. So
this is the measure to compare two versions of the generated code with; the timed benchmarks
stay the measure of speed (instructions are not all equally expensive: ours does more
allocations and branchy interpreter work per instruction than the ``struct`` code, so its
time ratio runs above its instruction ratio).

Each operation runs in two child processes under ``valgrind --tool=callgrind``: one runs the
statement ``LOW`` times, the other ``HIGH`` times, with the same argument lengths. The
difference divided by ``HIGH - LOW`` is the cost of one operation: start-up, imports and
everything the first calls do once (caches filled, lazy imports, specialisation) cancel out,
because both processes do them. Subtracting a separate empty run instead left those one-off
costs in and moved rows by up to 30% between runs; two paddings of the environment give the
same count to the instruction with this method. Needs valgrind (Debian's ``valgrind``
package); without it this prints how to install it and stops.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from protoframe.runtime.codec import compiled

LOW = 1000
HIGH = 3000
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Op:
    """One operation: a statement run in ``bench.bench_instructions_worker``'s namespace."""

    row: str
    column: str
    statement: str
    low: int = LOW  # runs of the two processes (fewer for operations of millions)
    high: int = HIGH


OPS: tuple[Op, ...] = (
    Op("Frame build+encode [112 B]", "ours", "ours_encode()"),
    Op("Frame build+encode [112 B]", "struct", "struct_encode()"),
    Op("Frame build+encode [112 B]", "construct", "construct_encode()"),
    Op("Frame encode, already built", "ours", "BUILT.encode()"),
    Op("Frame encode, already built", "struct", "struct_encode()"),
    Op("Frame encode, already built", "construct", "construct_encode()"),
    Op("Frame decode+read [112 B]", "ours", "ours_decode(WIRE)"),
    Op("Frame decode+read [112 B]", "struct", "struct_decode(WIRE)"),
    Op("Frame decode+read [112 B]", "construct", "construct_decode(WIRE)"),
    Op("  BaseCommand(SEND) build", "ours", "build_send_command()"),
    Op("  BaseCommand(SEND) encode", "ours", "SEND_COMMAND.encode()"),
    Op("  MessageMetadata build", "ours", "build_metadata()"),
    Op("  MessageMetadata encode", "ours", "METADATA.encode()"),
    Op("  MessageMetadata decode", "ours", "pb.MessageMetadata.decode(METADATA_BYTES)"),
    # The decode+read cells of `bench protobuf` (decode, then read every set field).
    Op("  BaseCommand(SEND) decode+read", "ours", "read_send(WIRE_SEND)"),
    Op("  BaseCommand(MESSAGE) decode+read", "ours", "read_message(WIRE_MESSAGE)"),
    Op("  BaseCommand(ACK, 1 id) decode+read", "ours", "read_ack(WIRE_ACK)"),
    Op("  MessageMetadata(3 props) decode+read", "ours", "read_metadata(WIRE_METADATA)"),
    Op("  SingleMessageMetadata decode+read", "ours", "read_single(WIRE_SINGLE)"),
    Op("Pravega APPEND_BLOCK_END decode+read [216 B]", "ours",
       "pravega_ours_decode(PRAVEGA_WIRE)"),
    Op("Pravega APPEND_BLOCK_END decode+read [216 B]", "struct",
       "pravega_hand_decode(PRAVEGA_WIRE)"),
    Op("Pravega APPEND_BLOCK_END build+encode [216 B]", "ours", "pravega_ours_encode()"),
    Op("Pravega APPEND_BLOCK_END build+encode [216 B]", "struct", "pravega_hand_encode()"),
    Op("Pravega EventRun.decode, 100 events [10800 B]", "ours", "EventRun.decode(PRAVEGA_RUN)"),
    Op("Pravega EventRun.decode, 100 events [10800 B]", "struct",
       "pravega_hand_batch(PRAVEGA_RUN)"),
    Op("TANK PRODUCE decode+read [210 B]", "ours", "tank_ours_decode(TANK_WIRE)"),
    Op("TANK PRODUCE decode+read [210 B]", "struct", "tank_hand_decode(TANK_WIRE)"),
    Op("TANK PRODUCE build+encode [210 B]", "ours", "tank_ours_encode()"),
    Op("TANK PRODUCE build+encode [210 B]", "struct", "tank_hand_encode()"),
    Op("TANK CONSUME response decode+read [86 B]", "ours",
       "tank_consume_ours_decode(TANK_CONSUME_WIRE)"),
    Op("TANK CONSUME response decode+read [86 B]", "struct",
       "tank_consume_hand_decode(TANK_CONSUME_WIRE)"),
    Op("TANK CONSUME response build+encode [86 B]", "ours", "tank_consume_ours_encode()"),
    Op("TANK CONSUME response build+encode [86 B]", "struct", "tank_consume_hand_encode()"),
    Op("TANK Bundle.decode, 100 keyed msgs [11382 B]", "ours", "Bundle.decode(TANK_BUNDLE)"),
    Op("TANK Bundle.decode, 100 keyed msgs [11382 B]", "struct",
       "tank_hand_batch(TANK_BUNDLE)"),
    Op("TubeMQ SEND_MESSAGE_P2B decode+read [239 B]", "ours", "tubemq_ours_decode(TUBEMQ_WIRE)"),
    Op("TubeMQ SEND_MESSAGE_P2B decode+read [239 B]", "struct",
       "tubemq_hand_decode(TUBEMQ_WIRE)"),
    Op("TubeMQ SEND_MESSAGE_P2B build+encode [239 B]", "ours", "tubemq_ours_encode()"),
    Op("TubeMQ SEND_MESSAGE_P2B build+encode [239 B]", "struct", "tubemq_hand_encode()"),
    # The capture pipeline's decoding of a batch (pipeline/capture_decode.py): "struct" here
    # is the row path, the generated decode_frame per frame then FRAME.to_arrow.
    Op("Capture batch, 1000 Pulsar SEND frames -> Arrow", "ours", "capture_columnar()", 1, 3),
    Op("Capture batch, 1000 Pulsar SEND frames -> Arrow", "struct", "capture_rows()", 1, 3),
    Op("Capture batch, 1000 Pravega frames (4 commands) -> Arrow", "ours",
       "capture_columnar('pravega')", 1, 3),
    Op("Capture batch, 1000 Pravega frames (4 commands) -> Arrow", "struct",
       "capture_rows('pravega')", 1, 3),
    Op("Capture batch, 1000 TubeMQ SEND_MESSAGE frames (P2B, B2P) -> Arrow", "ours",
       "capture_columnar('tubemq')", 1, 3),
    Op("Capture batch, 1000 TubeMQ SEND_MESSAGE frames (P2B, B2P) -> Arrow", "struct",
       "capture_rows('tubemq')", 1, 3),
    Op("Pulsar Batch.decode, 100 msgs, payload_size only [10600 B]", "ours",
       "Batch.decode(PULSAR_BATCH)"),
    Op("Pulsar Batch.decode, 100 msgs, payload_size only [10600 B]", "struct",
       "struct_batch_decode(PULSAR_BATCH)"),
    Op("Pulsar Batch.decode, 100 msgs, + 1 property [13600 B]", "ours",
       "Batch.decode(PULSAR_BATCH_PROPERTY)"),
    Op("Pulsar Batch.decode, 100 msgs, + 1 property [13600 B]", "struct",
       "struct_batch_decode(PULSAR_BATCH_PROPERTY)"),
    Op("MariaDB row packet decode+read [48 B]", "ours", "mariadb_ours_decode(MARIADB_WIRE)"),
    Op("MariaDB row packet decode+read [48 B]", "struct", "mariadb_hand_decode(MARIADB_WIRE)"),
    Op("MariaDB row packet build+encode [48 B]", "ours", "mariadb_ours_encode()"),
    Op("MariaDB row packet build+encode [48 B]", "struct", "mariadb_hand_encode()"),
    Op("AMQP basic.publish + header decode+read [100 B]", "ours", "amqp_ours_decode(AMQP_WIRE)"),
    Op("AMQP basic.publish + header decode+read [100 B]", "struct",
       "amqp_hand_decode(AMQP_WIRE)"),
    Op("AMQP basic.publish + header build+encode [100 B]", "ours", "amqp_ours_encode()"),
    Op("AMQP basic.publish + header build+encode [100 B]", "struct", "amqp_hand_encode()"),
    Op("WebSocket masked text decode+read [131 B]", "ours", "ws_ours_decode(WS_WIRE_125)"),
    Op("WebSocket masked text decode+read [131 B]", "struct", "ws_hand_decode(WS_WIRE_125)"),
    Op("WebSocket masked text build+encode [131 B]", "ours", "ws125_ours_encode()"),
    Op("WebSocket masked text build+encode [131 B]", "struct", "ws125_hand_encode()"),
    Op("WebSocket masked text, 16-bit length decode+read [308 B]", "ours",
       "ws_ours_decode(WS_WIRE_300)"),
    Op("WebSocket masked text, 16-bit length decode+read [308 B]", "struct",
       "ws_hand_decode(WS_WIRE_300)"),
    Op("WebSocket masked text, 16-bit length build+encode [308 B]", "ours",
       "ws300_ours_encode()"),
    Op("WebSocket masked text, 16-bit length build+encode [308 B]", "struct",
       "ws300_hand_encode()"),
)

_COLLECTED = re.compile(r"Collected : (\d+)")


def count(statement: str, iterations: int) -> int:
    """Instructions the worker process executes running ``statement`` ``iterations`` times."""
    env = dict(os.environ, PYTHONHASHSEED="0")
    # The count is zero-padded so both runs of one statement have argv of the same length.
    result = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
         sys.executable, "-m", "bench.bench_instructions_worker", f"{iterations:06d}",
         statement],
        capture_output=True, text=True, cwd=ROOT, env=env, check=False, timeout=600,
    )
    found = _COLLECTED.search(result.stderr)
    if result.returncode != 0 or found is None:
        raise RuntimeError(f"callgrind run failed ({result.returncode}): {result.stderr[-2000:]}")
    return int(found.group(1))


def per_operation(statement: str, low: int = LOW, high: int = HIGH) -> int:
    """Instructions of one run of ``statement``: the slope between ``low`` and ``high`` runs."""
    return (count(statement, high) - count(statement, low)) // (high - low)


def main() -> None:
    if shutil.which("valgrind") is None:
        print("valgrind is not installed; on Debian or Ubuntu: sudo apt-get install valgrind")
        return
    print(f"instructions per operation (callgrind): ({HIGH} runs - {LOW} runs) / {HIGH - LOW}")
    print(f"our protobuf codec: {compiled.describe()}")
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        costs = list(pool.map(lambda op: per_operation(op.statement, op.low, op.high), OPS))
    rows: dict[str, dict[str, int]] = {}
    for op, cost in zip(OPS, costs, strict=True):
        rows.setdefault(op.row, {})[op.column] = cost
    width = max(len(r) for r in rows) + 2
    print(f"{'operation':<{width}} {'ours':>10} {'struct':>10} {'construct':>10} "
          f"{'ours/struct':>12} {'construct/ours':>15}")
    print("-" * (width + 62))
    for row, cols in rows.items():
        ours, hand, con = cols["ours"], cols.get("struct"), cols.get("construct")
        ratio = "" if hand is None else f"{ours / hand:.2f}x"
        con_ratio = "" if con is None else f"{con / ours:.2f}x"
        hand_text = "" if hand is None else f"{hand:,}"
        con_text = "" if con is None else f"{con:,}"
        print(f"{row:<{width}} {ours:>10,} {hand_text:>10} {con_text:>10} {ratio:>12} "
              f"{con_ratio:>15}")
    print("(construct: its compiled framing and the struct column's protobuf helpers, as in\n"
          " `bench frames`; instruction counts are not times, see docs/performance.md)")


if __name__ == "__main__":
    main()
