"""``protoframe diff`` over Pulsar's real history: v15 (2020) -> v19 -> v20 -> ours (v21).

The expected changes are worked out here independently of the diff: both versions are
compiled with protoc and their messages, fields, enums and values compared as plain sets of
names; what upstream added is what one has and the other lacks. The two changes that are not
additions (``../shared/reference/pulsar/history/README.md``) are written out by hand. Each
step must report exactly those, and nothing else, in both directions.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf.descriptor_pb2 import DescriptorProto, FileDescriptorSet

from protoframe.generator.diff.rules import BREAKING, COMPATIBLE
from protoframe.generator.diff.tree import ProtocolSnapshot
from tests.generator.diff.support import SPECS, copy_protocol, diff, load, summary
from tests.support.paths import ROOT

HISTORY = ROOT.parent / "shared" / "reference" / "pulsar" / "history"
pytestmark = pytest.mark.skipif(
    not HISTORY.is_dir(),
    reason="../shared/reference/pulsar/history is not present: the upstream PulsarApi.proto "
           "versions these tests compare are reference data outside the repository")

VERSIONS = {
    "v15": HISTORY / "PulsarApi.v15-2020.proto",
    "v19": HISTORY / "PulsarApi.v19-2022.proto",
    "v20": HISTORY / "PulsarApi.v20-2024.proto",
    "v21": SPECS / "pulsar" / "PulsarApi.proto",
}
STEPS = [("v15", "v19"), ("v19", "v20"), ("v20", "v21")]
TXN = "pulsar.proto.CommandNewTxn"


@pytest.fixture(scope="module")
def snapshots(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ProtocolSnapshot]:
    out = {}
    for version, proto in VERSIONS.items():
        root = tmp_path_factory.mktemp(version)
        target = copy_protocol("pulsar", root)
        shutil.copyfile(proto, target / "PulsarApi.proto")
        # Our frame spec names messages v15 lacks (BrokerEntryMetadata): the history is the
        # .proto's, so the frame spec stays out.
        (target / "pulsar.yaml").unlink()
        out[version] = load(root / "specs", "pulsar")
    return out


Names = dict[str, set[str]]


def _names(proto: Path) -> Names:
    """Messages, fields ("Message.field"), enums and values ("Enum.VALUE") by full name."""
    with_out = proto.parent
    proc = subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{with_out}", "-o/dev/stdout",
         proto.name], capture_output=True, check=True)
    fds = FileDescriptorSet.FromString(proc.stdout)
    names: Names = {"message": set(), "field": set(), "enum": set(), "value": set()}

    def enums(scope: str, items: list) -> None:  # type: ignore[type-arg]
        for e in items:
            names["enum"].add(f"{scope}.{e.name}")
            names["value"] |= {f"{scope}.{e.name}.{v.name}" for v in e.value}

    def walk(scope: str, messages: list[DescriptorProto]) -> None:
        for m in messages:
            full = f"{scope}.{m.name}"
            if m.options.map_entry:
                continue
            names["message"].add(full)
            names["field"] |= {f"{full}.{f.name}" for f in m.field}
            walk(full, list(m.nested_type))
            enums(full, list(m.enum_type))

    for fd in fds.file:
        walk(fd.package, list(fd.message_type))
        enums(fd.package, list(fd.enum_type))
    return names


@pytest.fixture(scope="module")
def names(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Names]:
    out = {}
    for version, proto in VERSIONS.items():
        copy = tmp_path_factory.mktemp(f"names-{version}") / "PulsarApi.proto"
        shutil.copyfile(proto, copy)
        out[version] = _names(copy)
    return out


ADDED = {"message": "MESSAGE_ADDED", "field": "FIELD_ADDED", "enum": "ENUM_ADDED",
         "value": "ENUM_VALUE_ADDED"}
REMOVED = {"message": ("MESSAGE_NO_DELETE", COMPATIBLE, BREAKING),
           "field": ("FIELD_NO_DELETE", COMPATIBLE, BREAKING),
           "enum": ("ENUM_NO_DELETE", COMPATIBLE, BREAKING),
           # Pulsar's enums are proto2 enums, closed: an old peer sending a value the new
           # one no longer has is read as an unknown field.
           "value": ("ENUM_VALUE_NO_DELETE", BREAKING, BREAKING)}
# The changes of each step that are not additions, from the history's README.
SPECIAL = {
    ("v15", "v19"): {(
        "FIELD_DEFAULT_CHANGED", f"pulsar.proto.MessageMetadata.{name}", COMPATIBLE, COMPATIBLE)
        for name in ("txnid_least_bits", "txnid_most_bits")},
    ("v20", "v21"): {("FIELD_RENAMED", f"{TXN}.txn_ttl_millis", COMPATIBLE, BREAKING)},
    ("v21", "v20"): {("FIELD_RENAMED", f"{TXN}.txn_ttl_seconds", COMPATIBLE, BREAKING)},
    ("v19", "v15"): {(
        "FIELD_DEFAULT_CHANGED", f"pulsar.proto.MessageMetadata.{name}", COMPATIBLE, COMPATIBLE)
        for name in ("txnid_least_bits", "txnid_most_bits")},
}
RENAMED = {(f"{TXN}.txn_ttl_seconds", f"{TXN}.txn_ttl_millis")}


def _expected(names: dict[str, Names], old: str, new: str) -> set[tuple[str, str, str, str]]:
    expected = set(SPECIAL.get((old, new), set()))
    renames = {a: b for a, b in RENAMED} | {b: a for a, b in RENAMED}
    for kind in ADDED:
        gone = names[old][kind] - names[new][kind]
        came = names[new][kind] - names[old][kind]
        for name in sorted(came):
            if renames.get(name) not in gone:
                # Added elements inside an added message or enum are part of it.
                parent = name.rsplit(".", 1)[0]
                if kind in ("field", "value") and parent not in names[old][
                        "message" if kind == "field" else "enum"]:
                    continue
                expected.add((ADDED[kind], name, COMPATIBLE, COMPATIBLE))
        for name in sorted(gone):
            if renames.get(name) in came:
                continue
            parent = name.rsplit(".", 1)[0]
            if kind in ("field", "value") and parent not in names[new][
                    "message" if kind == "field" else "enum"]:
                continue
            rule, wire, source = REMOVED[kind]
            expected.add((rule, name, wire, source))
    return expected


@pytest.mark.parametrize(("old", "new"), STEPS, ids=[f"{a}-{b}" for a, b in STEPS])
def test_each_step_forward_reports_exactly_the_upstream_changes(
        snapshots: dict[str, ProtocolSnapshot], names: dict[str, Names], old: str,
        new: str) -> None:
    changes = diff(snapshots[old], snapshots[new])
    assert summary(changes) == _expected(names, old, new)
    assert len(changes) == len(summary(changes))
    # Forward, upstream only added (and renamed and dropped a redundant default).
    assert not [c for c in changes if c.wire == BREAKING]
    assert [c.rule for c in changes if c.source == BREAKING] == (
        ["FIELD_RENAMED"] if new == "v21" else [])
    assert any(c.rule == "MESSAGE_ADDED" for c in changes)


@pytest.mark.parametrize(("new", "old"), STEPS, ids=[f"{b}-{a}" for a, b in STEPS])
def test_each_step_backward_reports_the_removals_as_breaking(
        snapshots: dict[str, ProtocolSnapshot], names: dict[str, Names], old: str,
        new: str) -> None:
    changes = diff(snapshots[old], snapshots[new])
    assert summary(changes) == _expected(names, old, new)
    removals = [c for c in changes if c.rule.endswith("_NO_DELETE")]
    assert removals and all(c.source == BREAKING for c in removals)
    assert not [c for c in changes if c.additive]


def test_the_whole_history_at_once(snapshots: dict[str, ProtocolSnapshot],
                                   names: dict[str, Names]) -> None:
    """v15 straight to v21: the steps' changes together, nothing breaking on the wire."""
    changes = diff(snapshots["v15"], snapshots["v21"])
    expected = (_expected(names, "v15", "v21") | SPECIAL[("v15", "v19")]
                | SPECIAL[("v20", "v21")])
    assert f"{TXN}.txn_ttl_seconds" in names["v15"]["field"]
    assert summary(changes) == expected
    assert ("MESSAGE_ADDED", "pulsar.proto.CommandTopicMigrated", COMPATIBLE,
            COMPATIBLE) in expected
    assert not [c for c in changes if c.wire == BREAKING]
    assert [c.rule for c in changes if c.source == BREAKING] == ["FIELD_RENAMED"]


def test_positions_name_both_versions(snapshots: dict[str, ProtocolSnapshot]) -> None:
    (rename,) = [c for c in diff(snapshots["v20"], snapshots["v21"])
                 if c.rule == "FIELD_RENAMED"]
    assert rename.old is not None and rename.new is not None
    assert rename.old.startswith("specs/pulsar/PulsarApi.proto:")
    assert rename.new.startswith("specs/pulsar/PulsarApi.proto:")
    line = int(rename.new.split(":")[1])
    text = VERSIONS["v21"].read_text().splitlines()[line - 1]
    assert "txn_ttl_millis" in text
    old_line = int(rename.old.split(":")[1])
    assert "txn_ttl_seconds" in VERSIONS["v20"].read_text().splitlines()[old_line - 1]
