"""``protoframe diff`` on the command line: modes, output, exit status, settings, lock files."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from protoframe.generator.cli import main
from protoframe.generator.diff.compare import check_lock
from protoframe.generator.diff.tree import load_tree
from tests.generator.diff.support import SPECS

MAGIC = "{name: magic, type: u16, const: 0x0e01}"
MINI = """syntax = "proto2";
package mini;

message Point {
    optional int32 x = 1;
    optional int32 y = 2;
    optional string label = 3;
}
"""


def _tank(root: Path, edit: tuple[str, str] | None = None) -> Path:
    """``root``/specs holding tank (no .proto: nothing to compile), optionally edited."""
    target = root / "specs" / "tank"
    shutil.copytree(SPECS / "tank", target, ignore=shutil.ignore_patterns("*.lock.json"))
    if edit is not None:
        path = target / "tank.yaml"
        text = path.read_text(encoding="utf-8")
        assert text.count(edit[0]) == 1
        path.write_text(text.replace(*edit), encoding="utf-8")
    return root / "specs"


CONST = ("      - {name: partition, type: u16}\n      - {name: bundle_length",
         "      - {name: partition, type: u32}\n      - {name: bundle_length")


def _mini(root: Path, proto: str = MINI) -> Path:
    target = root / "specs" / "mini"
    target.mkdir(parents=True, exist_ok=True)
    (target / "mini.proto").write_text(proto, encoding="utf-8")
    return root / "specs"


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["diff", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_breaking_change_fails_and_names_both_positions(
        cwd: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _tank(cwd / "old")
    _tank(cwd / "new", CONST)
    code, out, _ = _run(capsys, "old/specs", "new/specs")
    assert code == 1
    line = next(x for x in out.splitlines() if "FRAME_FIELD_WIDTH_CHANGED" in x)
    assert "ProducePartition.partition: width: 2 -> 4" in line
    assert "(old old/specs/tank/tank.yaml:" in line and ", new new/specs/tank/tank.yaml:" in line
    assert out.index("wire-breaking:") < out.index("FRAME_FIELD_WIDTH_CHANGED")
    assert "1 breaking change(s) fail this check" in out


def test_json_output(cwd: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _tank(cwd / "old")
    _tank(cwd / "new", CONST)
    code, out, _ = _run(capsys, "old/specs", "new/specs", "--format", "json")
    assert code == 1
    data = json.loads(out)
    (change,) = data["changes"]
    assert change["rule"] == "FRAME_FIELD_WIDTH_CHANGED"
    assert (change["wire"], change["source"], change["severity"]) == (
        "breaking", "compatible", "wire-breaking")
    assert change["old"].startswith("old/specs/tank/tank.yaml:")
    assert change["new"].startswith("new/specs/tank/tank.yaml:")
    assert change["fails"] and data["failing"] == 1


def test_no_change_and_additive_changes_pass(cwd: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    _tank(cwd / "old")
    _tank(cwd / "new", ("  Ping:\n", "  Extra:\n    fields: []\n\n  Ping:\n"))
    assert _run(capsys, "old/specs", "old/specs")[0] == 0
    code, out, _ = _run(capsys, "old/specs", "new/specs")
    assert code == 0
    assert "FRAME_STRUCT_ADDED" in out and "nothing that fails this check" in out


def test_settings_ignore_and_fail_on(cwd: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _tank(cwd / "old")
    _tank(cwd / "new", CONST)
    settings = cwd / "pyproject.toml"
    settings.write_text('[tool.protoframe]\nspec-dir = "new/specs"\n\n[tool.protoframe.diff]\n'
                        'ignore = ["FRAME_FIELD_WIDTH_CHANGED"]\n', encoding="utf-8")
    code, out, _ = _run(capsys, "old/specs", "new/specs")
    assert (code, "(1 ignored)" in out) == (0, True)
    settings.write_text('[tool.protoframe.diff]\nignore = ["ProducePartition.*"]\n',
                        encoding="utf-8")
    assert _run(capsys, "old/specs", "new/specs")[0] == 0
    settings.write_text('[tool.protoframe.diff]\nfail-on = ["source"]\n', encoding="utf-8")
    assert _run(capsys, "old/specs", "new/specs")[0] == 0
    settings.write_text('[tool.protoframe.diff]\nfail-on = ["wire"]\n', encoding="utf-8")
    assert _run(capsys, "old/specs", "new/specs")[0] == 1
    settings.write_text('[tool.protoframe.diff]\nignore = ["NO_SUCH_RULE"]\nfial-on = []\n',
                        encoding="utf-8")
    code, _, err = _run(capsys, "old/specs", "new/specs")
    assert code == 2
    assert "no rule matches 'NO_SUCH_RULE'" in err and "unknown diff setting 'fial-on'" in err


def test_against_a_git_revision(cwd: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _tank(cwd)
    (cwd / "pyproject.toml").write_text("[tool.protoframe]\n", encoding="utf-8")

    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", *args],
                       cwd=cwd, check=True, capture_output=True)

    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "tank")
    path = cwd / "specs" / "tank" / "tank.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace(*CONST), encoding="utf-8")
    code, out, _ = _run(capsys, "--against", "HEAD")
    assert code == 1
    line = next(x for x in out.splitlines() if "FRAME_FIELD_WIDTH_CHANGED" in x)
    assert "(old HEAD:specs/tank/tank.yaml:" in line and "new specs/tank/tank.yaml:" in line
    code, _, err = _run(capsys, "--against", "no-such-revision")
    assert code == 2 and "git archive" in err


def test_protocols_added_and_removed(cwd: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _tank(cwd / "old")
    _tank(cwd / "new")
    _mini(cwd / "new")
    code, out, _ = _run(capsys, "old/specs", "new/specs")
    assert code == 0 and "PROTOCOL_ADDED: protocol mini added" in out
    code, out, _ = _run(capsys, "new/specs", "old/specs")
    assert code == 1 and "PROTOCOL_NO_DELETE: protocol mini removed" in out


def test_bad_arguments(cwd: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _tank(cwd)
    for args in ([], ["specs"], ["specs", "specs", "--against", "HEAD"],
                 ["--lock", "--update-lock"]):
        code, _, err = _run(capsys, *args)
        assert code == 2 and "give OLD and NEW" in err


def test_a_number_dropped_earlier_is_caught_by_the_lock_alone(
        cwd: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Version 1 has label = 3; version 2 drops it without `reserved`; version 3 gives 3 to
    another field. Only the lock file, written at version 1, still knows number 3."""
    _mini(cwd)
    assert _run(capsys, "--update-lock")[0] == 0
    lock = cwd / "specs" / "mini" / "mini.lock.json"
    assert '"3": [["label", "optional", "string"]]' in lock.read_text(encoding="utf-8")
    assert _run(capsys, "--lock")[0] == 0
    v2 = MINI.replace("    optional string label = 3;\n", "")
    _mini(cwd, v2)
    assert _run(capsys, "--update-lock")[0] == 0  # keeps number 3
    shutil.copytree(cwd / "specs", cwd / "v2" / "specs")
    _mini(cwd, v2.replace("    optional int32 y = 2;\n",
                          "    optional int32 y = 2;\n    optional bytes icon = 3;\n"))
    code, out, _ = _run(capsys, "v2/specs", "specs")
    assert code == 1
    assert "FIELD_NUMBER_REUSED: field mini.Point.icon takes number 3, which the lock file " \
           "records as label: optional string" in out
    code, out, err = _run(capsys, "--lock")
    assert code == 1 and "FIELD_NUMBER_REUSED" in out and "stale lock file" in err
    # A rename keeps number and type: the lock recognises it by number.
    _mini(cwd, MINI.replace("string label = 3", "string title = 3"))
    code, out, _ = _run(capsys, "--lock")
    assert code == 1 and "FIELD_RENAMED: field mini.Point.title" in out


def test_a_layout_differing_from_the_lock(cwd: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _tank(cwd)
    code, out, _ = _run(capsys, "--update-lock")
    assert code == 0 and "wrote specs/tank/tank.lock.json" in out
    assert _run(capsys, "--lock")[0] == 0
    _tank(cwd / "edited", CONST)
    shutil.copyfile(cwd / "edited" / "specs" / "tank" / "tank.yaml",
                    cwd / "specs" / "tank" / "tank.yaml")
    code, out, _ = _run(capsys, "--lock")
    assert code == 1
    assert "FRAME_LAYOUT_CHANGED_SINCE_LOCK: struct ProducePartition" in out


def test_the_committed_lock_files_are_current() -> None:
    tree = load_tree(SPECS, "specs")
    assert set(tree) >= {"pulsar", "pravega", "tank", "tubemq"}
    for name, snap in tree.items():
        assert snap.lock is not None, f"specs/{name} has no lock file"
        changes, stale = check_lock(snap)
        assert changes == [], name
        assert not stale, f"specs/{name}/{name}.lock.json: run protoframe diff --update-lock"
    # The Pulsar lock remembers upstream's earlier name of CommandNewTxn field 2.
    pulsar = tree["pulsar"].lock
    assert pulsar is not None
    assert {u.name for u in pulsar.field_uses("pulsar.proto.CommandNewTxn", 2)} == {
        "txn_ttl_millis", "txn_ttl_seconds"}
