"""Run the benchmarks: ``python -m bench`` runs them all in turn, ``python -m bench NAME`` one.

``real_pulsar`` starts an Apache Pulsar standalone (about a minute) and prints ``skipped:`` with
the reason when it cannot (no Java 17+, or the jars not fetched: ``make pulsar``).

To add a benchmark, create ``bench/bench_<name>.py`` with a ``main() -> None`` that prints its
results, and add ``<name>`` to ``BENCHMARKS``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time

# Short names, in the order they run; the module for NAME is bench.bench_NAME.
BENCHMARKS: tuple[str, ...] = (
    "protobuf", "imports", "frames", "instructions", "spark_decode", "capture_columnar",
    "client", "real_pulsar",
    "spark_source", "broker", "broker_abuse", "broker_reads",
)


def _module_name(name: str) -> str:
    return f"bench.bench_{name}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Run protoframe's benchmarks (all of them when no NAME is given).",
    )
    parser.add_argument(
        "names", nargs="*", metavar="NAME",
        help=f"benchmark to run, one of: {', '.join(BENCHMARKS)}",
    )
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(BENCHMARKS))
        return 0
    # Accept "protobuf" as well as "bench_protobuf" or "bench.bench_protobuf".
    names = [n.removeprefix("bench.").removeprefix("bench_") for n in args.names]
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)} "
                     f"(have: {', '.join(BENCHMARKS)})")
    for name in names or BENCHMARKS:
        module = importlib.import_module(_module_name(name))
        run = getattr(module, "main", None)
        if not callable(run):
            print(f"{_module_name(name)} defines no main()", file=sys.stderr)
            return 2
        print(f"=== bench {name} ===", flush=True)
        started = time.perf_counter()
        run()
        print(f"=== bench {name}: {time.perf_counter() - started:.1f} s ===\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
