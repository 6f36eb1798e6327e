"""``protoframe generate`` summarises what a regeneration changed in the generated API (classes,
fields, enum values, methods added, removed, renamed or retyped), and says nothing when nothing
changed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from protoframe.generator.api_summary import MAX_LINES, api_changes
from tests.support.generator_cli import make_specs, run_cli
from tests.support.paths import ROOT

HISTORY = ROOT.parent / "shared" / "reference" / "pulsar" / "history"

OLD = """syntax = "proto2";
package t;
message Ping {
  optional int32 seconds = 1;
  optional string note = 2;
}
message Gone { optional int32 x = 1; }
enum Color { RED = 0; GREEN = 1; }
"""
# Ping.seconds renamed (same number and type), Ping.note retyped, Ping.urgent added, Gone
# removed, Color.GREEN renamed and Color.BLUE added, Added added.
NEW = """syntax = "proto2";
package t;
// Comments, order and spacing are no API.
enum Color { RED = 0; VERDE = 1; BLUE = 2; }
message Added { optional int32 y = 1; }
message Ping {
  optional int32   millis = 1;
  optional bytes note = 2;
  optional bool urgent = 3;
}
"""


def summary(stdout: str) -> list[str]:
    lines = stdout.splitlines()
    if "generated API changes:" not in lines:
        return []
    start = lines.index("generated API changes:")
    return [line for line in lines[start + 1:] if line.startswith("  ")]


def test_a_regeneration_lists_what_changed_for_callers(tmp_path: Path) -> None:
    make_specs(tmp_path, {"t/t.proto": OLD})
    first = run_cli("generate", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert summary(first.stdout) == ["  + module generated/__init__.py",
                                     "  + module generated/t/__init__.py",
                                     "  + module generated/t/t.py"]
    make_specs(tmp_path, {"t/t.proto": NEW})
    second = run_cli("generate", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert summary(second.stdout) == [
        "  generated/t/t.py:",
        "    ~ value Color.GREEN renamed to VERDE",
        "    ~ field Ping.seconds renamed to millis",
        "    ~ field Ping.note: str -> bytes",
        "    - class Gone",
        "    + value Color.BLUE",
        "    + class Added",
        "    + field Ping.urgent",
    ]
    # Nothing changed, nothing said; a change that is no API change (a comment) neither.
    again = run_cli("generate", cwd=tmp_path)
    assert again.returncode == 0 and "0 file(s) changed" in again.stdout
    assert "API" not in again.stdout
    commented_proto = NEW.replace("message Ping {", "// Ping's doc\nmessage Ping {")
    make_specs(tmp_path, {"t/t.proto": commented_proto})
    commented = run_cli("generate", cwd=tmp_path)
    assert commented.returncode == 0 and "1 file(s) changed" in commented.stdout
    assert "API" not in commented.stdout


def test_check_prints_no_summary(tmp_path: Path) -> None:
    make_specs(tmp_path, {"t/t.proto": OLD})
    assert run_cli("generate", cwd=tmp_path).returncode == 0
    make_specs(tmp_path, {"t/t.proto": NEW})
    stale = run_cli("check", cwd=tmp_path)
    assert stale.returncode == 1 and "API" not in stale.stdout + stale.stderr


def test_module_level_changes() -> None:
    old = "X: int = 21\ndef f(a: int) -> int: ...\nclass C:\n    def m(self) -> None: ...\n"
    new = "X: int = 19\ndef f(a: int, b: int) -> int: ...\nclass C(Base):\n    pass\n"
    assert api_changes(old, new) == ["~ constant X: int = 21 -> int = 19",
                                     "~ function f: parameter b added",
                                     "- method C.m"]
    many = "class M:\n" + "".join(f"    f{i}: int\n" for i in range(3))
    assert api_changes("class M:\n    pass\n", many) == ["+ 3 fields M.{f0, f1, f2}"]
    assert api_changes(old, old) == []


@pytest.mark.skipif(not HISTORY.is_dir(),
                    reason="../shared/reference/pulsar/history is not present; the upstream "
                    "schemas are shared reference data")
@pytest.mark.slow  # generates Pulsar from two schema versions
def test_going_back_to_the_v20_schema_fits_one_screen(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "specs" / "pulsar", tmp_path / "specs" / "pulsar")
    assert run_cli("generate", cwd=tmp_path).returncode == 0
    shutil.copy(HISTORY / "PulsarApi.v20-2024.proto",
                tmp_path / "specs" / "pulsar" / "PulsarApi.proto")
    result = run_cli("generate", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = summary(result.stdout)
    # Upstream's v20 -> v21 rename, seen backwards: the same field number, another name.
    assert "    ~ field CommandNewTxn.txn_ttl_millis renamed to txn_ttl_seconds" in lines
    assert "    ~ constant PROTOCOL_VERSION: int = 21 -> int = 20" in lines
    assert len(lines) <= MAX_LINES + 1
