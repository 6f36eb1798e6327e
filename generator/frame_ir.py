"""The intermediate representation of frame layouts, interactions and state machines.

Built from a YAML spec by ``frame_model``, after JSON Schema and semantic validation. Every
reference is resolved here (struct names, proto messages, size and count targets), so the
code view only has to read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from generator.expr import Expr
from generator.ir import EnumType, Field, MessageType, SourceLocation

INT_TYPES = {
    "u8": (1, False), "u16": (2, False), "u32": (4, False), "u64": (8, False),
    "i8": (1, True), "i16": (2, True), "i32": (4, True), "i64": (8, True),
}


@dataclass
class Checksum:
    algorithm: str  # "crc32c" or "crc32"
    start: str  # the field the checksummed range starts at; it runs to the end of the struct


@dataclass
class Compression:
    codec: str  # dotted reference to the codec field (an enum whose names are codec names)
    uncompressed_size: str | None
    codec_names: dict[int, str] | None = None  # for integer codec fields


@dataclass
class Case:
    """One alternative of a switch: the value, its command name and its layouts."""

    value: int
    name: str
    to_server: StructDef | None
    to_client: StructDef | None

    @property
    def structs(self) -> list[StructDef]:
        out = [s for s in (self.to_server, self.to_client) if s is not None]
        return out if out[0] is not out[-1] else out[:1]


@dataclass
class ProtoCommand:
    """A command selected by a protobuf envelope: enum value -> sub-message field."""

    name: str  # enum member name, e.g. "SEND"
    value: int
    enum_member: str  # python name of the member
    field: Field  # the envelope's field whose number equals the value
    message: MessageType


@dataclass
class FrameField:
    """One item of a struct layout."""

    name: str
    kind: str  # int, varint, bool, uuid, bytes, string, proto, struct, array, switch, blocks
    doc: str
    location: SourceLocation
    width: int = 0
    signed: bool = False
    order: str = "big"
    const: int | None = None
    value: Expr | None = None
    size_of: str | None = None  # target field name or "rest"
    count_of: str | None = None
    checksum: Checksum | None = None
    when: Expr | None = None
    when_peek: tuple[str, int] | None = None
    when_remaining: bool = False
    default: int | str | bool | None = None
    length: int | None = None  # fixed byte length
    size: str | None = None  # "rest", a field name, or a dotted proto field reference
    size_field: FrameField | None = None  # resolved: the size field that bounds this one
    prefix: str | None = None
    encoding: str = "utf8"
    message: MessageType | None = None
    struct: StructDef | None = None
    dispatch_on: Field | None = None
    commands: list[ProtoCommand] = field(default_factory=list)
    element: FrameField | None = None  # array element (a nameless field)
    count: Expr | None = None
    until_end: bool = False
    compression: Compression | None = None
    switch_on: str | None = None
    cases: list[Case] = field(default_factory=list)
    block_count: str = "u32"
    block_length: str = "u32"
    block_size: int = 8192
    max_blocks: int | None = None

    @property
    def computed(self) -> bool:
        """Computed fields are derived on encode and checked on decode, never stored."""
        return (self.const is not None or self.value is not None or self.size_of is not None
                or self.count_of is not None or self.checksum is not None or self.is_switch_key)

    is_switch_key: bool = False

    @property
    def optional(self) -> bool:
        return bool(self.when or self.when_peek or self.when_remaining)

    @property
    def fixed_size(self) -> int | None:
        """Bytes this field always takes, or None when it varies."""
        if self.optional:
            return None
        if self.kind == "int":
            return self.width
        if self.kind == "bool":
            return 1
        if self.kind == "uuid":
            return 16
        if self.kind == "bytes" and self.length is not None:
            return self.length
        return None


@dataclass
class StructDef:
    name: str
    doc: str
    fields: list[FrameField]
    location: SourceLocation
    is_frame: bool = False

    def field(self, name: str) -> FrameField | None:
        return next((f for f in self.fields if f.name == name), None)

    @property
    def data_fields(self) -> list[FrameField]:
        return [f for f in self.fields if not f.computed]


@dataclass
class Request:
    request: str
    response: str
    errors: list[str]
    correlate: list[str]
    method: str


@dataclass
class Transition:
    sources: list[str]
    target: str
    send: str | None
    receive: str | None
    event: str | None
    when: Expr | None
    location: SourceLocation


@dataclass
class Machine:
    name: str
    doc: str
    key: str | None
    initial: str
    states: list[str]
    transitions: list[Transition]


@dataclass
class FrameSpec:
    """Everything one YAML spec declares."""

    protocol: str
    doc: str
    path: str
    byte_order: str
    max_frame_size: int
    structs: list[StructDef]
    frame: StructDef
    commands: dict[str, CommandInfo]
    allocate: str | None
    requests: list[Request]
    one_way: list[str]
    server_push: list[str]
    machines: list[Machine]
    proto_modules: dict[str, str]  # full name of a proto type -> generated module
    enums_used: list[EnumType] = field(default_factory=list)


@dataclass
class CommandInfo:
    """A command the interactions and machines can name, and how to find its body."""

    name: str
    value: int
    body_type: str  # Python type of the body (a proto message or a struct)
    body_fields: dict[str, str]  # spec field name -> Python attribute on the body
    proto: ProtoCommand | None = None
    case: Case | None = None
