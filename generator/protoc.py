"""Runs protoc (from grpcio-tools) to turn .proto files into descriptors.

The generator never parses .proto text itself: protoc is the reference parser, and its
``FileDescriptorSet`` with source info carries everything the IR needs, comments included.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from google.protobuf import descriptor_pb2

from protoframe.generator.errors import SpecError, SpecErrors

_PROTOC_LOCATION = re.compile(r"^(?P<file>[^:\n]+\.proto):(?P<line>\d+):(?P<col>\d+): (?P<msg>.*)$")


def _well_known_include() -> str:
    import grpc_tools

    return str(Path(grpc_tools.__file__).parent / "_proto")


def compile_protos(proto_dir: Path, files: list[str], display_dir: str) -> list[
    descriptor_pb2.FileDescriptorProto
]:
    """Compile ``files`` (relative to ``proto_dir``) and return their descriptors.

    Imports resolve inside ``proto_dir`` and the well-known types. Errors are raised as
    ``SpecError`` values whose path is ``display_dir/<file>``, the way the user sees it.
    """
    missing = [f for f in files if not (proto_dir / f).is_file()]
    if missing:
        raise SpecErrors([SpecError("no such .proto file", f"{display_dir}/{f}") for f in missing])
    with tempfile.TemporaryDirectory(prefix="protoframe-") as tmp:
        out = os.path.join(tmp, "descriptors.pb")
        cmd = [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{proto_dir}",
            f"-I{_well_known_include()}",
            "--include_source_info",
            "--include_imports",
            f"--descriptor_set_out={out}",
            *files,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0 or not os.path.exists(out):
            raise _protoc_errors(proc.stderr or proc.stdout, proto_dir, display_dir)
        data = Path(out).read_bytes()
    fds = descriptor_pb2.FileDescriptorSet()
    fds.ParseFromString(data)
    wanted = set(files)
    # Keep declaration order stable: the order protoc emits is dependency-first and deterministic.
    return [f for f in fds.file if f.name in wanted or not f.name.startswith("google/protobuf/")]


def _protoc_errors(text: str, proto_dir: Path, display_dir: str) -> SpecErrors:
    errors: list[SpecError] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        m = _PROTOC_LOCATION.match(line)
        if m:
            errors.append(
                SpecError(
                    m["msg"],
                    _display_path(m["file"], proto_dir, display_dir),
                    int(m["line"]),
                    int(m["col"]),
                )
            )
        else:
            errors.append(SpecError(f"protoc: {line}", display_dir))
    if not errors:
        errors.append(SpecError("protoc failed without a message", display_dir))
    return SpecErrors(errors)


def _display_path(reported: str, proto_dir: Path, display_dir: str) -> str:
    """``reported`` as the user sees it: ``display_dir/<file>``.

    protoc names a file by its import path (relative to ``-I``) in syntax errors, but by the
    path it opened on disk (``proto_dir/<file>``, relative to the working directory) in
    semantic ones (a duplicate or reserved field number); prefixing the latter would name the
    spec directory twice.
    """
    on_disk = Path(reported)
    if on_disk.is_file():
        try:
            rel = on_disk.resolve().relative_to(proto_dir.resolve())
        except ValueError:
            rel = None
        if rel is not None:
            return f"{display_dir}/{rel.as_posix()}"
    return f"{display_dir}/{reported}"
