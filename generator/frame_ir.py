"""The intermediate representation of frame layouts: structs and one class per field kind.

Built from a YAML spec by ``frame_model``, after JSON Schema and semantic validation. Every
reference is resolved here (struct names, proto messages, size and count targets), so the
code view only has to read it. The keys of the spec language are described in
``spec_schema.json`` (each one's ``description``); how they map onto the IR is noted on
``FrameField``, ``StructDef`` and ``spec_ir.Request``. What the spec declares around its
structs (routes, requests, machines, the whole ``FrameSpec``) is in ``spec_ir``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from protoframe.generator.expr import Expr
from protoframe.generator.frame_bits import BitPart, BitSlot
from protoframe.generator.ir import Field, MessageType, SourceLocation

INT_TYPES = {
    "u8": (1, False), "u16": (2, False), "u32": (4, False), "u64": (8, False),
    "i8": (1, True), "i16": (2, True), "i32": (4, True), "i64": (8, True),
    "u24": (3, False), "i24": (3, True),
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
    """One alternative of a switch: the value, its command name and its layouts.

    A case written as one struct name has the same layout both ways (``to_server is
    to_client``); a case with only one direction is unknown in the other.
    """

    value: int
    name: str  # its command; the to-server one when ``client_name`` is set
    to_server: StructDef | None
    to_client: StructDef | None
    # The to-client layout's own command, when the spec names each direction
    # (``names: {v: {to_server: A, to_client: B}}``); None: one command both ways.
    client_name: str | None = None
    # The value as the spec wrote it when that is a character literal (``'D'``), which the
    # reference page shows; empty for a number.
    literal: str = ""

    @property
    def structs(self) -> list[StructDef]:
        """The distinct layouts of this case, to-server first."""
        out = [s for s in (self.to_server, self.to_client) if s is not None]
        return out if out[0] is not out[-1] else out[:1]

    @property
    def directional(self) -> bool:
        return self.to_server is not self.to_client

    @property
    def commands(self) -> list[tuple[str, str | None]]:
        """The commands this case names, each with the one direction it carries (None: both).

        Named per direction, each layout is its own command: a decoded frame's command is
        found by its body's class, which is why validation requires two distinct layouts.
        """
        if self.client_name is None:
            return [(self.name, None)]
        return [(self.name, "to_server"), (self.client_name, "to_client")]

    def layouts(self, direction: str | None) -> list[StructDef]:
        """The layouts of the command carrying ``direction`` (None: every layout)."""
        if direction is None:
            return self.structs
        struct = self.to_server if direction == "to_server" else self.to_client
        return [struct] if struct is not None else []

    def command_of(self, struct: StructDef) -> str:
        """The command a body of class ``struct`` is."""
        if self.client_name is not None and struct is self.to_client:
            return self.client_name
        return self.name


@dataclass
class Param:
    """A value a struct needs from the struct that contains it (``params:``).

    Params are in scope in the struct's expressions; they are not stored in the struct's
    instances, so its ``encode``/``decode`` methods take them as keyword arguments and a
    containing struct passes them with ``args:``.
    """

    name: str
    kind: str  # "int" or "bool"
    location: SourceLocation


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
    """One item of a struct layout: what every kind of field has.

    Each kind of field is a subclass (``IntField``, ``ArrayField``, ...) carrying only what
    that kind needs; consumers ``match`` on the classes. The keys kept here are the ones the
    spec language allows on a field of any kind: whether it is there (``when``...), what
    computes it (``const``, ``value``, ``size_of``...) and what bounds its bytes (``size``,
    ``prefix``, ``length``). The builder and ``frame_checks`` reject the combinations that make
    no sense for a kind, with the position of the offending key, so they are kept on the model
    the checks read.

    A field is *data* (an attribute of the generated class) unless it is *computed*: a
    constant, a size, a count, a checksum, a switch key or a ``value:`` expression, all worked
    out on encode and read (and checked where possible) on decode. Beyond that:

    - ``derive``: the field has no bytes of its own (``wire`` is False); decode evaluates the
      expression over earlier fields. Alone it is a data field some ``value:`` expression
      writes (bit-fields: ``flags`` with ``value: a | b << 2`` and ``a`` with
      ``derive: flags & 3``); encode checks that deriving it back gives the stored value.
      With ``value``/``count_of`` it is a computed local, e.g. a count split over two fields.
    - ``when`` on a computed field: absent, it reads as ``default`` (0), so expressions that
      use it stay integers.
    - ``const`` with ``when_peek`` (``marker``): an optional constant stored as a bool.
    - ``size_range``: the field holds the byte size of the fields ``from``..``to``.
    - ``args``: values for the params of the struct the field holds, expressions in the
      holder's scope (``_index`` is an array element's position).
    """

    kind: ClassVar[str]  # the spec's name for the kind, for messages (never to branch on)
    name: str
    doc: str
    location: SourceLocation
    const: int | None = None
    value: Expr | None = None
    derive: Expr | None = None  # no bytes of its own: decode computes it from earlier fields
    size_of: str | None = None  # target field name or "rest"
    # What the size counts beyond what it measures: ``includes: self`` (its own bytes) or
    # ``header`` (the struct up to and including it), and ``adjust: N`` added on top.
    size_includes: str | None = None
    size_adjust: int = 0
    size_range: tuple[str, str] | None = None  # size_of: {from, to}: bytes of several fields
    count_of: str | None = None
    checksum: Checksum | None = None
    when: Expr | None = None
    when_peek: tuple[str, int] | None = None
    when_remaining: bool = False
    default: int | str | bool | None = None
    length: int | None = None  # fixed byte length
    size: str | None = None  # "rest", a field name, or a dotted proto field reference
    size_field: IntField | VarintField | None = None  # resolved: the size field bounding it
    prefix: str | None = None
    # With a signed prefix: a length of -1 stands for None (``nullable: true``).
    nullable: bool = False
    compression: Compression | None = None
    args: dict[str, Expr] = field(default_factory=dict)  # params of the struct it holds

    is_switch_key: bool = False
    # Bytes, a string or a list ended by these bytes (``terminator:``); for a list of
    # integers, the element's encoding of ``terminator_value``.
    terminator: bytes | None = None
    terminator_value: int | None = None  # a list of integers: the element value that ends it
    # A constant string or bytes field (``const:``): its bytes, without prefix or terminator.
    const_data: bytes | None = None
    # An integer's allowed values (``min:``, ``max:``, ``nonzero: true``), None: no bound.
    min_value: int | None = None
    max_value: int | None = None
    nonzero: bool = False
    # A sub-field of an integer's ``bits:``: no bytes of its own, its bits of the integer.
    bit_of: BitSlot | None = None

    @property
    def marker(self) -> bool:
        """A constant whose presence is tested by peeking: stored as a bool (True = present)."""
        return self.const is not None and self.when_peek is not None

    @property
    def computed(self) -> bool:
        """Computed fields are derived on encode and checked on decode, never stored."""
        return ((self.const is not None and not self.marker) or self.value is not None
                or self.const_data is not None
                or self.size_of is not None or self.size_range is not None
                or self.count_of is not None or self.checksum is not None
                or self.is_switch_key)

    @property
    def wire(self) -> bool:
        """Whether the field has bytes of its own (``derive`` fields have none)."""
        return self.derive is None

    @property
    def optional(self) -> bool:
        return bool(self.when or self.when_peek or self.when_remaining)

    @property
    def fixed_size(self) -> int | None:
        """Bytes this field always takes, or None when it varies."""
        if not self.wire:
            return 0
        if self.optional:
            return None
        return self.width_when_present

    @property
    def width_when_present(self) -> int | None:
        """Bytes the field takes when it is there (whether or not it is optional)."""
        return None


@dataclass
class IntField(FrameField):
    """A fixed-width integer (``u8`` .. ``i64``)."""

    kind: ClassVar[str] = "int"
    width: int = 0
    signed: bool = False
    order: str = "big"
    # Named sub-fields (``bits:``), most significant first; each named one is also a field of
    # the struct, right after this one (with ``bit_of`` set).
    bits: list[BitPart] = field(default_factory=list)

    @property
    def reserved_mask(self) -> int:
        """The bits ``bits:`` reserves: they must be zero on the wire."""
        return sum(p.mask for p in self.bits if p.reserved)

    @property
    def width_when_present(self) -> int | None:
        return self.width


@dataclass
class VarintField(FrameField):
    """A protobuf-style base-128 varint."""

    kind: ClassVar[str] = "varint"
    # ``max_bytes: N``: at most N bytes (a continuation bit on the N-th is malformed).
    max_bytes: int | None = None
    # ``leb128`` (the protobuf form) or ``lenenc`` (MySQL's length-encoded integer, whose
    # 0xfb is NULL: with ``nullable: true`` the field is ``int | None``).
    encoding: str = "leb128"


@dataclass
class BoolField(FrameField):
    """One byte, 0 or 1."""

    kind: ClassVar[str] = "bool"

    @property
    def width_when_present(self) -> int | None:
        return 1


@dataclass
class FloatField(FrameField):
    """An IEEE 754 binary floating-point number (``f32``, ``f64``), a ``float`` in Python."""

    kind: ClassVar[str] = "float"
    width: int = 8
    order: str = "big"

    @property
    def width_when_present(self) -> int | None:
        return self.width


@dataclass
class UuidField(FrameField):
    """Sixteen bytes, a ``uuid.UUID`` in Python."""

    kind: ClassVar[str] = "uuid"

    @property
    def width_when_present(self) -> int | None:
        return 16


@dataclass
class BytesField(FrameField):
    """Raw bytes, bounded by ``length``, ``prefix`` or ``size``."""

    kind: ClassVar[str] = "bytes"
    # ``mask: <field>``: XOR-masked on the wire with the bytes of that earlier field, repeated
    # (WebSocket's payload and its masking key); resolved to the key's field.
    mask: str | None = None
    mask_key: FrameField | None = field(default=None, repr=False)

    @property
    def width_when_present(self) -> int | None:
        return self.length


@dataclass
class StringField(FrameField):
    """Text, bounded like bytes, in ``encoding``."""

    kind: ClassVar[str] = "string"
    encoding: str = "utf8"


@dataclass
class ProtoField(FrameField):
    """A serialized protobuf message; with ``dispatch`` it names the frame's commands."""

    kind: ClassVar[str] = "proto"
    message: MessageType | None = None  # None only while the spec has errors
    dispatch_on: Field | None = None
    commands: list[ProtoCommand] = field(default_factory=list)


@dataclass
class StructField(FrameField):
    """A nested struct (also an array's struct element)."""

    kind: ClassVar[str] = "struct"
    struct: StructDef | None = None  # None only while the spec has errors


@dataclass
class ArrayField(FrameField):
    """Repeated elements: ``element`` is a nameless field of a scalar or struct kind."""

    kind: ClassVar[str] = "array"
    element: FrameField | None = None  # None only while the spec has errors
    count: Expr | None = None
    count_from_field: bool = False  # count comes from a count_of field (always consistent)
    until_end: bool = False
    min_items: int | None = None  # ``min_items:``
    max_items: int | None = None  # ``max_items:``


@dataclass
class SwitchField(FrameField):
    """A struct chosen by the value of an earlier integer field (``on``)."""

    kind: ClassVar[str] = "switch"
    switch_on: str | None = None
    cases: list[Case] = field(default_factory=list)
    # Generated names, set by naming.name_frame_spec: the type alias of the union of its case
    # structs, and the prefix of its module-level tables (``<prefix>_CODES`` ...).
    alias: str = ""
    tables: str = ""


@dataclass
class BlocksField(FrameField):
    """A struct's bytes cut into length-prefixed blocks (TANK's bundles)."""

    kind: ClassVar[str] = "blocks"
    struct: StructDef | None = None  # None only while the spec has errors
    block_count: str = "u32"
    block_length: str = "u32"
    block_size: int = 8192
    max_blocks: int | None = None


def nested_struct(f: FrameField) -> StructDef | None:
    """The struct a struct or blocks field holds (None for every other kind)."""
    return f.struct if isinstance(f, StructField | BlocksField) else None


def nested_message(f: FrameField) -> MessageType | None:
    """The message a proto field holds (None for every other kind)."""
    return f.message if isinstance(f, ProtoField) else None


def held_struct(f: FrameField) -> StructDef | None:
    """The struct a field holds: its own (struct, blocks) or its elements' (array)."""
    if isinstance(f, StructField | BlocksField):
        return f.struct
    if isinstance(f, ArrayField) and f.element is not None:
        return held_struct(f.element)
    return None


def struct_refs(f: FrameField) -> list[StructDef]:
    """The structs a field holds: its own, its elements', its switch cases'."""
    own = nested_struct(f)
    out = [own] if own is not None else []
    element = held_struct(f.element) if isinstance(f, ArrayField) and f.element else None
    if element is not None:
        out.append(element)
    for case in f.cases if isinstance(f, SwitchField) else []:
        for s in case.structs:
            if all(s is not o for o in out):
                out.append(s)
    return out


@dataclass
class Requirement:
    """One ``require:`` rule of a struct: an expression and where the spec says it."""

    expr: Expr
    location: SourceLocation


@dataclass
class StructDef:
    """A struct (or the frame): its fields in wire order, params and trailing-bytes policy.

    ``trailing == "ignore"``: decoding skips whatever is left of the region the struct is
    decoded in (its declared size, the switch body or block content, the frame) after the last
    field, for protocols whose peers append fields older peers do not know.
    """

    name: str
    doc: str
    fields: list[FrameField]
    location: SourceLocation
    is_frame: bool = False
    params: list[Param] = field(default_factory=list)
    trailing: str = "error"  # "error": bytes after the last field are an error; "ignore": skipped
    # ``delimiter:``: the struct's bytes end with these (STOMP's NUL, HTTP's CRLF CRLF); its
    # fields are read up to them, and the delimiter is written after them.
    delimiter: bytes | None = None
    # ``require:``: rules every value of the struct obeys, expressions over its data fields
    # and params (WebSocket's control frames: never fragmented, at most 125 bytes).
    requires: list[Requirement] = field(default_factory=list)

    def field(self, name: str) -> FrameField | None:
        return next((f for f in self.fields if f.name == name), None)

    @property
    def data_fields(self) -> list[FrameField]:
        return [f for f in self.fields if not f.computed]


def raw_indices(struct: StructDef) -> list[int]:
    """For each field of ``struct``, its index in the spec's list: a bit sub-field is written
    inside its integer's ``bits:``, so it has the integer's."""
    out: list[int] = []
    n = -1
    for f in struct.fields:
        n += f.bit_of is None
        out.append(n)
    return out
