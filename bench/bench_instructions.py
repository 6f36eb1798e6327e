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

Each operation runs ``ITERATIONS`` times in a child process under ``valgrind --tool=callgrind``;
one more child runs none. The difference divided by ``ITERATIONS`` is the cost of one
operation, the start-up and imports cancelled out. Needs valgrind (Debian's
``valgrind`` package); without it this prints how to install it and stops.
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

ITERATIONS = 2000
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Op:
    """One operation: a statement run in ``bench.bench_instructions_worker``'s namespace."""

    row: str
    column: str
    statement: str


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
)

_COLLECTED = re.compile(r"Collected : (\d+)")


def count(statement: str, iterations: int) -> int:
    """Instructions the worker process executes running ``statement`` ``iterations`` times."""
    env = dict(os.environ, PYTHONHASHSEED="0")
    result = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
         sys.executable, "-m", "bench.bench_instructions_worker", str(iterations), statement],
        capture_output=True, text=True, cwd=ROOT, env=env, check=False, timeout=600,
    )
    found = _COLLECTED.search(result.stderr)
    if result.returncode != 0 or found is None:
        raise RuntimeError(f"callgrind run failed ({result.returncode}): {result.stderr[-2000:]}")
    return int(found.group(1))




def main() -> None:
    if shutil.which("valgrind") is None:
        print("valgrind is not installed; on Debian or Ubuntu: sudo apt-get install valgrind")
        return
    print(f"instructions per operation (callgrind), {ITERATIONS} iterations less an empty run")
    print(f"our protobuf codec: {compiled.describe()}")
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        empty = pool.submit(count, "pass", 0)
        totals = list(pool.map(lambda op: count(op.statement, ITERATIONS), OPS))
    base = empty.result()
    rows: dict[str, dict[str, int]] = {}
    for op, total in zip(OPS, totals, strict=True):
        rows.setdefault(op.row, {})[op.column] = (total - base) // ITERATIONS
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
