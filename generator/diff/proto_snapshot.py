"""The protobuf side of a protocol, flattened for comparison: messages, fields, enums.

Built from the validated IR (``proto_model.load_protocol``). Reserved numbers and names are
not in the IR (generation never needs them), so they are read from the descriptors protoc
produced for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf import descriptor_pb2 as d

from protoframe.generator.ir import EnumType, Field, FieldType, Label, MessageType, Protocol

# What a field reads as when the .proto gives no default (proto2's implicit defaults).
_IMPLICIT_DEFAULTS = {"string": "", "bytes": "", "bool": "false", "double": "0", "float": "0"}


@dataclass(frozen=True)
class FieldSnap:
    name: str
    number: int
    type: str  # a scalar name, or "enum <full name>" / "message <full name>"
    label: str
    packed: bool
    default: str  # effective: the explicit default, or what an absent value reads as
    explicit_default: bool
    oneof: str | None
    location: str | None

    @property
    def kind(self) -> str:
        return self.type.split(" ", 1)[0]


@dataclass(frozen=True)
class Reserved:
    ranges: tuple[tuple[int, int], ...] = ()  # inclusive
    names: frozenset[str] = frozenset()

    def has_number(self, number: int) -> bool:
        return any(lo <= number <= hi for lo, hi in self.ranges)


@dataclass
class MessageSnap:
    full_name: str
    file: str  # the .proto file's name: it names the generated module
    location: str | None
    fields: list[FieldSnap]
    reserved: Reserved = field(default_factory=Reserved)


@dataclass(frozen=True)
class ValueSnap:
    name: str
    number: int
    location: str | None


@dataclass
class EnumSnap:
    full_name: str
    file: str
    location: str | None
    values: list[ValueSnap]
    closed: bool
    reserved: Reserved = field(default_factory=Reserved)


@dataclass
class ProtoSnapshot:
    messages: dict[str, MessageSnap] = field(default_factory=dict)
    enums: dict[str, EnumSnap] = field(default_factory=dict)


def type_name(t: FieldType) -> str:
    if t.kind == "enum" and t.enum is not None:
        return f"enum {t.enum.full_name}"
    if t.kind == "message" and t.message is not None:
        return f"message {t.message.full_name}"
    return t.kind


def _effective_default(f: Field) -> str:
    if f.default is not None:
        return f.default
    if f.label is Label.REPEATED or f.type.kind == "message":
        return ""
    if f.type.kind == "enum" and f.type.enum is not None and f.type.enum.values:
        return f.type.enum.default.proto_name
    return _IMPLICIT_DEFAULTS.get(f.type.kind, "0")


def _field(f: Field) -> FieldSnap:
    return FieldSnap(name=f.proto_name, number=f.number, type=type_name(f.type),
                     label=f.label.value, packed=f.packed, default=_effective_default(f),
                     explicit_default=f.default is not None, oneof=f.oneof,
                     location=str(f.location) if f.location else None)


def proto_snapshot(protocol: Protocol, descriptors: list[d.FileDescriptorProto]) -> ProtoSnapshot:
    """``protocol``'s IR with the reserved numbers and names of its ``descriptors``."""
    snap = ProtoSnapshot()
    for proto in protocol.files:
        for msg in proto.all_messages():
            if msg.is_map_entry:
                continue
            snap.messages[msg.full_name] = _message(msg, Path(proto.path).name)
        for enum in proto.all_enums():
            snap.enums[enum.full_name] = _enum(enum, Path(proto.path).name)
    for fd in descriptors:
        for msg in fd.message_type:
            _reserved_message(snap, msg, fd.package)
        for enum in fd.enum_type:
            _reserved_enum(snap, enum, fd.package)
    return snap


def _message(msg: MessageType, path: str) -> MessageSnap:
    return MessageSnap(full_name=msg.full_name, file=path,
                       location=str(msg.location) if msg.location else None,
                       fields=[_field(f) for f in msg.fields])


def _enum(enum: EnumType, path: str) -> EnumSnap:
    return EnumSnap(full_name=enum.full_name, file=path,
                    location=str(enum.location) if enum.location else None,
                    values=[ValueSnap(v.proto_name, v.number,
                                      str(v.location) if v.location else None)
                            for v in enum.values],
                    closed=enum.closed)


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _reserved_message(snap: ProtoSnapshot, msg: d.DescriptorProto, prefix: str) -> None:
    full = _join(prefix, msg.name)
    if full in snap.messages:
        # Descriptor ranges of messages are end-exclusive.
        snap.messages[full].reserved = Reserved(
            tuple((r.start, r.end - 1) for r in msg.reserved_range),
            frozenset(msg.reserved_name))
    for nested in msg.nested_type:
        _reserved_message(snap, nested, full)
    for enum in msg.enum_type:
        _reserved_enum(snap, enum, full)


def _reserved_enum(snap: ProtoSnapshot, enum: d.EnumDescriptorProto, prefix: str) -> None:
    full = _join(prefix, enum.name)
    if full in snap.enums:
        # ... and those of enums inclusive.
        snap.enums[full].reserved = Reserved(
            tuple((r.start, r.end) for r in enum.reserved_range), frozenset(enum.reserved_name))
