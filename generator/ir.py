"""The validated intermediate representation of protobuf schemas.

The IR sits between protoc's descriptors and the templates. It is built once, checked once
(names, duplicates, unsupported features) and then only read: every decision the templates
need is a field here, so the templates themselves stay free of logic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Label(Enum):
    """How many values a field holds and whether it must be present."""

    REQUIRED = "required"
    OPTIONAL = "optional"
    REPEATED = "repeated"


class Presence(Enum):
    """How the presence of a singular field is tracked."""

    EXPLICIT = "explicit"  # proto2 optional, proto3 `optional`, oneof members, messages
    IMPLICIT = "implicit"  # proto3 singular scalars: the zero value means "not set"
    REQUIRED = "required"  # proto2 required
    NONE = "none"  # repeated and map fields


SCALAR_TYPES = (
    "double",
    "float",
    "int64",
    "uint64",
    "int32",
    "fixed64",
    "fixed32",
    "bool",
    "string",
    "bytes",
    "uint32",
    "sfixed32",
    "sfixed64",
    "sint32",
    "sint64",
)

# Scalar types whose repeated form may be packed.
PACKABLE = frozenset(SCALAR_TYPES) - {"string", "bytes"} | {"enum"}

# From this many optional message fields on, a message keeps them in a dict (see sparse_fields).
SPARSE_MIN_FIELDS = 16


@dataclass(frozen=True, slots=True)
class SourceLocation:
    """Where a declaration sits in its .proto file (1-based line and column)."""

    path: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.column}"


@dataclass(slots=True)
class EnumValue:
    """One member of an enum."""

    proto_name: str
    py_name: str
    number: int
    comment: str
    location: SourceLocation | None = None


@dataclass(slots=True)
class EnumType:
    """An enum, top-level or nested in a message."""

    proto_name: str
    full_name: str  # e.g. "pulsar.proto.Schema.Type"
    py_name: str  # class name in its scope
    py_path: str  # dotted path inside the generated module, e.g. "Schema.Type"
    values: list[EnumValue]
    comment: str
    closed: bool  # proto2 enums are closed: unknown numbers go to the unknown-field set
    location: SourceLocation | None = None

    @property
    def default(self) -> EnumValue:
        """The value an unset field of this type reads as: the first declared one."""
        return self.values[0]


@dataclass(slots=True)
class FieldType:
    """The value type of a field: a scalar, an enum or a message."""

    kind: str  # a name from SCALAR_TYPES, or "enum" or "message"
    enum: EnumType | None = None
    message: MessageType | None = None

    @property
    def is_scalar(self) -> bool:
        return self.kind in SCALAR_TYPES


@dataclass(slots=True)
class Field:
    """A field of a message."""

    proto_name: str
    py_name: str
    number: int
    label: Label
    presence: Presence
    type: FieldType
    default: str | None  # the [default = ...] text protoc reports, None when not given
    packed: bool  # how repeated values are written; decoding accepts both forms
    oneof: str | None
    comment: str
    map_key: FieldType | None = None  # set for map fields, whose type is the entry message
    map_value: FieldType | None = None
    location: SourceLocation | None = None
    storage: str = ""  # the attribute holding the value (set by naming.name_protocol)

    @property
    def is_map(self) -> bool:
        return self.map_key is not None


@dataclass(slots=True)
class Oneof:
    """A real (not proto3-synthetic) oneof group."""

    proto_name: str
    py_name: str
    fields: list[Field]


@dataclass(frozen=True)
class PresentNames:
    """Names of the class attributes that hold a sparse message's present fields."""

    slot: str  # the dict: field name -> value, only for fields that are set
    tags: str  # ClassVar: field name -> encoded tag
    rank: str  # ClassVar: field name -> field number, to encode in number order


@dataclass(slots=True)
class MessageType:
    """A message, with its nested messages and enums."""

    proto_name: str
    full_name: str
    py_name: str
    py_path: str
    fields: list[Field]
    oneofs: list[Oneof]
    messages: list[MessageType]
    enums: list[EnumType]
    comment: str
    is_map_entry: bool = False
    location: SourceLocation | None = None
    # The attributes keeping its sparse fields, when it has some (set by naming.name_protocol).
    present: PresentNames | None = None

    def sparse_fields(self) -> list[Field]:
        """The fields kept in one dict of present values rather than a slot each.

        An envelope such as Pulsar's BaseCommand declares dozens of optional sub-messages of
        which one is set: a slot per field makes every construction, decode and encode pay for
        all the absent ones. Only singular message fields outside oneofs qualify (None is their
        unset value, so a missing dict entry reads the same), and only when there are many.
        """
        fields = [f for f in self.fields
                  if f.label is Label.OPTIONAL and f.type.kind == "message" and f.oneof is None
                  and not f.is_map]
        return fields if len(fields) >= SPARSE_MIN_FIELDS else []


@dataclass(slots=True)
class ProtoFile:
    """One .proto file and what it declares."""

    path: str  # relative to the spec directory, e.g. "pulsar/PulsarApi.proto"
    package: str
    syntax: str  # "proto2" or "proto3"
    module: str  # generated module name, e.g. "pulsar_api"
    messages: list[MessageType]
    enums: list[EnumType]
    dependencies: list[str]  # paths of imported files in the same protocol
    comment: str = ""

    def all_messages(self) -> list[MessageType]:
        """Every message in the file, nested ones after their parent, in declaration order."""
        out: list[MessageType] = []

        def walk(messages: list[MessageType]) -> None:
            for msg in messages:
                out.append(msg)
                walk(msg.messages)

        walk(self.messages)
        return out

    def all_enums(self) -> list[EnumType]:
        """Every enum in the file, top-level first, then nested ones in message order."""
        out = list(self.enums)
        for msg in self.all_messages():
            out.extend(msg.enums)
        return out


@dataclass(slots=True)
class Protocol:
    """All the protobuf files of one protocol (one directory under specs/)."""

    name: str
    files: list[ProtoFile] = field(default_factory=list)
