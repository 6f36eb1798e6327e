"""Compile each distinct set of .proto files once per test process.

Most edits of the mutation suite change a YAML spec and leave the .proto files as they are:
protoc's answer for the same files under the same name is the same, so it is kept rather
than asked for again (a fresh protoc process costs about a second on a loaded machine).
Every distinct input still goes through the real ``compile_protos``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from google.protobuf.descriptor_pb2 import FileDescriptorProto

from protoframe.generator import proto_model, protoc

_real = protoc.compile_protos
_seen: dict[tuple[object, ...], list[FileDescriptorProto]] = {}


def _compile_once(proto_dir: Path, files: list[str],
                  display_dir: str) -> list[FileDescriptorProto]:
    contents = tuple((p.name, p.read_bytes()) for p in sorted(proto_dir.glob("*.proto")))
    key = (contents, tuple(files), display_dir)
    if key not in _seen:
        _seen[key] = _real(proto_dir, files, display_dir)
    return _seen[key]


@pytest.fixture(autouse=True, scope="session")
def _protoc_once() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(proto_model, "compile_protos", _compile_once)
        yield
