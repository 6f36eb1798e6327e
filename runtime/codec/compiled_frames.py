"""The compiled fast path of the generated frame codecs, and how it is switched on.

Every generated frame struct has a straight-line Python ``encode`` / ``decode`` /
``decode_from``: that code is the reference. A struct whose layout uses only the common items
(fixed-width integers, constants, sizes, a checksum running from the next field to the end,
sized protobuf messages, bytes, nested structs that are always there, there when bytes remain
or there when a peeked value matches; uuids, prefixed bytes and text, integers with a default,
skipped trailing bytes, runs of nested structs, switches on an integer key) also gets a layout
table at the end of the generated
module, passed to :func:`install_frame_layouts`. When the C extension ``runtime.codec._framecodec``
is built, that puts a compiled codec driven by the table in place of the three methods.

The table also gives the class a compiled constructor: ``Cls(**kwargs)`` stores the keywords
in the instance's slots as the dataclass ``__init__`` would (None for an optional nested struct
left out).

As with the protobuf codec (``runtime.codec.compiled``), the compiled code handles well-formed input
and plain values only, and leaves everything else to the Python methods (positional or
unknown arguments to the dataclass ``__init__``), so every error comes from them.
``PROTOFRAME_PURE_PYTHON=1`` and ``runtime.codec.compiled.pure_python()`` switch this off too.
``tests/runtime/test_compiled_frames.py`` checks both against each other.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from types import ModuleType
from typing import Any, TypeAlias
from uuid import UUID, SafeUUID

from protoframe.runtime.codec import checksums, compiled, vocabulary

_framecodec: ModuleType | None
try:
    from protoframe.runtime.codec import _framecodec
except ImportError:  # not built: no C compiler at install time, or a source checkout
    _framecodec = None
if _framecodec is not None:
    vocabulary.check_built(_framecodec.__name__, getattr(_framecodec, "VOCABULARY", None),
                           ("FRAME_OPS", "FRAME_PRESENCE", "EXPR_OPS"))
    vocabulary.check_built_limit(_framecodec.__name__, "MAX_ROWS",
                                 getattr(_framecodec, "MAX_ROWS", None), vocabulary.FRAME_MAX_ROWS)

# One item of a struct's layout: (op, name, int_type, ref, extra), in wire order.
#   op "int":       a stored integer;                        int_type like "u32be", "i16le", "u8"
#   op "const":     a constant, ref its value
#   op "size":      the byte size of the later field named by ref
#   op "size_rest": the byte size of everything after it (the struct's region ends there);
#                   "adjusted_size_rest": the same counting ref bytes more (adjust:)
#   op "checksum":  ref ("crc32c" or "crc32") over the next field to the end of the struct
#   op "proto":     a protobuf message (ref its class) sized by the size field named by extra
#   op "envelope":  the same, selecting a command: extra is (size field, the attribute holding
#                   the command type, the dict from command type to its body attribute, and
#                   the slot of the message's dict of present sparse fields when every body is
#                   kept there, else None)
#   op "bytes":     bytes sized by the size field named by ref, or the rest when ref is None
#   op "struct":    a nested struct (ref its class); extra None (always there), "remaining"
#                   (there when bytes remain) or (int_type, value) (there when a peek matches)
#   op "uuid":      16 bytes read as a uuid.UUID
#   op "switch":    a struct chosen by a key: ref the module's table from key to the cases'
#                   decode_from, extra (the key row's name, the size row's name or None, the
#                   table from case class to key)
#   op "switch_key": the key of the switch row naming it
#   op "struct_run": nested structs (ref their class) up to the end of the region, as a list;
#                   "struct_run_sized": the same up to the size of the size row named by extra
#   op "prefixed":  bytes ("bytes"), text ("utf8", "mutf8") as ref says, after a length prefix
#                   of type int_type ("varint" for a varint); "prefixed_default": the same,
#                   read when bytes remain, extra (its default) when not
#   op "default":   an integer read when its bytes remain, ref when not
#   op "varint", "bool": a stored varint, a stored byte read as a bool
#   op "count_of":  the number of items of the struct_array row named by ref
#   op "struct_array": as many nested structs (ref their class) as the count_of row named by
#                   extra says, or a program as for "condition" (extra a tuple of steps)
#   op "condition": an integer of int_type there when ref, a program of (vocabulary.EXPR_OPS
#                   word, argument) steps ("field" naming an earlier row), gives true
#   op "blocks":    a nested struct (ref its class) cut in blocks: int_type the block count's
#                   type, extra (the block length's type, the most bytes a block holds, the
#                   most blocks or None)
#   op "proto_prefixed": a protobuf message (ref its class) after a length prefix of type
#                   int_type ("varint" for a varint)
#   op "struct_when": a nested struct (ref its class) there when extra, a program as for
#                   "condition" with ("attr", "row.attribute") steps too, gives true; else None
#   op "proto_prefixed_when": a proto_prefixed row there when extra gives true; else None
#   op "len_value": an integer of int_type, on encode ref plus the length of the bytes of the
#                   row named by extra; stepped over on decode
#   op "int_when":  an integer of int_type there when extra (as for "struct_when") gives true
#   op "prefixed_optional": a "prefixed" row read when bytes remain, None when not
#   op "default_bool": a bool read when its byte remains, ref when not
#   op "message_bytes": bytes sized by an integer field of the message of the earlier "proto"
#                   row named by ref; extra is the slot of that message holding the size (on
#                   encode it is set to the bytes' length first, as the Python code does)
#   op "lenenc":    bytes or text ("bytes", "utf8" as ref says) after a length-encoded integer;
#                   extra True when 0xfb (NULL) stands for None
#   op "const_bytes": constant bytes, ref the wire form; not stored
#   op "fixed":     bytes or text ("bytes", "utf8" as ref says) of extra bytes
#   op "text_rest": UTF-8 text to the end of the region
#   op "struct_run_when": a struct_run (ref the nested class) there when extra, a program as
#                   a condition row's ("has" naming an earlier optional struct row), gives true
#   op "masked_bytes": bytes XOR-ed with the bytes of the earlier key row named by ref (int_type
#                   the key's, None for a key of bytes); extra (the size or integer row sizing
#                   them, or None for the rest; whether the key may be None, then the bytes are
#                   sent as they are)
#   op "requires":  a rule (its name is None), after the field rows: ref a program as for
#                   "struct_when" ("len" and "has" naming earlier rows too) that must give true
#   op "terminated": bytes or text ("bytes", "utf8", "mutf8" as ref says) ended by the bytes
#                   extra
#   op "int_range": an integer of int_type ("varint" for a varint), ref (lowest, highest,
#                   nonzero): None where its type bounds it
#   op "lenenc_int": a length-encoded integer; ref its constant (not stored) or None, extra
#                   True when NULL (0xfb) reads as None
#   op "lenenc_optional": a "lenenc" row (extra False) read when bytes remain, None when not
#   op "delimited": the first row (its name is None): the struct ends with the bytes ref
#   op "skip_trailing": the last row (its name is None): bytes after the last field are skipped
#   op "float":     an IEEE 754 number: int_type the unsigned integer of its width and order
#                   ("u32le" for a little-endian f32)
#   op "int_array": integers of int_type, as many as the count_of row named by extra says,
#                   or a program as for "struct_array"
# The rows TANK brought; a program is as a condition's, and may also push a param by its
# number ("param", k) and an array item's index ("index", None):
#   op "guard":     the next row is there when the program ref gives true (name None); extra
#                   True when that row is a value row, 0 when left out (else None)
#   op "value":     an integer of int_type (or "varint") not stored; ref its program (value:)
#   op "derive":    no bytes: ref's program gives the value; extra True for a bool;
#                   "derived_size": the same, not stored (the size of a later field)
#   op "struct_args": a nested struct (ref its class) whose params the program extra gives
#   op "array_args": nested structs (ref their class), extra (count, program): count
#                   ("field", the count_of row's name) or ("param", k); the program gives each
#                   item's params
#   op "size_of_struct": the byte size (of int_type) of the struct_sized row named by ref
#   op "struct_sized": a nested struct (ref its class) filling the size of the row named by
#                   extra
# The rows of bit fields:
#   op "bits":      an unsigned integer of int_type packing the bit_field rows right after it,
#                   not stored; ref the mask of its reserved bits (which must be zero)
#   op "bit_field": no bytes: ref (the bits row's name, shift, width) says its bits; extra
#                   (whether it is a bool, its enum class or None, its value: program or None:
#                   stored when None, else computed on encode, not stored)
#   op "derived_key": no bytes: a switch's key, which the program ref computes (not stored)
# The rows TANK's consume response brought:
#   op "marker":    a constant of int_type (ref its value), there when a peek matches it;
#                   stored as a bool
#   op "size_range": the byte size (of int_type) of the rows from the next one to the one
#                   named by ref, after which comes its "size_range_end" row (ref the
#                   size_range row's name); array_args rows may also be counted by a stored
#                   integer row: count ("stored", its name)
#   "signed_size", "size_of_other" and "signed_bytes" are "size" and "bytes" rows
#   (vocabulary.FRAME_ALIASES).
FrameRow: TypeAlias = tuple[str, str | None, str | None, Any, Any]
# (struct class, whether bytes left after the last field are an error, its rows), and for a
# struct taking params, how many
FrameLayout: TypeAlias = (tuple[type, bool, tuple[FrameRow, ...]]
                          | tuple[type, bool, tuple[FrameRow, ...], int])

_OPS = vocabulary.OPS
_STORED = {"int", "proto", vocabulary.ENVELOPE, "bytes", "struct", "uuid", "switch",
           "struct_run", "prefixed", "default", "varint", "bool", "struct_array",
           "condition", "blocks", "proto_prefixed", "struct_when", "proto_prefixed_when",
           "int_when", "prefixed_optional", "default_bool", "derive", "struct_args",
           "array_args", "struct_sized", "message_bytes",
           "lenenc", "fixed", "text_rest", "struct_run_when", "float", "int_array",
           "bit_field", "masked_bytes", "terminated", "int_range", "lenenc_int",
           "lenenc_optional", "marker"}
_TEXT_KINDS = {"bytes": 0, "utf8": 1, "mutf8": 2}
_PRESENCE = {None: vocabulary.PRESENCE["always"], "remaining": vocabulary.PRESENCE["remaining"]}
_PEEK = vocabulary.PRESENCE["peek"]
_SIGNED, _BIG, _VARINT = 1, 2, 4
_GUARDED, _EXTRA = 8, 16  # a row after a guard; a guard's value row 0, a derived bool
_NULLABLE = 32  # a lenenc row's 0xfb is None
_KEY_OPTIONAL = 64  # a masked_bytes row's key may be None
_NONZERO = 128  # an int_range row's value may not be 0
_LENENC_CONST = 256  # a lenenc_int row is a constant (not stored)
_INT_TYPE = re.compile(r"([ui])(8|16|24|32|64)(be|le)?")
_CHECKSUMS = {"crc32c": checksums.crc32c, "crc32": checksums.crc32}
_METHODS = ("encode", "decode", "decode_from")
# Every struct's layout as its module declared it, compiled codec or not: the columnar
# decoding of captured frames (runtime/spark/columnar_frames.py) walks them.
_LAYOUTS: dict[type, tuple[bool, tuple[FrameRow, ...]]] = {}


def available() -> bool:
    """Whether the frame extension is built and the compiled codecs are switched on."""
    return _framecodec is not None and compiled.available()


def install_frame_layouts(layouts: Iterable[FrameLayout]) -> None:
    """Give each struct class of a generated frames module the compiled codec, if available.

    Called once, at the end of the module, with the generator's layout tables; a struct's
    nested structs come before it.
    """
    layouts = tuple(layouts)
    for cls, check_end, rows, *_ in layouts:
        _LAYOUTS[cls] = (check_end, rows)
    if not available():
        return
    assert _framecodec is not None and compiled._wirecodec is not None
    codecs: dict[type, Any] = {}
    nparams: dict[type, int] = {}
    module: ModuleType | None = None
    for cls, check_end, rows, *takes in layouts:
        nparams[cls] = takes[0] if takes else 0
        table = _c_rows(rows, codecs, nparams)
        python = tuple(cls.__dict__[name] for name in _METHODS)
        codec = _framecodec.FrameCodec(cls, table, check_end, python[0], python[1].__func__,
                                       python[2].__func__, nparams[cls])
        class_method = compiled._wirecodec.ClassMethod
        methods = (codec,
                   class_method(cls, codec.own_decode, codec.decode, python[1].__func__),
                   class_method(cls, codec.own_decode_from, codec.decode_from,
                                python[2].__func__))
        if _decodes_by_direction(rows):
            # Its switch decodes another struct each way: the decode methods take to_server.
            methods = (codec,
                       class_method(cls, codec.own_decode_directed, codec.decode_directed,
                                    python[1].__func__),
                       class_method(cls, codec.own_decode_from_directed,
                                    codec.decode_from_directed, python[2].__func__))
        elif nparams[cls] or _decode_takes_more(python[2].__func__):
            # Decoding one on its own takes the params (or the direction) as keywords: the
            # Python methods' (the codec runs a struct with params inside its holder). Its
            # encode hands keywords to them itself.
            methods = (codec, python[1], python[2])
        codecs[cls] = codec
        compiled.register(cls, python, methods)
        if codec.install_constructor(cls.__dict__["__init__"]):
            compiled.register_constructor(cls, codec)
        module = sys.modules.get(cls.__module__)
    if codecs and module is not None:
        _point_tables_at_codecs(module, codecs, nparams)


def frame_layout(cls: type) -> tuple[bool, tuple[FrameRow, ...]] | None:
    """The layout table of frame struct ``cls`` (whether bytes after its last field are an
    error, its rows), or None when its module gave it none."""
    return _LAYOUTS.get(cls)


def _decodes_by_direction(rows: tuple[FrameRow, ...]) -> bool:
    """Whether a struct's table has a switch decoding another struct each way, with the
    cases of both directions (its decode methods take to_server)."""
    return any(row[0] == "directional_switch" and isinstance(row[3], tuple) for row in rows)


def _decode_takes_more(decode_from: Any) -> bool:
    """Whether a generated ``decode_from`` takes more than (cls, buf, pos, end): the
    direction of a switch decoding another struct each way."""
    code = decode_from.__code__
    return bool(code.co_argcount + code.co_kwonlyargcount > 4)


def _point_tables_at_codecs(module: ModuleType, codecs: dict[type, Any],
                            nparams: dict[type, int]) -> None:
    """Point the module's tables of decode_from methods (a switch's cases, bound when the
    module ran) at the compiled ones, where a struct the compiled codec does not take (as a
    switch decoding another struct each way) looks its cases up."""
    for table in list(vars(module).values()):
        if type(table) is not dict:
            continue
        for key, method in list(table.items()):
            cls = getattr(method, "__self__", None)
            if (isinstance(cls, type) and cls in codecs and not nparams[cls]
                    and getattr(method, "__func__", None)
                    is cls.__dict__["decode_from"].__wrapped__):
                compiled.register_table_entry(table, key, cls.decode_from)  # type: ignore[attr-defined]


def _c_rows(rows: tuple[FrameRow, ...], codecs: dict[type, Any],
            nparams: dict[type, int] | None = None) -> tuple[tuple[Any, ...], ...]:
    """The rows as the extension takes them: (op, slot, width, flags, index, number, obj,
    dispatch attribute, body table, present-dict slot), names resolved to row indexes;
    ``nparams``: how many params each nested struct takes (none when left out)."""
    nparams = nparams or {}
    index = {row[1]: i for i, row in enumerate(rows)}
    switch_of = {row[4][0]: i for i, row in enumerate(rows)
                 if vocabulary.FRAME_ALIASES.get(row[0], row[0]) == "switch"}
    range_ends = {row[3]: i for i, row in enumerate(rows) if row[0] == "size_range_end"}
    out = []
    guarded = False
    for word, name, int_type, ref, extra in rows:
        op = vocabulary.FRAME_ALIASES.get(word, word)
        width, flags = (0, _VARINT) if int_type == "varint" else (
            _int_type(int_type) if int_type else (0, 0))
        # Neither a derived size nor a constant length-encoded integer is stored.
        slot = name if op in _STORED and word != "derived_size" and not (
            op == "lenenc_int" and ref is not None) else None
        at, number = -1, 0
        obj: Any = None
        attr: Any = None
        body: Any = None
        present: Any = None
        if op == "const":
            number = ref & ((1 << 8 * width) - 1)  # as read: a negative constant's two's complement
        elif op == "size":
            at = index[ref]
        elif op == "checksum":
            obj = _CHECKSUMS[ref]
        elif op == "proto":
            obj, at = ref, index[extra]
        elif op == vocabulary.ENVELOPE:
            obj, at = ref, index[extra[0]]
            attr, body, present = extra[1], extra[2], extra[3]
            op = "proto"
        elif op == "bytes":
            at = -1 if ref is None else index[ref]
        elif op == "struct":
            obj = codecs[ref]
            if isinstance(extra, tuple):
                at, number = _PEEK, extra[1]
                width, flags = _int_type(extra[0])
            else:
                at = _PRESENCE[extra]
        elif op == "uuid":
            obj, attr = UUID, SafeUUID.unknown
        elif op == "switch":
            key, size, codes = extra
            at, number = (-1 if size is None else index[size]), index[key]
            if isinstance(ref, tuple):  # decoding another struct each way: both tables
                attr = _decoders(ref[1], codecs)
                ref, flags = ref[0], flags | _EXTRA
            obj = _decoders(ref or {}, codecs)
            body = {cls: (code, codecs.get(cls)) for cls, code in codes.items()}
        elif op in ("switch_key", "derived_key"):
            at = switch_of[name]
            if op == "derived_key":
                attr = _program(ref, index)
        elif op == "bits":
            number = ref
        elif op == "bit_field":
            container, number, width = ref
            as_bool, enum, steps = extra
            at, flags = index[container], _EXTRA if as_bool else 0
            if enum is not None:
                obj, attr = {int(member): member for member in enum}, enum
            if steps is not None:
                attr, slot = _program(steps, index), None
        elif op == "struct_run":
            obj = codecs[ref]
            at = -1 if extra is None else index[extra]
        elif op == "prefixed":
            number, obj = _TEXT_KINDS[ref], extra
        elif op == "default":
            obj = ref
        elif op == "size_rest":
            number = (ref or 0) & (2**64 - 1)  # an adjustment, as its two's complement
        elif op == "count_of":
            at = index[ref]
        elif op in ("struct_array", "int_array"):
            obj = codecs[ref] if op == "struct_array" else None
            if isinstance(extra, tuple):  # counted by a program, not a count_of row
                attr = _program(extra, index)
            else:
                at = index[extra]
        elif op in ("lenenc", "lenenc_optional"):
            number, flags = _TEXT_KINDS[ref], _NULLABLE if extra else 0
        elif op == "const_bytes":
            obj = ref
        elif op == "fixed":
            number, at = _TEXT_KINDS[ref], extra
        elif op == "text_rest":
            number = _TEXT_KINDS["utf8"]
        elif op == "condition":
            obj = _program(ref, index)
        elif op == "blocks":
            obj = codecs.get(ref, ref)
            length_width, length_flags = _int_type(extra[0])
            body = (length_width, length_flags, extra[1], -1 if extra[2] is None else extra[2])
        elif op == "proto_prefixed":
            obj = ref
        elif op in ("struct_when", "proto_prefixed_when", "int_when"):
            obj = codecs[ref] if op == "struct_when" else ref
            body = tuple(_guard_step(word, arg, index) for word, arg in extra)
        elif op == "prefixed_optional":
            number = _TEXT_KINDS[ref]
        elif op == "default_bool":
            obj = ref
        elif op == "len_value":
            number, at = ref & (2**64 - 1), index[extra]  # the constant as its two's complement
        elif op == "message_bytes":
            at, obj = index[ref], extra
        elif op in ("guard", "value", "derive"):
            attr = _program(ref, index)
            flags |= _EXTRA if extra is True else 0
        elif op in ("struct_args", "array_args"):
            obj, number = codecs[ref], nparams.get(ref, 0)
            if op == "array_args":
                (word, count), extra = extra
                at, width = (-1, count) if word == "param" else (index[count], 0)
                flags |= _EXTRA if word == "stored" else 0  # counted by a stored integer
            attr = _program(extra, index)
        elif op == "size_of_struct":
            at = index[ref]
        elif op == "marker":
            number, obj = ref & ((1 << 8 * width) - 1), False  # False when not there
        elif op == "size_range":
            at = range_ends[name]
        elif op == "size_range_end":
            at = index[ref]
        elif op == "struct_sized":
            obj, at = codecs[ref], index[extra]
        elif op == "struct_run_when":
            obj, attr = codecs[ref], _program(extra, index)
        elif op == "masked_bytes":
            size, key_optional = extra
            at, number = -1 if size is None else index[size], index[ref]
            flags |= _KEY_OPTIONAL if key_optional else 0
        elif op == "int_range":
            low, high, nonzero = ref
            bits = 64 if width == 0 else 8 * width
            signed = bool(flags & _SIGNED)
            low = (-(1 << bits - 1) if signed else 0) if low is None else low
            high = ((1 << bits - 1) - 1 if signed else (1 << bits) - 1) if high is None else high
            obj = (low & (2**64 - 1), high & (2**64 - 1))
            flags |= _NONZERO if nonzero else 0
        elif op == "lenenc_int":
            flags |= (_NULLABLE if extra else 0) | (_LENENC_CONST if ref is not None else 0)
            number = 0 if ref is None else ref
        elif op == "terminated":
            number, obj = _TEXT_KINDS[ref], extra
        elif op == "delimited":
            obj = ref
        elif op == "requires":
            obj = tuple((vocabulary.EXPR[word], index[arg] if isinstance(arg, str) else arg or 0)
                        for word, arg in ref)
        if guarded:
            flags |= _GUARDED
        guarded = op == "guard"
        out.append((_OPS[op], slot, width, flags, at, number, obj, attr, body, present))
    return tuple(out)


def _decoders(table: dict[int, Any], codecs: dict[type, Any]) -> dict[int, Any]:
    """A switch's table of decode_from methods as the extension takes it: each case's codec,
    or its class when it has none."""
    return {k: codecs.get(m.__self__, m.__self__) for k, m in table.items()}


def _guard_step(word: str, arg: Any, index: dict[str | None, int]) -> tuple[Any, ...]:
    """A step of a guarded row's program as the extension takes it: (word, row) for a field,
    (word, row, attribute) for a message's attribute, (word, constant or 0) otherwise."""
    if word == "attr":
        row, attr = arg.split(".")
        return vocabulary.EXPR[word], index[row], attr
    if word == "len":
        return vocabulary.EXPR[word], index[arg]
    return vocabulary.EXPR[word], index[arg] if word == "field" else arg or 0


def _program(steps: Any, index: dict[str | None, int]) -> tuple[tuple[int, int], ...]:
    """A program's steps as the extension takes them: numbered, fields by their row."""
    return tuple((vocabulary.EXPR[word], index[arg] if word in ("field", "has", "len") else
                  arg or 0)
                 for word, arg in steps)


def _int_type(name: str) -> tuple[int, int]:
    match = _INT_TYPE.fullmatch(name)
    if match is None:
        raise ValueError(f"not an integer type: {name!r}")
    flags = (_SIGNED if match[1] == "i" else 0) | (_BIG if match[3] != "le" else 0)
    return int(match[2]) // 8, flags
