"""The operations of a layout plan (``layout_plan``): one typed, frozen class per thing a
codec does at a point of a struct's layout.

Every operation has a ``word``. The words the compiled frame codec knows are the ones
``runtime/codec/vocabulary.py`` defines (``FRAME_OPS`` and ``ENVELOPE``, read by
:func:`c_words`); an operation the C codec cannot do (an array, a condition, a signed size...)
has a word of its own outside that vocabulary.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Literal, TypeAlias

from protoframe.generator.compiled_exprs import Step, guard_program, program
from protoframe.generator.expr import Expr
from protoframe.generator.frame_ir import FrameField, ProtoField, StructDef
from protoframe.generator.ir import MessageType
from protoframe.runtime.codec import vocabulary

if TYPE_CHECKING:
    from protoframe.generator.layout_plan import LayoutPlan


def c_words() -> frozenset[str]:
    """The operation words the compiled frame codec knows (read when asked, so a test can
    change the vocabulary)."""
    return (frozenset(vocabulary.FRAME_OPS) | {vocabulary.ENVELOPE}
            | set(vocabulary.FRAME_ALIASES) | set(vocabulary.FRAME_PLAN_WORDS))


@dataclass(frozen=True)
class IntType:
    """A fixed-width integer as the tables name it: ``u8``, ``u32be``, ``i16le``."""

    width: int
    signed: bool
    order: str

    @property
    def name(self) -> str:
        name = f"{'i' if self.signed else 'u'}{self.width * 8}"
        return name if self.width == 1 else name + ("le" if self.order == "little" else "be")


@dataclass(frozen=True)
class Region:
    """How the bytes of a field are bounded, as the spec says (each emitter decides which
    bound it follows when several are given): a fixed ``length``, a ``size`` (``"rest"``, a
    field or a dotted path) or a length ``prefix`` of its own."""

    length: int | None = None
    size: str | None = None
    # The size field is an unsigned integer or a varint, so a negative size cannot be read.
    size_unsigned: bool = False
    # The size is a field of this struct the encoder fills in: the field is encoded ahead.
    size_written_first: bool = False
    prefix: IntType | Literal["varint", "lenenc"] | None = None
    # A prefix of -1 (for lenenc, NULL) stands for None (``nullable: true``).
    nullable: bool = False


TO_END = Region(size="rest")


# ---------------------------------------------------------------------------------------------
# operations


@dataclass(frozen=True)
class Op:
    """One operation of a plan; ``word`` names it (a vocabulary word when the C codec has it)."""

    word: ClassVar[str]


@dataclass(frozen=True)
class Params(Op):
    """The struct takes values from the struct holding it (``params:``)."""

    names: tuple[str, ...]
    # Every param is an int or a bool (the compiled codec passes them as 64-bit integers).
    int_kinds: bool = True

    @property
    def word(self) -> str:  # type: ignore[override]
        return "params" if self.int_kinds else "params_other"


@dataclass(frozen=True)
class SkipTrailing(Op):
    """Bytes after the last field are skipped instead of rejected (``trailing: ignore``)."""

    word: ClassVar[str] = "skip_trailing"


@dataclass(frozen=True)
class Delimited(Op):
    """The struct ends with ``delimiter`` (``delimiter:``): its fields are read from the bytes
    before it, and it is written after them."""

    word: ClassVar[str] = "delimited"
    delimiter: bytes


@dataclass(frozen=True)
class Requires(Op):
    """Rules every value obeys (``require:``): checked before encoding writes anything and
    after decoding has read every field."""

    word: ClassVar[str] = "requires"
    exprs: tuple[Expr, ...] = field(compare=False)


@dataclass(frozen=True)
class FieldOp(Op):
    """The operation of one field; ``field`` is the model's field it was lowered from."""

    field: FrameField = field(compare=False, repr=False)

    @property
    def name(self) -> str:
        return self.field.name


@dataclass(frozen=True)
class ReadInt(FieldOp):
    """A stored fixed-width integer."""

    word: ClassVar[str] = "int"
    int_type: IntType


@dataclass(frozen=True)
class Const(FieldOp):
    """A constant: written on encode, checked on decode."""

    word: ClassVar[str] = "const"
    int_type: IntType
    value: int


@dataclass(frozen=True)
class SizeOf(FieldOp):
    """The byte size of the later field ``target``; the C codec takes an unsigned size of a
    protobuf message or of bytes."""

    int_type: IntType
    target: str
    of_message_or_bytes: bool  # the target is a protobuf message or bytes
    # What the number counts beyond the target (``includes:``, ``adjust:``): the wire holds
    # the target's size plus this.
    adjust: int = 0

    @property
    def word(self) -> str:  # type: ignore[override]
        if self.adjust:
            return "adjusted_size"
        if self.int_type.signed:
            return "signed_size"
        return "size" if self.of_message_or_bytes else "size_of_other"


@dataclass(frozen=True)
class SizeRest(FieldOp):
    """The byte size of everything after it: the struct's region ends there."""

    int_type: IntType
    adjust: int = 0  # as for ``SizeOf``

    @property
    def word(self) -> str:  # type: ignore[override]
        if self.adjust:
            return "adjusted_size_rest"
        return "signed_size_rest" if self.int_type.signed else "size_rest"


@dataclass(frozen=True)
class Checksum(FieldOp):
    """A checksum of the bytes from ``start`` to the end of the struct. ``early``: verified as
    soon as it is read, the only way the C codec checks one."""

    int_type: IntType
    algorithm: str
    start: str
    early: bool

    @property
    def word(self) -> str:  # type: ignore[override]
        if self.int_type.signed:
            return "signed_checksum"
        return "checksum" if self.early else "late_checksum"


@dataclass(frozen=True)
class ProtoBody(FieldOp):
    """A protobuf message sized by the earlier unsigned size field ``size``."""

    word: ClassVar[str] = "proto"
    message: MessageType = field(compare=False)
    size: str
    region: Region = field(compare=False, repr=False)


@dataclass(frozen=True)
class Envelope(FieldOp):
    """A sized protobuf envelope whose ``dispatch`` attribute selects the command body.

    ``present``: the slot of the message's dict of present sparse fields when every body is
    kept there (the codec then looks in it instead of calling each body's property)."""

    word: ClassVar[str] = "envelope"
    message: MessageType = field(compare=False)
    size: str
    dispatch: str
    present: str | None
    region: Region = field(compare=False, repr=False)


@dataclass(frozen=True)
class ProtoOther(FieldOp):
    """A protobuf message bounded otherwise (the rest, a dotted or later size...)."""

    word: ClassVar[str] = "proto_unsized"
    region: Region


@dataclass(frozen=True)
class BytesSized(FieldOp):
    """Bytes sized by the earlier unsigned size field ``size``."""

    word: ClassVar[str] = "bytes"
    size: str
    region: Region = field(compare=False, repr=False)


@dataclass(frozen=True)
class BytesToEnd(FieldOp):
    """Bytes running to the end of the struct's region."""

    word: ClassVar[str] = "bytes"
    region: Region = field(default=TO_END, compare=False, repr=False)


@dataclass(frozen=True)
class BytesOther(FieldOp):
    """Bytes bounded otherwise, or compressed bytes with a size."""

    region: Region

    @property
    def word(self) -> str:  # type: ignore[override]
        """``signed_bytes`` (in the C vocabulary) when an earlier signed integer of this struct
        holds the size, as ``length: i32`` before the bytes it measures; ``message_bytes``
        when a field of a protobuf message of this struct does (``size: metadata.payload_size``,
        Pulsar's BatchEntry)."""
        f = self.field
        r = self.region
        if (unconditional(f) and f.compression is None and r.size is not None and r.size != "rest"
                and "." not in r.size and r.size_written_first and not r.size_unsigned
                and r.prefix is None and r.length is None and not r.nullable):
            return "signed_bytes"
        if (unconditional(f) and f.compression is None and r.size is not None
                and r.size.count(".") == 1 and r.prefix is None and r.length is None
                and not r.nullable):
            # Whether the message is an earlier field of the struct, and the size an integer
            # in a slot of its own, is c_links_hold's to say.
            return "message_bytes"
        return "bytes_other"


@dataclass(frozen=True)
class Always:
    pass


@dataclass(frozen=True)
class IfRemaining:
    pass


@dataclass(frozen=True)
class IfPeek:
    int_type: IntType
    equals: int


Presence = Always | IfRemaining | IfPeek


@dataclass(frozen=True)
class Nested(FieldOp):
    """A nested struct read in the holder's region, there as ``when`` says."""

    word: ClassVar[str] = "struct"
    plan: LayoutPlan = field(compare=False)
    when: Presence
    region: Region = field(compare=False, repr=False)

    @property
    def struct(self) -> StructDef:
        return self.plan.struct


@dataclass(frozen=True)
class NestedOther(FieldOp):
    """A nested struct with a size of its own or another condition; ``plan``: the nested
    struct's, when it is lowered before this one (the compiled codec may take it: there only
    when a ``when:`` condition holds, or filling the size an earlier field gives)."""

    struct: StructDef = field(compare=False, repr=False)
    region: Region
    plan: LayoutPlan | None = field(default=None, compare=False, repr=False)

    @property
    def word(self) -> str:  # type: ignore[override]
        """``struct_sized`` (in the C vocabulary) for a compiled struct without params, always
        there, filling the size an earlier unsigned size field of this struct gives;
        ``struct_other`` otherwise."""
        r = self.region
        f = self.field
        if (self.plan is not None and self.plan.compiled and not self.plan.struct.params
                and unconditional(f) and not f.args and f.compression is None
                and r.size is not None and r.size != "rest" and "." not in r.size
                and r.size_written_first and r.size_unsigned and r.prefix is None
                and r.length is None and not r.nullable):
            return "struct_sized"
        return "struct_other"


@dataclass(frozen=True)
class ReadVarint(FieldOp):
    """A varint; ``const``: the value it must have; ``sets_end``: it is the size of the rest;
    ``max_bytes``: at most that many bytes (``max_bytes:``), else up to 10."""

    const: int | None
    sets_end: bool
    max_bytes: int | None = None
    adjust: int = 0  # a size of the rest or of a field: what it counts beyond (``adjust:``)
    # It is the size of a nested struct of this struct (``size_of:``).
    sizes_struct: bool = False

    @property
    def word(self) -> str:  # type: ignore[override]
        """``varint`` (in the C vocabulary) for a stored varint always there, of up to 10
        bytes; ``size_of_struct`` for one that is only the size of a nested struct;
        ``varint_other`` for a constant, another size, a bounded one or one with a
        condition."""
        f = self.field
        if (self.sizes_struct and self.const is None and not self.sets_end and not self.adjust
                and self.max_bytes is None and f.value is None and f.checksum is None
                and f.count_of is None and f.size_range is None and not f.is_switch_key
                and unconditional(f)):
            return "size_of_struct"
        plain = _plain_stored(self.field, self.const, self.sets_end)
        return "varint" if plain and self.max_bytes is None and not self.adjust else \
            "varint_other"


@dataclass(frozen=True)
class ReadLenenc(FieldOp):
    """A MySQL length-encoded integer (``encoding: lenenc``); ``nullable``: its NULL (0xfb)
    reads as None, else NULL is an error; ``const``: the value it must have."""

    const: int | None
    nullable: bool

    @property
    def word(self) -> str:  # type: ignore[override]
        """``lenenc_int`` (in the C vocabulary; not its "lenenc", bytes or text after such an
        integer) for one stored as read or a constant, always there; ``lenenc_int_other``
        otherwise."""
        f = self.field
        if (unconditional(f) and f.size_of is None and f.value is None and f.count_of is None
                and f.checksum is None and f.size_range is None and not f.is_switch_key
                and (self.const is None or 0 <= self.const < 2**64 and not self.nullable)):
            return "lenenc_int"
        return "lenenc_int_other"


@dataclass(frozen=True)
class ReadBool(FieldOp):
    """A byte read as a bool (``const`` and ``sets_end`` as for ``ReadVarint``)."""

    const: int | None
    sets_end: bool

    @property
    def word(self) -> str:  # type: ignore[override]
        """``bool`` (in the C vocabulary) as ``varint`` is; ``bool_other`` otherwise."""
        return "bool" if _plain_stored(self.field, self.const, self.sets_end) else "bool_other"


def _plain_stored(f: FrameField, const: int | None, sets_end: bool) -> bool:
    """Whether ``f`` is stored as read: no constant, no size, no computed value, always there."""
    return (const is None and not sets_end and f.size_of is None and f.value is None
            and f.count_of is None and f.checksum is None and f.size_range is None
            and not f.is_switch_key and unconditional(f))


@dataclass(frozen=True)
class ReadUuid(FieldOp):
    @property
    def word(self) -> str:  # type: ignore[override]
        """``uuid`` (in the C vocabulary) when always there; ``uuid_other`` otherwise."""
        return "uuid" if unconditional(self.field) else "uuid_other"


@dataclass(frozen=True)
class ReadFloat(FieldOp):
    """An IEEE 754 number of ``width`` bytes (4 or 8) in ``order``."""

    word: ClassVar[str] = "float"
    width: int
    order: str


@dataclass(frozen=True)
class String(FieldOp):
    encoding: str
    region: Region

    @property
    def word(self) -> str:  # type: ignore[override]
        """``text_rest`` (in the C vocabulary) for UTF-8 text running to the end of the
        struct's region, always there; ``string`` otherwise."""
        f = self.field
        r = self.region
        if (self.encoding == "utf8" and r.size == "rest" and r.length is None
                and r.prefix is None and unconditional(f) and f.compression is None
                and f.const is None and f.value is None):
            return "text_rest"
        return "string"


def unconditional(f: FrameField) -> bool:
    """Whether ``f`` is always on the wire: no condition, peek or test for remaining bytes."""
    return (f.when is None and f.when_peek is None and not f.when_remaining and not f.optional
            and not f.marker and f.wire)


def _plain_region(region: Region) -> bool:
    return region.length is None and region.size is None and region.prefix is None


@dataclass(frozen=True)
class Array(FieldOp):
    """A list of ``element`` (the operation of one item), ``count`` long or read ``until_end``.

    ``count_from_field``: a ``count_of`` field holds the count, so it always agrees;
    ``index_used``: the element's arguments name ``_index``; ``region``: as the spec bounds the
    whole list (an array measured by a size field is encoded ahead of it)."""

    element: KindOp = field(compare=False)
    count: Expr | None = field(compare=False)
    until_end: bool
    count_from_field: bool
    index_used: bool
    region: Region
    # ``terminator:``: the list ends at an element equal to ``terminator_value`` (integers)
    # or where the next bytes are ``terminator`` (structs); the terminator is not stored.
    terminator: bytes | None = None
    terminator_value: int | None = None
    min_items: int | None = None
    max_items: int | None = None

    @property
    def runs_to_end(self) -> bool:
        """Whether this is a list of compiled nested structs, always there each, read until the
        end of the region (a ``struct_run``, when the field itself is always there)."""
        return _plain_region(self.region) and self._a_run()

    def _a_run(self) -> bool:
        el = self.element
        return (not self.item_limits and self.until_end and self.count is None
                and not self.index_used and isinstance(el, Nested)
                and isinstance(el.when, Always) and el.plan.compiled)

    @property
    def runs_to_its_size(self) -> bool:
        """Whether this is a list of compiled nested structs, always there each, read until
        the end of the size an earlier unsigned size field gives (AMQP's field tables)."""
        r = self.region
        return (r.length is None and r.prefix is None and r.size not in (None, "rest")
                and "." not in str(r.size) and r.size_unsigned and self._a_run())

    @property
    def item_limits(self) -> bool:
        """Whether the list has a terminator or a bound on its length."""
        return (self.terminator is not None or self.min_items is not None
                or self.max_items is not None)

    @property
    def word(self) -> str:  # type: ignore[override]
        """``struct_run`` (in the C vocabulary) for a list of nested structs, always there and
        compiled, read until the end of the region (``struct_run_sized``: of its size field's);
        ``int_array`` for fixed-width integers counted by their ``count_of`` field;
        ``struct_array`` for one counted by its
        ``count_of`` field; ``array`` for any other list. A list with a terminator or bounds
        has a word of its own, ``array_limited``, so that a C codec that learns plain arrays
        does not take these without learning what they check."""
        if self.item_limits:
            return "array_limited"
        el = self.element
        if unconditional(self.field) and self.runs_to_end:
            return "struct_run"
        if unconditional(self.field) and self.runs_to_its_size:
            return "struct_run_sized"
        counted = unconditional(self.field) and (
            self.count_from_field and self.count is not None
            and self.count.text.strip().isidentifier() and not self.until_end
            and not self.index_used and _plain_region(self.region)
            or self.count_program is not None)
        if counted and isinstance(el, Nested) and isinstance(el.when, Always) and el.plan.compiled:
            return "struct_array"
        if counted and type(el) is ReadInt and el.int_type.width in vocabulary.FRAME_INT_WIDTHS:
            return "int_array"
        return "array"

    @property
    def count_program(self) -> tuple[Step, ...] | None:
        """The program of a count that is not a ``count_of`` field's (``count: n`` naming a
        stored integer, or an expression, as MariaDB's scramble length), for a list of plain
        items with no other bounds; None otherwise. Which rows it may read is the plan's
        business (``layout_plan.c_links_hold``)."""
        if (self.count is None or self.count_from_field or self.until_end or self.index_used
                or self.item_limits or not _plain_region(self.region)):
            return None
        return program(self.count, extended=True)


@dataclass(frozen=True)
class Switch(FieldOp):
    """A body chosen by the earlier field ``key``; ``directional``: a case decodes another
    struct on the way to the server than on the way to the client."""

    key: str
    directional: bool
    region: Region

    @property
    def word(self) -> str:  # type: ignore[override]
        """``switch`` (in the C vocabulary) for a switch the same both ways, bounded by a size
        or by its region; ``directional_switch`` (a "switch" row holding the cases of both
        directions: its struct's decode methods take the direction) for one decoding another
        struct each way, bounded so; ``switch_other`` or ``directional_switch_other`` otherwise."""
        other = "directional_switch_other" if self.directional else "switch_other"
        if not unconditional(self.field):
            return other
        r = self.region
        if r.length is None and r.prefix is None and (r.size is None or (
                r.size != "rest" and "." not in r.size and r.size_written_first)):
            return "directional_switch" if self.directional else "switch"
        return other


@dataclass(frozen=True)
class Blocks(FieldOp):
    """A struct's encoding cut in length-prefixed blocks of up to ``block_size`` bytes."""

    word: ClassVar[str] = "blocks"
    struct: StructDef = field(compare=False, repr=False)
    count_type: IntType
    length_type: IntType
    block_size: int
    max_blocks: int | None


@dataclass(frozen=True)
class Bits(FieldOp):
    """No bytes of its own: derived on decode from earlier fields (``derive:``); ``as_bool``:
    the field is a bool."""

    expr: Expr = field(compare=False)
    as_bool: bool

    @property
    def word(self) -> str:  # type: ignore[override]
        """``derive`` (in the C vocabulary) when the expression has a program
        (``compiled_exprs``), ``derived_key`` for a switch's key, ``derived_size`` (a "derive"
        row not stored) for one that is the size of a later field (computed, so not an
        attribute: WebSocket's payload length); ``derive_other`` otherwise."""
        if program(self.expr, extended=True) is None:
            return "derive_other"
        if self.field.is_switch_key:
            return "derived_key"
        return "derived_size" if self.field.computed else "derive"


@dataclass(frozen=True)
class Terminated(FieldOp):
    """Bytes or text (``text``) ended by ``terminator`` in the struct's region (a C string)."""

    text: bool
    encoding: str
    terminator: bytes

    @property
    def word(self) -> str:  # type: ignore[override]
        """``terminated`` (in the C vocabulary) for bytes, UTF-8 or modified UTF-8 text always
        there; ``terminated_other`` otherwise."""
        f = self.field
        if (unconditional(f) and f.compression is None and f.value is None
                and (not self.text or self.encoding in ("utf8", "mutf8"))):
            return "terminated"
        return "terminated_other"


@dataclass(frozen=True)
class ConstBytes(FieldOp):
    """A constant string or bytes: ``wire`` (with its prefix or terminator) written on encode,
    checked on decode, not stored."""

    word: ClassVar[str] = "const_bytes"
    wire: bytes


@dataclass(frozen=True)
class RangedInt(FieldOp):
    """A stored integer whose values are bounded (``min:``, ``max:``, ``nonzero:``): ``low`` and
    ``high`` are None where the type itself bounds it, ``nonzero`` only when 0 is in range."""

    shape: IntType | Literal["varint"]
    low: int | None
    high: int | None
    nonzero: bool

    @property
    def word(self) -> str:  # type: ignore[override]
        """``int_range`` (in the C vocabulary) for a stored integer always there, nothing but
        its range on it; ``int_range_other`` otherwise."""
        return "int_range" if _plain_stored(self.field, None, False) else "int_range_other"


@dataclass(frozen=True)
class ReadPacked(FieldOp):
    """An integer holding named bit sub-fields (``bits:``); ``reserved``: the bits that must be
    zero (0 when none are reserved)."""

    word: ClassVar[str] = "packed"
    int_type: IntType
    reserved: int


@dataclass(frozen=True)
class SubField(FieldOp):
    """A bit sub-field: no bytes of its own, ``width`` bits of the earlier integer
    ``container``, ``shift`` bits above bit 0; ``as_bool``: a one-bit flag; ``enum``: the
    spec enum a stored value is decoded as."""

    container: str
    shift: int
    width: int
    as_bool: bool
    enum: str | None = None

    @property
    def word(self) -> str:  # type: ignore[override]
        """``bit_field`` (in the C vocabulary), unless its ``value:`` has no program run on
        encode or it is computed otherwise (``bit_field_other``)."""
        f = self.field
        if f.value is not None and program(f.value, extended=True, presence=True) is None:
            return "bit_field_other"
        if f.value is None and f.computed:
            return "bit_field_other"  # a switch's key: the codec finds it from the body
        return "bit_field"


@dataclass(frozen=True)
class MaskedBytes(FieldOp):
    """Bytes XOR-masked with the bytes of an earlier field, repeated (``mask:``): ``key`` is
    that field; ``key_int`` its integer type when it is one (else it holds the bytes), and
    ``key_optional`` whether it may be None (then the bytes are sent as they are)."""

    region: Region
    key: str
    key_int: IntType | None
    key_optional: bool

    @property
    def word(self) -> str:  # type: ignore[override]
        """``masked_bytes`` (in the C vocabulary) for masked bytes always there, sized by a
        field of this struct or the rest of the region; ``masked_bytes_other`` otherwise. That
        the key and the size are rows the C codec can follow is the plan's business
        (``layout_plan.c_links_hold``)."""
        r = self.region
        if (unconditional(self.field) and self.field.compression is None and r.size is not None
                and "." not in r.size and r.prefix is None and r.length is None
                and not r.nullable):
            return "masked_bytes"
        return "masked_bytes_other"


@dataclass(frozen=True)
class Wrap(FieldOp):
    """An operation something beyond the field's kind makes Python-only; ``inner`` is what the
    field's kind alone lowers to, which says how its value is read and written."""

    inner: KindOp = field(compare=False, repr=False)


@dataclass(frozen=True)
class OptionalScalar(Wrap):
    """An integer, message or bytes there only when bytes remain or a peek matches."""

    word: ClassVar[str] = "optional"


@dataclass(frozen=True)
class Condition(Wrap):
    """There only when an expression over earlier fields holds (``when:``)."""

    expr: Expr = field(compare=False)
    # Lowered as a guard (``layout_plan.guard_conditions`` decides): the row of its kind after
    # a guard row running the expression's program.
    guarded: bool = False

    @property
    def word(self) -> str:  # type: ignore[override]
        """``condition`` (in the C vocabulary) for an integer there when an expression with a
        program (``compiled_exprs``) over earlier integers holds; ``guard`` for the fields a
        guard row can leave out (see :func:`guardable`); ``condition_other`` otherwise."""
        f = self.field
        if self.guarded:
            return "guard" if guardable(self) else "condition_other"
        if (isinstance(self.inner, ReadInt) and f.when_peek is None and not f.when_remaining
                and not f.marker and f.default is None and program(self.expr) is not None):
            return "condition"
        if (isinstance(self.inner, Array) and self.inner.runs_to_end and f.when_peek is None
                and not f.when_remaining and not f.marker and f.wire
                and program(self.expr) is not None):
            return "struct_run_when"  # a struct_run there when the condition holds
        return _guarded_word(self)


def len_value(op: Computed) -> tuple[int, str] | None:
    """(k, name) for a stored integer's ``value: "k + len(name)"`` (or ``len(name) + k``,
    ``len(name)``), always there; None for any other."""
    f = op.field
    if op.how != "value" or f.value is None or not isinstance(op.inner, ReadInt) or (
            not unconditional(f)):
        return None
    node = f.value.tree.body
    k = 0
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = node.left, node.right
        if isinstance(right, ast.Constant):
            left, right = right, left
        if not (isinstance(left, ast.Constant) and type(left.value) is int
                and abs(left.value) < 2**62):
            return None
        k, node = left.value, right
    match node:
        case ast.Call(func=ast.Name(id="len"), args=[ast.Name(id=name)], keywords=[]):
            return k, name
    return None


def _guarded_word(op: Condition) -> str:
    """``struct_when`` (in the C vocabulary) for a compiled nested struct and
    ``proto_prefixed_when`` for a varint-prefixed protobuf message, each there when an
    expression over earlier integers and integer attributes of earlier messages holds
    (TubeMQ's halves of an RPC); ``condition_other`` otherwise."""
    f, inner = op.field, op.inner
    if (f.when_peek is not None or f.when_remaining or f.marker or f.default is not None
            or not f.wire or f.args or guard_program(op.expr) is None):
        return "condition_other"
    if isinstance(inner, ReadInt):
        return "int_when"  # a condition reading lengths or attributes (else "condition")
    if (isinstance(inner, NestedOther) and inner.plan is not None
            and _plain_region(inner.region) and inner.plan.compiled):
        return "struct_when"
    if (isinstance(inner, ProtoOther) and inner.region.prefix == "varint"
            and not inner.region.nullable and inner.region.length is None
            and inner.region.size is None and _plain_message(f)):
        return "proto_prefixed_when"
    return "condition_other"


@dataclass(frozen=True)
class Computed(Wrap):
    """A value worked out on encode from other fields: ``how`` is ``value``, ``count_of``,
    ``size_range`` or ``switch_key``."""

    how: str

    @property
    def word(self) -> str:  # type: ignore[override]
        """``value`` (in the C vocabulary) for an integer whose ``value:`` has a program;
        ``value_other`` for another ``value:``."""
        if self.how in ("switch_key", "count_of") and not isinstance(self.inner, ReadInt):
            return f"{self.how}_other"
        if self.how == "value" and isinstance(self.inner, ReadPacked):
            # An integer of bit fields: the C codec packs it from its parts (its value:).
            t = self.inner.int_type
            return "bits" if t.width in (1, 2, 4, 8) and not t.signed else "value_other"
        if len_value(self) is not None:
            return "len_value"
        if self.how == "value":
            return "value" if value_row(self.field, self.inner) else "value_other"
        return self.how


def value_row(f: FrameField, inner: KindOp) -> bool:
    """Whether ``f`` (with ``value:``, of kind ``inner``) is a value row of the compiled
    codec: a fixed-width integer or a plain varint, nothing but its value computed."""
    if f.value is None or program(f.value, extended=True, presence=True) is None:
        return False
    if (f.const is not None or f.size_of is not None or f.count_of is not None
            or f.checksum is not None or f.size_range is not None or f.is_switch_key
            or f.default is not None or f.when_peek is not None or f.when_remaining
            or f.marker or not f.wire):
        return False
    if isinstance(inner, ReadInt):
        return True
    return (isinstance(inner, ReadVarint) and inner.const is None and not inner.sets_end
            and inner.max_bytes is None and not inner.adjust)


def guardable(op: Condition) -> bool:
    """Whether a guard row can leave out ``op``'s field: an integer, a varint, a MySQL
    length-encoded integer, bytes or text after a length prefix or ended by a terminator,
    bytes to the end of the region, or a nested struct always there
    (with arguments or not), its condition having a program, none other than ``when:``, and
    None (0 for a ``value:`` field) when left out."""
    f = op.field
    inner = op.inner
    if (f.when is None or program(f.when, extended=True, presence=True) is None
            or f.when_peek is not None
            or f.when_remaining or f.marker or f.default is not None or not f.wire):
        return False
    if f.value is not None:
        return value_row(f, inner)
    if (f.const is not None or f.size_of is not None or f.count_of is not None
            or f.checksum is not None or f.size_range is not None or f.is_switch_key):
        return False
    match inner:
        case ReadInt():
            return True
        case ReadVarint(const=None, sets_end=False, max_bytes=None, adjust=0):
            return True
        case BytesOther(region=r) | String(region=r) if not isinstance(inner, String) or (
                inner.encoding in ("utf8", "mutf8")):
            return ((isinstance(r.prefix, IntType) and r.prefix.width
                     in vocabulary.FRAME_INT_WIDTHS or r.prefix == "varint")
                    and not r.nullable and r.length is None and r.size is None
                    and f.compression is None)
        case BytesToEnd():
            return f.compression is None
        case Terminated(text=text, encoding=encoding):
            # a C string (MariaDB's handshake response): bytes, UTF-8 or modified UTF-8 text
            return f.compression is None and (not text or encoding in ("utf8", "mutf8"))
        case ReadLenenc(const=None, nullable=False):
            return True
        case Nested(when=Always()):
            return inner.plan.compiled
        case NestedOther(plan=plan, region=r) if plan is not None:
            # a struct with a condition (``when:``) and no bounds of its own
            return plan.compiled and _plain_region(r) and f.size is None
        case Array(element=ReadInt(int_type=t)) if (
                type(inner.element) is ReadInt and inner.count_program is not None):
            # integers counted by an expression (MariaDB's scramble): an int_array row
            return t.width in vocabulary.FRAME_INT_WIDTHS and f.size is None
        case Array(element=Nested(when=Always(), plan=plan), count=Expr(text=count)) if (
                not inner.item_limits and not inner.until_end and not inner.index_used):
            # compiled structs counted by a field or a param (TANK's partitions of a known
            # topic): an array_args row; where its count is, is the plan's business
            return (plan.compiled and count.strip().isidentifier()
                    and _plain_region(inner.region) and f.size is None)
    return False


@dataclass(frozen=True)
class WithArgs(Wrap):
    """A struct, array or blocks field passing values to its struct's params."""

    @property
    def word(self) -> str:  # type: ignore[override]
        """``struct_args`` (in the C vocabulary) for a compiled struct always there;
        ``array_args`` for a list of them counted by its ``count_of`` field or a param (its
        arguments may name ``_index``); ``args`` otherwise. That every argument has a program
        is the plan's business (``layout_plan.c_links_hold``)."""
        f = self.field
        inner = self.inner
        if not unconditional(f):
            return "args"
        if isinstance(inner, Nested) and isinstance(inner.when, Always) and inner.plan.compiled \
                and _plain_region(inner.region):
            return "struct_args"
        if (isinstance(inner, Array) and not inner.item_limits and not inner.until_end
                and inner.count is not None and inner.count.text.strip().isidentifier()
                and _plain_region(inner.region) and isinstance(inner.element, Nested)
                and isinstance(inner.element.when, Always) and inner.element.plan.compiled):
            return "array_args"
        return "args"


@dataclass(frozen=True)
class Prefix(Wrap):
    """Bytes, text or a struct bounded by a length prefix of their own."""

    prefix: str

    @property
    def word(self) -> str:  # type: ignore[override]
        """``prefixed`` (in the C vocabulary) for bytes, UTF-8 or modified UTF-8 text after a
        fixed-width length prefix that cannot be null; ``proto_prefixed`` for a protobuf
        message, always there, after a varint length (TubeMQ's parts); ``prefix`` otherwise."""
        inner = self.inner
        f = self.field
        if isinstance(inner, ConstBytes):
            return inner.word  # its prefix is part of its wire form
        match inner:
            case BytesOther(region=r) | String(region=r) if (
                    (isinstance(r.prefix, IntType) and r.prefix.width in vocabulary.FRAME_INT_WIDTHS
                     or r.prefix == "varint")
                    and not r.nullable and r.length is None and r.size is None
                    and inner.field.compression is None
                    and (not isinstance(inner, String) or inner.encoding in ("utf8", "mutf8"))):
                if unconditional(f):
                    return "prefixed"
                if (isinstance(inner, String) and f.when_remaining and f.when is None
                        and f.when_peek is None and not f.marker and f.wire
                        and isinstance(f.default, str)):
                    return "prefixed_default"  # text when bytes remain, its default when not
                if (f.when_remaining and f.when is None and f.when_peek is None and not f.marker
                        and f.wire and f.default is None):
                    return "prefixed_optional"  # bytes or text when bytes remain, None when not
            case ProtoOther(region=r) if (
                    r.prefix == "varint" and not r.nullable and r.length is None and r.size is None
                    and unconditional(f) and _plain_message(inner.field)):
                return "proto_prefixed"
            case BytesOther(region=r) | String(region=r) if (
                    r.prefix == "lenenc" and r.length is None and r.size is None
                    and inner.field.compression is None and f.const is None
                    and f.value is None
                    and (not isinstance(inner, String) or inner.encoding == "utf8")):
                if unconditional(f):
                    return "lenenc"
                if (f.when_remaining and f.when is None and f.when_peek is None
                        and not f.marker and f.wire and f.default is None and not r.nullable):
                    return "lenenc_optional"  # when bytes remain, None when not
            case ConstBytes():
                return inner.word  # its wire form holds the prefix
        return "prefix"


def _plain_message(f: FrameField) -> bool:
    """Whether ``f`` is a protobuf message as it is: a known message, no command dispatch, not
    compressed."""
    return (isinstance(f, ProtoField) and f.message is not None and f.dispatch_on is None
            and f.compression is None)


@dataclass(frozen=True)
class FixedLength(Wrap):
    length: int

    @property
    def word(self) -> str:  # type: ignore[override]
        """``const_bytes`` (in the C vocabulary) for a constant of fixed length, ``fixed`` for
        bytes or UTF-8 text of a fixed length, always there; ``fixed_length`` otherwise."""
        inner = self.inner
        f = self.field
        if isinstance(inner, ConstBytes):
            return inner.word
        if (isinstance(inner, BytesOther | String) and unconditional(f)
                and f.compression is None and f.const is None and f.value is None
                and inner.region.length == self.length and inner.region.size is None
                and inner.region.prefix is None
                and (not isinstance(inner, String) or inner.encoding == "utf8")):
            return "fixed"
        return "fixed_length"


@dataclass(frozen=True)
class Default(Wrap):
    """Read when bytes remain, this value when not."""

    @property
    def word(self) -> str:  # type: ignore[override]
        """``default`` (in the C vocabulary) for a fixed-width integer read when bytes remain;
        ``default_other`` otherwise."""
        f = self.field
        if (isinstance(self.inner, ReadInt) and f.when_remaining and f.when_peek is None
                and isinstance(f.default, int) and not isinstance(f.default, bool)):
            return "default"
        inner = self.inner
        if (isinstance(inner, ReadBool) and inner.const is None and not inner.sets_end
                and f.when_remaining and f.when is None and f.when_peek is None
                and isinstance(f.default, bool) and f.size_of is None and f.value is None
                and not f.marker):
            return "default_bool"  # Pravega's flags at the end of a command
        return "default_other"


@dataclass(frozen=True)
class Marker(Wrap):
    """An optional constant, found by peeking and stored as a bool."""

    word: ClassVar[str] = "marker"


# The operations a field can lower to, by what decides its code: its kind alone, or a
# wrapper around the operation of its kind. Emitters match on these unions, so mypy points at
# every emitter that lacks a case when an operation is added (``tests/generator/
# test_layout_plan.py`` checks that every operation class is in them).
KindOp: TypeAlias = (ReadInt | Const | SizeOf | SizeRest | Checksum | ProtoBody | Envelope
                     | ProtoOther | BytesSized | BytesToEnd | BytesOther | Nested | NestedOther
                     | ReadVarint | ReadBool | ReadUuid | String | Array | Switch | Blocks | Bits
                     | Terminated | ConstBytes | RangedInt
                     | ReadPacked | SubField | ReadLenenc | MaskedBytes | ReadFloat)
WrapOp: TypeAlias = (OptionalScalar | Condition | Computed | WithArgs | Prefix | FixedLength
                     | Default | Marker)
AnyFieldOp: TypeAlias = KindOp | WrapOp
PlanOp: TypeAlias = Params | SkipTrailing | AnyFieldOp | Delimited | Requires


def kind_op(op: AnyFieldOp) -> KindOp:
    """The operation of ``op``'s field kind: how its value is read and written."""
    return op.inner if isinstance(op, Wrap) else op


IntShape: TypeAlias = IntType | Literal["varint", "bool", "lenenc"]


def int_shape(op: KindOp) -> IntShape | None:
    """How an integer operation's value sits on the wire (None for any other operation)."""
    match op:
        case ReadInt(int_type=t) | Const(int_type=t) | SizeOf(int_type=t) | SizeRest(
                int_type=t) | Checksum(int_type=t) | ReadPacked(int_type=t):
            return t
        case ReadVarint():
            return "varint"
        case RangedInt(shape=shape):
            return shape
        case ReadLenenc():
            return "lenenc"
        case ReadBool():
            return "bool"
    return None
