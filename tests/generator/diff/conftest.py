"""Compile each distinct set of .proto files, and parse each distinct YAML spec, once per
test process.

Most edits of the mutation suite change a YAML spec and leave the .proto files as they are:
protoc's answer for the same files under the same name is the same, so it is kept rather
than asked for again (a fresh protoc process costs about a second on a loaded machine).
Likewise a spec's parsed tree, which the frame builder and the diff's positions both read
(and neither modifies). Every distinct input still goes through the real functions.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from google.protobuf.descriptor_pb2 import FileDescriptorProto

from protoframe.generator import frame_model, proto_model, protoc, spec_yaml
from protoframe.generator.diff import frame_snapshot

_real = protoc.compile_protos
_seen: dict[tuple[object, ...], list[FileDescriptorProto]] = {}


def _compile_once(proto_dir: Path, files: list[str],
                  display_dir: str) -> list[FileDescriptorProto]:
    contents = tuple((p.name, p.read_bytes()) for p in sorted(proto_dir.glob("*.proto")))
    key = (contents, tuple(files), display_dir)
    if key not in _seen:
        _seen[key] = _real(proto_dir, files, display_dir)
    return _seen[key]


_parsed: dict[tuple[str, str], spec_yaml.LocDict] = {}


def _parse_once(path: Path, display: str) -> spec_yaml.LocDict:
    key = (path.read_text(encoding="utf-8"), display)
    if key not in _parsed:
        _parsed[key] = spec_yaml.load_spec(path, display)
    return _parsed[key]


@pytest.fixture(autouse=True, scope="session")
def _protoc_once() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(proto_model, "compile_protos", _compile_once)
        mp.setattr(frame_model, "load_spec", _parse_once)
        mp.setattr(frame_snapshot, "load_spec", _parse_once)
        yield
