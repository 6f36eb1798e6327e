"""The operations of a layout plan (``layout_plan``): one typed, frozen class per thing a
codec does at a point of a struct's layout.

Every operation has a ``word``. The words the compiled frame codec knows are the ones
``runtime/codec/vocabulary.py`` defines (``FRAME_OPS`` and ``ENVELOPE``, read by
:func:`c_words`); an operation the C codec cannot do (an array, a condition, a signed size...)
has a word of its own outside that vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from protoframe.generator.expr import Expr
from protoframe.generator.frame_ir import FrameField
from protoframe.generator.ir import MessageType
from protoframe.runtime.codec import vocabulary

if TYPE_CHECKING:
    from protoframe.generator.layout_plan import LayoutPlan


def c_words() -> frozenset[str]:
    """The operation words the compiled frame codec knows (read when asked, so a test can
    change the vocabulary)."""
    return frozenset(vocabulary.FRAME_OPS) | {vocabulary.ENVELOPE}


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


# ---------------------------------------------------------------------------------------------
# operations


@dataclass(frozen=True)
class Op:
    """One operation of a plan; ``word`` names it (a vocabulary word when the C codec has it)."""

    word: ClassVar[str]


@dataclass(frozen=True)
class Params(Op):
    """The struct takes values from the struct holding it (``params:``)."""

    word: ClassVar[str] = "params"
    names: tuple[str, ...]


@dataclass(frozen=True)
class SkipTrailing(Op):
    """Bytes after the last field are skipped instead of rejected (``trailing: ignore``)."""

    word: ClassVar[str] = "skip_trailing"


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

    @property
    def word(self) -> str:  # type: ignore[override]
        if self.int_type.signed:
            return "signed_size"
        return "size" if self.of_message_or_bytes else "size_of_other"


@dataclass(frozen=True)
class SizeRest(FieldOp):
    """The byte size of everything after it: the struct's region ends there."""

    int_type: IntType

    @property
    def word(self) -> str:  # type: ignore[override]
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


@dataclass(frozen=True)
class ProtoOther(FieldOp):
    """A protobuf message bounded otherwise (the rest, a dotted or later size...)."""

    word: ClassVar[str] = "proto_unsized"


@dataclass(frozen=True)
class BytesSized(FieldOp):
    """Bytes sized by the earlier unsigned size field ``size``."""

    word: ClassVar[str] = "bytes"
    size: str


@dataclass(frozen=True)
class BytesToEnd(FieldOp):
    """Bytes running to the end of the struct's region."""

    word: ClassVar[str] = "bytes"


@dataclass(frozen=True)
class BytesOther(FieldOp):
    """Bytes bounded otherwise, or compressed bytes with a size."""

    word: ClassVar[str] = "bytes_other"


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


@dataclass(frozen=True)
class NestedOther(FieldOp):
    """A nested struct with a size of its own or another condition."""

    word: ClassVar[str] = "struct_other"


@dataclass(frozen=True)
class OptionalScalar(FieldOp):
    """An integer, message or bytes there only when bytes remain or a peek matches."""

    word: ClassVar[str] = "optional"


@dataclass(frozen=True)
class ReadVarint(FieldOp):
    word: ClassVar[str] = "varint"


@dataclass(frozen=True)
class ReadBool(FieldOp):
    word: ClassVar[str] = "bool"


@dataclass(frozen=True)
class ReadUuid(FieldOp):
    word: ClassVar[str] = "uuid"


@dataclass(frozen=True)
class String(FieldOp):
    word: ClassVar[str] = "string"


@dataclass(frozen=True)
class Array(FieldOp):
    word: ClassVar[str] = "array"


@dataclass(frozen=True)
class Switch(FieldOp):
    word: ClassVar[str] = "switch"


@dataclass(frozen=True)
class Blocks(FieldOp):
    word: ClassVar[str] = "blocks"


@dataclass(frozen=True)
class Bits(FieldOp):
    """No bytes of its own: derived on decode from earlier fields (``derive:``)."""

    word: ClassVar[str] = "derive"
    expr: Expr = field(compare=False)


@dataclass(frozen=True)
class Condition(FieldOp):
    """There only when an expression over earlier fields holds (``when:``)."""

    word: ClassVar[str] = "condition"
    expr: Expr = field(compare=False)


@dataclass(frozen=True)
class Computed(FieldOp):
    """A value worked out on encode from other fields: ``how`` is ``value``, ``count_of``,
    ``size_range`` or ``switch_key``."""

    how: str

    @property
    def word(self) -> str:  # type: ignore[override]
        return self.how


@dataclass(frozen=True)
class WithArgs(FieldOp):
    """A struct, array or blocks field passing values to its struct's params."""

    word: ClassVar[str] = "args"


@dataclass(frozen=True)
class Prefix(FieldOp):
    """Bytes, text or a struct bounded by a length prefix of their own."""

    word: ClassVar[str] = "prefix"
    prefix: str


@dataclass(frozen=True)
class FixedLength(FieldOp):
    word: ClassVar[str] = "fixed_length"
    length: int


@dataclass(frozen=True)
class Default(FieldOp):
    """Read when bytes remain, this value when not."""

    word: ClassVar[str] = "default"


@dataclass(frozen=True)
class Marker(FieldOp):
    """An optional constant, found by peeking and stored as a bool."""

    word: ClassVar[str] = "marker"
