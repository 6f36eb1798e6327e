"""Import time of the generated Pulsar bindings against protoc's ``PulsarApi_pb2``.

Each import runs in a fresh interpreter (``python -c``), timed inside it with
``time.perf_counter`` around the one ``import`` statement, so the interpreter's own start-up
is not counted but everything the module pulls in is (protoframe's runtime, or the protobuf
runtime and its C extension). Bytecode is cached, as in a user's installed environment: the
first run of each compiles into a private ``PYTHONPYCACHEPREFIX`` and is not counted.

Rows: ``ours`` (``protoframe.generated.pulsar.pulsar_api``), ``ours, runtime only`` (what
importing ``protoframe.runtime``'s codec support costs on its own), ``protoc upb``
(``PulsarApi_pb2`` on the official runtime's C backend) and ``protobuf runtime only``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.bench_protobuf import REPO, _protoc

RUNS = 21

_TIMER = ("import time; t = time.perf_counter(); import {module}; "
          "print(time.perf_counter() - t)")


def _time_import(module: str, path: Path, cache: Path) -> list[float]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(cache)
    env["PYTHONPATH"] = os.pathsep.join([str(path), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep)
    code = _TIMER.format(module=module)
    out = []
    for i in range(RUNS + 1):
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, check=True, timeout=120)
        if i:  # the first run compiles the bytecode
            out.append(float(done.stdout.strip()))
    return out


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="protoframe-bench-imports-") as tmp_name:
        tmp = Path(tmp_name)
        pb2 = tmp / "pb2"
        pb2.mkdir()
        _protoc([f"--python_out={pb2}"], cwd=tmp)
        cache = tmp / "pycache"
        rows = [
            ("ours", "protoframe.generated.pulsar.pulsar_api", REPO),
            ("ours, runtime only", "protoframe.runtime.codec.protowire", REPO),
            ("protoc upb", "PulsarApi_pb2", pb2),
            ("protobuf runtime only", "google.protobuf.internal.builder", pb2),
        ]
        print(f"import time, fresh interpreter, bytecode cached; {RUNS} runs each (ms)")
        print(f"{'module':<24}{'median':>9}{'min':>9}{'max':>9}")
        medians = {}
        for label, module, path in rows:
            times = [t * 1000 for t in _time_import(module, path, cache)]
            medians[label] = statistics.median(times)
            print(f"{label:<24}{medians[label]:>9.1f}{min(times):>9.1f}{max(times):>9.1f}")
        print(f"ours / protoc upb (median): {medians['ours'] / medians['protoc upb']:.2f}x")


if __name__ == "__main__":
    main()
