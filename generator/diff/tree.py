"""Loads every protocol of a spec directory (or of a git revision) into snapshots."""

from __future__ import annotations

import io
import subprocess
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf.descriptor_pb2 import FileDescriptorProto

from protoframe.generator.build import discover_protocols, load_frame_specs
from protoframe.generator.diff.frame_snapshot import FrameSnapshot, frame_snapshot
from protoframe.generator.diff.lock import Lock, lock_path, read_lock
from protoframe.generator.diff.proto_snapshot import ProtoSnapshot, proto_snapshot
from protoframe.generator.errors import SpecError, SpecErrors
from protoframe.generator.proto_model import load_protocol


@dataclass
class ProtocolSnapshot:
    name: str
    location: str
    proto: ProtoSnapshot
    frames: dict[str, FrameSnapshot] = field(default_factory=dict)  # by spec file name
    lock: Lock | None = None


def load_protocol_snapshot(spec_dir: Path, display_root: str, name: str) -> ProtocolSnapshot:
    """One protocol, validated exactly as ``protoframe generate`` validates it."""
    descriptors: list[FileDescriptorProto] = []
    protocol = load_protocol(spec_dir, name, display_root, descriptors)
    specs = load_frame_specs(spec_dir, display_root, protocol)
    snap = ProtocolSnapshot(name, f"{display_root}/{name}",
                            proto_snapshot(protocol, descriptors))
    for spec in specs:
        file = Path(spec.path).name
        snap.frames[file] = frame_snapshot(spec, spec_dir / name / file)
    try:
        snap.lock = read_lock(lock_path(spec_dir, name), name)
    except (ValueError, KeyError, IndexError) as exc:
        raise SpecErrors([SpecError(f"unreadable lock file: {exc}",
                                    f"{display_root}/{name}/{name}.lock.json")]) from None
    return snap


def load_tree(spec_dir: Path, display_root: str,
              protocols: list[str] | None = None) -> dict[str, ProtocolSnapshot]:
    names, _ = discover_protocols(spec_dir, display_root)
    if protocols:
        names = [n for n in names if n in protocols]
    out: dict[str, ProtocolSnapshot] = {}
    errors: list[SpecError] = []
    for name in names:
        try:
            out[name] = load_protocol_snapshot(spec_dir, display_root, name)
        except SpecErrors as exc:
            errors.extend(exc.errors)
        except SpecError as exc:
            errors.append(exc)
    if errors:
        raise SpecErrors(errors)
    return out


def extract_revision(spec_dir: Path, ref: str, into: Path) -> Path:
    """Write ``spec_dir`` as it is at git revision ``ref`` under ``into``; return its path."""
    def git(*args: str, where: Path = spec_dir) -> bytes:
        proc = subprocess.run(["git", "-C", str(where), *args], capture_output=True,
                              check=False)
        if proc.returncode != 0:
            message = proc.stderr.decode(errors="replace").strip()
            raise SpecErrors([SpecError(f"git {' '.join(args[:2])}: {message}", str(spec_dir))])
        return proc.stdout

    prefix = git("rev-parse", "--show-prefix").decode().strip().rstrip("/")
    top = Path(git("rev-parse", "--show-toplevel").decode().strip())
    data = git("archive", "--format=tar", ref, "--", prefix or ".", where=top)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into / prefix if prefix else into
