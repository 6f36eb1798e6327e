"""Shared by the diff tests: spec trees in temporary directories, loaded once per module."""

from __future__ import annotations

import shutil
from pathlib import Path

from protoframe.generator.diff.compare import compare_protocols
from protoframe.generator.diff.rules import Change
from protoframe.generator.diff.tree import ProtocolSnapshot, load_protocol_snapshot
from tests.support.paths import ROOT

SPECS = ROOT / "specs"


def copy_protocol(protocol: str, into: Path, lock: bool = True) -> Path:
    """A spec directory holding a copy of ``protocol``; returns the protocol's directory."""
    target = into / "specs" / protocol
    shutil.copytree(SPECS / protocol, target,
                    ignore=None if lock else shutil.ignore_patterns("*.lock.json"))
    return target


def load(spec_dir: Path, protocol: str) -> ProtocolSnapshot:
    return load_protocol_snapshot(spec_dir, "specs", protocol)


def summary(changes: list[Change]) -> set[tuple[str, str, str, str]]:
    """Each change as (rule, element, wire, source): what the tests compare exactly."""
    return {(c.rule, c.element, c.wire, c.source) for c in changes}


def diff(old: ProtocolSnapshot, new: ProtocolSnapshot) -> list[Change]:
    return compare_protocols(old, new)
