"""Checks that protoframe's PulsarApi.proto describes the same wire schema as upstream Pulsar.

Our copy of the schema has its own comments and formatting, so the files are not compared as
text. Both are compiled with protoc (from grpcio-tools) into descriptor sets and compared
structurally: messages, fields, enums and enum values must match exactly.
"""

import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from google.protobuf.descriptor_pb2 import (
    DescriptorProto,
    EnumDescriptorProto,
    FieldDescriptorProto,
    FileDescriptorProto,
    FileDescriptorSet,
)

from tests.support.paths import ROOT

REPO_ROOT = ROOT
OUR_PROTO = REPO_ROOT / "specs" / "pulsar" / "PulsarApi.proto"
UPSTREAM_PROTO = REPO_ROOT.parent / "shared" / "reference" / "pulsar" / "PulsarApi.proto"
UPSTREAM_MISSING = (
    "../shared/reference/pulsar/PulsarApi.proto not present; "
    "the upstream comparison needs the shared reference data"
)

# Optional scalar attributes of FieldDescriptorProto compared field by field, with the label
# used for them in difference reports.
_FIELD_ATTRS: tuple[tuple[str, str], ...] = (
    ("number", "number"),
    ("type", "type"),
    ("label", "label"),
    ("default_value", "default"),
    ("type_name", "type_name"),
    ("oneof_index", "oneof_index"),
)


def compile_proto(proto: Path, out: Path) -> FileDescriptorProto:
    """Compile one .proto file with grpcio-tools' protoc and return its file descriptor."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{proto.parent}",
            f"--descriptor_set_out={out}",
            str(proto),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, f"protoc failed for {proto}:\n{result.stderr}"
    descriptor_set = FileDescriptorSet()
    descriptor_set.ParseFromString(out.read_bytes())
    assert len(descriptor_set.file) == 1, f"expected one file descriptor for {proto}"
    file_descriptor: FileDescriptorProto = descriptor_set.file[0]
    return file_descriptor


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _walk_messages(
    prefix: str, messages: Iterable[DescriptorProto]
) -> Iterator[tuple[str, DescriptorProto]]:
    """Yield (full name, descriptor) for each message and, recursively, its nested messages."""
    for message in messages:
        full_name = _join(prefix, message.name)
        yield full_name, message
        yield from _walk_messages(full_name, message.nested_type)


def _messages(file: FileDescriptorProto) -> dict[str, DescriptorProto]:
    return dict(_walk_messages(file.package, file.message_type))


def _enums(file: FileDescriptorProto) -> dict[str, EnumDescriptorProto]:
    """All enums of the file, top-level and nested, keyed by full name."""
    enums: dict[str, EnumDescriptorProto] = {
        _join(file.package, enum.name): enum for enum in file.enum_type
    }
    for message_name, message in _messages(file).items():
        for enum in message.enum_type:
            enums[_join(message_name, enum.name)] = enum
    return enums


def _field_attr(field: FieldDescriptorProto, attr: str) -> object:
    """The attribute's value, or None when it is not set (proto2 presence)."""
    if attr == "packed":
        if field.HasField("options") and field.options.HasField("packed"):
            packed: bool = field.options.packed
            return packed
        return None
    if field.HasField(attr):
        value: object = getattr(field, attr)
        return value
    return None


def _describe(attr: str, value: object) -> str:
    if value is None:
        return "unset"
    if attr == "type":
        type_name: str = FieldDescriptorProto.Type.Name(value)
        return type_name
    if attr == "label":
        label_name: str = FieldDescriptorProto.Label.Name(value)
        return label_name
    return repr(value)


def _presence_differences(
    kind: str, ours: Iterable[str], theirs: Iterable[str], prefix: str = ""
) -> list[str]:
    ours_set, theirs_set = set(ours), set(theirs)
    return [
        f"{_join(prefix, name)}: {kind} missing from ours" for name in sorted(theirs_set - ours_set)
    ] + [f"{_join(prefix, name)}: {kind} only in ours" for name in sorted(ours_set - theirs_set)]


def _message_differences(name: str, ours: DescriptorProto, theirs: DescriptorProto) -> list[str]:
    differences: list[str] = []
    ours_oneofs = [oneof.name for oneof in ours.oneof_decl]
    theirs_oneofs = [oneof.name for oneof in theirs.oneof_decl]
    if ours_oneofs != theirs_oneofs:
        differences.append(f"{name}: oneofs {ours_oneofs} != {theirs_oneofs}")

    ours_fields = {field.name: field for field in ours.field}
    theirs_fields = {field.name: field for field in theirs.field}
    differences += _presence_differences("field", ours_fields, theirs_fields, name)
    for field_name in sorted(ours_fields.keys() & theirs_fields.keys()):
        ours_field, theirs_field = ours_fields[field_name], theirs_fields[field_name]
        for attr, label in (*_FIELD_ATTRS, ("packed", "packed")):
            ours_value = _field_attr(ours_field, attr)
            theirs_value = _field_attr(theirs_field, attr)
            if ours_value != theirs_value:
                differences.append(
                    f"{name}.{field_name}: {label} "
                    f"{_describe(attr, ours_value)} != {_describe(attr, theirs_value)}"
                )
    return differences


def _enum_differences(
    name: str, ours: EnumDescriptorProto, theirs: EnumDescriptorProto
) -> list[str]:
    ours_values: list[tuple[str, int]] = [(value.name, value.number) for value in ours.value]
    theirs_values: list[tuple[str, int]] = [(value.name, value.number) for value in theirs.value]
    if ours_values == theirs_values:
        return []
    ours_numbers, theirs_numbers = dict(ours_values), dict(theirs_values)
    differences = _presence_differences("value", ours_numbers, theirs_numbers, name)
    for value_name, number in ours_values:
        if value_name in theirs_numbers and theirs_numbers[value_name] != number:
            differences.append(
                f"{name}.{value_name}: number {number} != {theirs_numbers[value_name]}"
            )
    ours_order = [value_name for value_name, _ in ours_values if value_name in theirs_numbers]
    theirs_order = [value_name for value_name, _ in theirs_values if value_name in ours_numbers]
    if ours_order != theirs_order:
        differences.append(f"{name}: value order {ours_order} != {theirs_order}")
    return differences


def schema_differences(ours: FileDescriptorProto, theirs: FileDescriptorProto) -> list[str]:
    """Every structural difference between two file descriptors, as readable lines.

    Compares the package, the full names of all messages and enums (nested ones included),
    each message's fields keyed by name (number, type, label, default, type name, oneof index,
    packed option) and each enum's (name, number) values in declaration order.
    """
    differences: list[str] = []
    if ours.package != theirs.package:
        differences.append(f"package {ours.package!r} != {theirs.package!r}")
    if ours.syntax != theirs.syntax:
        differences.append(f"syntax {ours.syntax!r} != {theirs.syntax!r}")

    ours_messages, theirs_messages = _messages(ours), _messages(theirs)
    differences += _presence_differences("message", ours_messages, theirs_messages)
    for name in sorted(ours_messages.keys() & theirs_messages.keys()):
        differences += _message_differences(name, ours_messages[name], theirs_messages[name])

    ours_enums, theirs_enums = _enums(ours), _enums(theirs)
    differences += _presence_differences("enum", ours_enums, theirs_enums)
    for name in sorted(ours_enums.keys() & theirs_enums.keys()):
        differences += _enum_differences(name, ours_enums[name], theirs_enums[name])
    return differences


def _message(file: FileDescriptorProto, name: str) -> DescriptorProto:
    for message in file.message_type:
        if message.name == name:
            found: DescriptorProto = message
            return found
    raise KeyError(name)


def _field(message: DescriptorProto, name: str) -> FieldDescriptorProto:
    for field in message.field:
        if field.name == name:
            found: FieldDescriptorProto = field
            return found
    raise KeyError(name)


def _enum(enums: Iterable[EnumDescriptorProto], name: str) -> EnumDescriptorProto:
    for enum in enums:
        if enum.name == name:
            found: EnumDescriptorProto = enum
            return found
    raise KeyError(name)


def test_our_pulsar_proto_matches_upstream(tmp_path: Path) -> None:
    if not UPSTREAM_PROTO.is_file():
        pytest.skip(UPSTREAM_MISSING)
    ours = compile_proto(OUR_PROTO, tmp_path / "ours.pb")
    theirs = compile_proto(UPSTREAM_PROTO, tmp_path / "upstream.pb")

    differences = schema_differences(ours, theirs)

    assert not differences, (
        f"{len(differences)} difference(s) between {OUR_PROTO.name} and upstream:\n"
        + "\n".join(differences)
    )


def test_schema_differences_reports_mutations(tmp_path: Path) -> None:
    # Runs on our own schema, so it needs no upstream reference data.
    ours = compile_proto(OUR_PROTO, tmp_path / "ours.pb")
    assert schema_differences(ours, ours) == []

    mutated = FileDescriptorProto()
    mutated.CopyFrom(ours)
    message_id = _message(mutated, "MessageIdData")
    _field(message_id, "ledgerId").number = 100
    _field(message_id, "partition").default_value = "-2"
    _field(message_id, "batch_size").type = FieldDescriptorProto.TYPE_UINT32
    _field(message_id, "ack_set").options.packed = True
    message_id.field.remove(_field(message_id, "entryId"))
    compression = _enum(mutated.enum_type, "CompressionType")
    compression.value.remove(compression.value[-1])
    schema_type = _enum(_message(mutated, "Schema").enum_type, "Type")
    schema_type.value[0].number = 99
    mutated.message_type.add(name="AddedByTest")
    mutated.package = "pulsar.mutated"

    differences = schema_differences(ours, mutated)

    assert "package 'pulsar.proto' != 'pulsar.mutated'" in differences
    # With the package changed, every full name differs; compare field-level details with the
    # original package restored.
    mutated.package = ours.package
    differences = schema_differences(ours, mutated)
    expected = [
        "pulsar.proto.MessageIdData.ledgerId: number 1 != 100",
        "pulsar.proto.MessageIdData.partition: default '-1' != '-2'",
        "pulsar.proto.MessageIdData.batch_size: type TYPE_INT32 != TYPE_UINT32",
        "pulsar.proto.MessageIdData.ack_set: packed unset != True",
        "pulsar.proto.MessageIdData.entryId: field only in ours",
        "pulsar.proto.CompressionType.SNAPPY: value only in ours",
        "pulsar.proto.Schema.Type.None: number 0 != 99",
        "pulsar.proto.AddedByTest: message missing from ours",
    ]
    missing = [line for line in expected if line not in differences]
    assert not missing, "not reported: " + "; ".join(missing) + "\ngot:\n" + "\n".join(differences)
    assert len(differences) == len(expected), "\n".join(differences)
