"""The official protobuf runtime's classes for our .proto files, compiled on demand.

Tests use them as the reference implementation: protoc's own Python output run by upb.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path
from types import ModuleType

from tests.support.paths import ROOT


@cache
def official_module(protocol: str, proto_file: str) -> ModuleType:
    """Compile ``specs/<protocol>/<proto_file>`` with protoc's Python plugin and import it."""
    out = Path(tempfile.mkdtemp(prefix=f"protoframe-official-{protocol}-"))
    spec_dir = ROOT / "specs" / protocol
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{spec_dir}", f"--python_out={out}",
         str(spec_dir / proto_file)],
        check=True,
    )
    name = Path(proto_file).stem + "_pb2"
    if str(out) not in sys.path:
        sys.path.insert(0, str(out))
    spec = importlib.util.spec_from_file_location(name, out / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
