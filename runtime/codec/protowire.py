"""Protobuf wire-format primitives shared by every generated message codec.

Generated code inlines the common case (varints up to four bytes on decode, table lookups of
small varints on encode, known tags) and calls these helpers for everything else. The helpers
stay short enough to check against the encoding spec by eye; where CPython's per-bytecode cost
shows (varints of the lengths real ids and sizes take), they unroll or use a lookup table.
"""

from __future__ import annotations

import enum
import math
import struct
from collections.abc import Callable, Mapping
from itertools import chain
from typing import Any, TypeAlias, TypeVar

from protoframe.runtime.errors import (
    InvalidUtf8Error,
    MalformedVarintError,
    TruncatedError,
    UnknownCommandError,
    UnknownCommandTypeError,
    ValueOutOfRangeError,
    WireTypeError,
)

BytesLike: TypeAlias = bytes | bytearray | memoryview

_E = TypeVar("_E", bound=enum.IntEnum)
_T = TypeVar("_T")

MASK32 = 0xFFFF_FFFF
MASK64 = 0xFFFF_FFFF_FFFF_FFFF

WIRE_VARINT = 0
WIRE_FIXED64 = 1
WIRE_LEN = 2
WIRE_START_GROUP = 3
WIRE_END_GROUP = 4
WIRE_FIXED32 = 5

_F32 = struct.Struct("<f")
_F64 = struct.Struct("<d")
_I32 = struct.Struct("<i")
_U32 = struct.Struct("<I")
_I64 = struct.Struct("<q")
_U64 = struct.Struct("<Q")

pack_double = _F64.pack
pack_fixed32 = _U32.pack
pack_sfixed32 = _I32.pack
pack_fixed64 = _U64.pack
pack_sfixed64 = _I64.pack
unpack_float = _F32.unpack_from
unpack_double = _F64.unpack_from
unpack_fixed32 = _U32.unpack_from
unpack_sfixed32 = _I32.unpack_from
unpack_fixed64 = _U64.unpack_from
unpack_sfixed64 = _I64.unpack_from

# A new instance without running ``__init__``, for decoders; cheaper than ``cls.__new__(cls)``,
# which looks ``__new__`` up on the class at every call.
new_instance: Callable[[type[_T]], _T] = object.__new__

# Splits 256 bytes into 128 two-byte ``bytes``: ``iter_unpack`` applies it along a buffer and
# ``chain`` flattens the rows, so a table of byte pairs is cut up by C loops alone. (Slicing
# the pairs out in a comprehension cost four times as many instructions; one format of 2**14
# pairs took longer to compile than to apply.)
_PAIR_ROW = struct.Struct("2s" * 128)


def _two_byte_varints(high: int) -> list[bytes]:
    """``bytes(((i & 0x7F) | 0x80, (i >> 7) | high))`` for every ``i`` below 2**14.

    The tables are built at every import of generated bindings (``python -m bench imports``).
    """
    buf = bytearray(2 << 14)
    buf[0::2] = bytes(range(0x80, 0x100)) * 128
    buf[1::2] = b"".join(bytes((h | high,)) * 128 for h in range(128))
    return list(chain.from_iterable(_PAIR_ROW.iter_unpack(buf)))


# Encoded forms of the varints below 2**14, so the hot path is a list index instead of a loop.
# Generated encoders inline ``SMALL_VARINTS[v] if 0 <= v < 0x4000 else <type>_bytes(v)``.
SMALL_VARINTS: list[bytes] = [bytes((i,)) for i in range(128)] + _two_byte_varints(0)[128:]
# The low 14 bits of a larger varint: two bytes, both with the continuation bit set.
_CONTINUED: list[bytes] = _two_byte_varints(0x80)


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Read an unsigned varint at ``pos``; return it (truncated to 64 bits) and the next position.

    Every length is unrolled. From the fifth byte on (timestamps, 64-bit ids, negative numbers)
    the later groups gather in an int of their own, joined to the first 28 bits once at the end:
    arithmetic on ints of 30 bits or less takes CPython's one-digit fast path, and a loop that
    grows one wide int byte by byte costs several times as much. A varint of more than ten
    bytes is rejected, as the official runtimes do. Running off the end of ``buf`` raises
    ``IndexError``, which generated decoders turn into ``TruncatedError``.
    """
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result = b & 0x7F
    b = buf[pos + 1]
    if b < 0x80:
        return result | b << 7, pos + 2
    result |= (b & 0x7F) << 7
    b = buf[pos + 2]
    if b < 0x80:
        return result | b << 14, pos + 3
    result |= (b & 0x7F) << 14
    b = buf[pos + 3]
    if b < 0x80:
        return result | b << 21, pos + 4
    result |= (b & 0x7F) << 21
    b = buf[pos + 4]
    if b < 0x80:
        return result | b << 28, pos + 5
    high = b & 0x7F
    b = buf[pos + 5]
    if b < 0x80:
        return result | (high | b << 7) << 28, pos + 6
    high |= (b & 0x7F) << 7
    b = buf[pos + 6]
    if b < 0x80:
        return result | (high | b << 14) << 28, pos + 7
    high |= (b & 0x7F) << 14
    b = buf[pos + 7]
    if b < 0x80:
        return result | (high | b << 21) << 28, pos + 8
    high |= (b & 0x7F) << 21
    b = buf[pos + 8]
    if b < 0x80:
        return result | high << 28 | b << 56, pos + 9
    top = b & 0x7F
    b = buf[pos + 9]
    if b < 0x80:
        # The tenth byte carries bit 63 and six bits beyond 64, which are dropped.
        return (result | high << 28 | (top | b << 7) << 56) & MASK64, pos + 10
    raise MalformedVarintError(f"varint longer than 10 bytes at offset {pos}")


def varint_bytes(value: int) -> bytes:
    """Encode a non-negative integer below 2**64 as a varint."""
    if value < 0x4000:
        if value < 0:
            raise ValueOutOfRangeError(f"{value} is negative; expected an unsigned varint")
        return SMALL_VARINTS[value]
    if value < 0x1000_0000:
        return _CONTINUED[value & 0x3FFF] + SMALL_VARINTS[value >> 14]
    if value > MASK64:
        raise ValueOutOfRangeError(f"{value} does not fit in 64 bits")
    # 14 bits at a time: a 64-bit value takes at most five table lookups.
    out = _CONTINUED[value & 0x3FFF] + _CONTINUED[value >> 14 & 0x3FFF]
    value >>= 28
    while value >= 0x4000:
        out += _CONTINUED[value & 0x3FFF]
        value >>= 14
    return out + SMALL_VARINTS[value]


def uint32_bytes(value: int) -> bytes:
    """Varint encoding of a uint32 field value, range-checked."""
    if 0 <= value <= MASK32:
        return SMALL_VARINTS[value] if value < 0x4000 else varint_bytes(value)
    raise ValueOutOfRangeError(f"{value} is outside the uint32 range")


def uint64_bytes(value: int) -> bytes:
    """Varint encoding of a uint64 field value, range-checked."""
    if 0 <= value <= MASK64:
        return SMALL_VARINTS[value] if value < 0x4000 else varint_bytes(value)
    raise ValueOutOfRangeError(f"{value} is outside the uint64 range")


def int32_bytes(value: int) -> bytes:
    """Varint encoding of an int32 (or enum) value; negatives take ten bytes, as on the wire."""
    if 0 <= value < 0x4000:
        return SMALL_VARINTS[value]
    if -0x8000_0000 <= value <= 0x7FFF_FFFF:
        return varint_bytes(value & MASK64)
    raise ValueOutOfRangeError(f"{value} is outside the int32 range")


def int64_bytes(value: int) -> bytes:
    """Varint encoding of an int64 value (two's complement, ten bytes when negative)."""
    if 0 <= value < 0x4000:
        return SMALL_VARINTS[value]
    if -0x8000_0000_0000_0000 <= value <= 0x7FFF_FFFF_FFFF_FFFF:
        return varint_bytes(value & MASK64)
    raise ValueOutOfRangeError(f"{value} is outside the int64 range")


def sint32_bytes(value: int) -> bytes:
    """ZigZag varint encoding of a sint32 value."""
    if -0x8000_0000 <= value <= 0x7FFF_FFFF:
        return varint_bytes(((value << 1) ^ (value >> 31)) & MASK32)
    raise ValueOutOfRangeError(f"{value} is outside the sint32 range")


def sint64_bytes(value: int) -> bytes:
    """ZigZag varint encoding of a sint64 value."""
    if -0x8000_0000_0000_0000 <= value <= 0x7FFF_FFFF_FFFF_FFFF:
        return varint_bytes(((value << 1) ^ (value >> 63)) & MASK64)
    raise ValueOutOfRangeError(f"{value} is outside the sint64 range")


def bool_bytes(value: bool) -> bytes:
    """Varint encoding of a bool."""
    return b"\x01" if value else b"\x00"


def str_bytes(value: str) -> bytes:
    """Length-prefixed UTF-8 encoding of a string value."""
    data = value.encode("utf-8")
    return varint_bytes(len(data)) + data


def to_int32(value: int) -> int:
    """Reinterpret the low 32 bits of a decoded varint as a signed int32."""
    value &= MASK32
    return value - 0x1_0000_0000 if value & 0x8000_0000 else value


def to_int64(value: int) -> int:
    """Reinterpret a decoded 64-bit varint as a signed int64."""
    return value - 0x1_0000_0000_0000_0000 if value & 0x8000_0000_0000_0000 else value


def unzigzag(value: int) -> int:
    """Undo ZigZag encoding (sint32/sint64)."""
    return (value >> 1) ^ -(value & 1)


def unzigzag32(value: int) -> int:
    """Undo ZigZag encoding of a sint32, keeping only the low 32 bits as the runtimes do."""
    value &= MASK32
    return (value >> 1) ^ -(value & 1)


def decode_str(buf: bytes, start: int, end: int, where: str) -> str:
    """Decode a UTF-8 string field, raising ``InvalidUtf8Error`` that names the field."""
    try:
        return buf[start:end].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise invalid_utf8(where, exc) from None


def invalid_utf8(where: str, exc: UnicodeDecodeError) -> InvalidUtf8Error:
    """The error for a string field ``where`` whose bytes are not valid UTF-8.

    Generated decoders decode strings inline and turn the ``UnicodeDecodeError`` into this.
    """
    return InvalidUtf8Error(f"{where}: invalid UTF-8 ({exc.reason})")


def add_unknown(unknown: bytearray | None, data: bytes) -> bytearray:
    """Append the raw bytes of an unknown field to ``unknown``, creating it on first use."""
    if unknown is None:
        return bytearray(data)
    unknown += data
    return unknown


def unexpected_field(message: object, name: str) -> TypeError:
    """The error for a constructor keyword that names no optional field of the message."""
    return TypeError(f"{type(message).__name__}() got an unexpected keyword argument {name!r}")


def skip_field(buf: bytes, pos: int, end: int, tag: int) -> int:
    """Skip the value of an unknown field whose tag was just read; return the next position."""
    if tag >> 3 == 0:
        raise WireTypeError("field number 0 is not allowed")
    wire_type = tag & 7
    if wire_type == WIRE_VARINT:
        _, pos = read_varint(buf, pos)
    elif wire_type == WIRE_LEN:
        size, pos = read_varint(buf, pos)
        pos += size
    elif wire_type == WIRE_FIXED64:
        pos += 8
    elif wire_type == WIRE_FIXED32:
        pos += 4
    elif wire_type == WIRE_START_GROUP:
        field_number = tag >> 3
        while True:
            if pos >= end:
                raise TruncatedError(f"group {field_number} is not closed")
            inner, pos = read_varint(buf, pos)
            if inner & 7 == WIRE_END_GROUP:
                if inner >> 3 != field_number:
                    raise WireTypeError(f"group {field_number} closed by {inner >> 3}")
                break
            pos = skip_field(buf, pos, end, inner)
    else:
        raise WireTypeError(f"wire type {wire_type} (tag {tag}) is not valid here")
    if pos > end:
        raise TruncatedError(f"field {tag >> 3} runs past the end of its message")
    return pos


def unknown_command_type(field: str, buf: bytes, pos: int, end: int,
                         number: int) -> UnknownCommandError:
    """The error for a message in ``buf[pos:end]`` whose required enum field ``number``, naming
    its command, did not decode.

    A closed enum keeps a number it does not define among the unknown fields, so to the message
    the field is absent; the bytes tell an unknown command type (``UnknownCommandTypeError``,
    carrying the number) from a field that really is missing. The bytes decoded up to the
    required-field check, so they are well-formed.
    """
    found: int | None = None
    while pos < end:
        tag, pos = read_varint(buf, pos)
        if tag == number << 3 | WIRE_VARINT:
            raw, pos = read_varint(buf, pos)
            found = to_int32(raw)  # all of them unknown: the last one, as for any field
        else:
            pos = skip_field(buf, pos, end, tag)
    if found is None:
        return UnknownCommandError(f"{field} is missing: the message names no command")
    return UnknownCommandTypeError(
        f"{field} is {found}, not a command type this peer knows (one from a newer version of "
        "the protocol?)", found)


def truncated(message: str) -> TruncatedError:
    """The error for a message whose bytes stop in the middle of a value."""
    return TruncatedError(f"{message}: input ends in the middle of a field")


def pack_float(value: float) -> bytes:
    """The 4-byte form of a float field; beyond float32's range it is +-inf, as upb stores it."""
    try:
        return _F32.pack(value)
    except OverflowError:
        return _F32.pack(math.copysign(math.inf, value))


def message_repr(msg: Any) -> str:
    """``Name(field=value, ...)`` listing the fields that are set, in declaration order."""
    parts = []
    for name, storage, _ in msg.FIELD_NAMES:
        value = getattr(msg, storage)
        if value is None or (isinstance(value, list | dict) and not value):
            continue
        parts.append(f"{name}={value!r}")
    if msg.unknown_fields:
        parts.append(f"unknown_fields={msg.unknown_fields!r}")
    return f"{type(msg).__name__}({', '.join(parts)})"


def present_fields(given: Mapping[str, object], known: Mapping[str, object],
                   owner: str) -> dict[str, Any]:
    """The dict of set fields a sparse message keeps, from its ``**_fields`` keyword arguments.

    ``given`` is normally the fresh dict CPython built for the call, and is kept as it is. A
    None value is dropped (the field stays unset, as for every other field), and a name that is
    not one of the message's fields raises the ``TypeError`` a written-out signature would.
    """
    for name, value in given.items():
        if value is None or name not in known:
            break
    else:
        return given if type(given) is dict else dict(given)
    for name in given:
        if name not in known:
            raise TypeError(f"{owner}.__init__() got an unexpected keyword argument {name!r}")
    return {name: value for name, value in given.items() if value is not None}


def spell_out_fields(message_type: type, spelled: Callable[..., None]) -> None:
    """Show ``message_type.__init__(..., **_fields)`` as ``spelled``, its fields written out.

    Messages with very many optional fields take them as ``**_fields``, typed for mypy by a
    TypedDict (which checks each keyword exactly as for a written-out parameter): CPython fills
    in every keyword-only default that was not passed with a dict lookup per call, which for
    seventy optional fields costs more than building the message. ``spelled``, generated
    beside it, takes every field as a keyword-only parameter in declaration order, the optional
    ones defaulting to None; ``inspect.signature`` follows ``__wrapped__`` to it and
    ``typing.get_type_hints`` reads the annotations copied from it. (Building that signature
    here took importing ``inspect``, a third of the import time of generated bindings.)
    """
    init = message_type.__dict__["__init__"]
    # ``self`` as a method's is: unannotated.
    annotations = {k: v for k, v in spelled.__annotations__.items() if k != "self"}
    spelled.__annotations__ = annotations
    init.__annotations__ = dict(annotations)
    init.__wrapped__ = spelled


class Message:
    """Base of every generated protobuf message class.

    A generated class lists its attributes in ``__slots__`` and writes its own ``__init__``,
    ``__repr__`` and codecs; what never varies lives here. Messages compare equal when they
    are of the same class and every attribute is equal, unknown fields included, and, being
    mutable, are unhashable. (The classes used to be ``@dataclass(slots=True)``; building 90
    dataclasses at import cost more than the whole of protoc's ``_pb2`` module took to load.)
    """

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        names: tuple[str, ...] = self.__slots__
        for name in names:
            if getattr(self, name) != getattr(other, name):
                return False
        return True

    __hash__ = None  # type: ignore[assignment]


def number_table(enum_type: type[_E]) -> dict[int, _E]:
    """Number -> member table for a generated enum; a dict lookup beats calling the class."""
    return {member.value: member for member in enum_type}
