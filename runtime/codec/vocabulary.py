"""The words of the compiled codecs' layout tables, the numbers the C code knows them by, and
the most rows a frame table may have.

The generator writes these names into the tables of generated modules, ``runtime.codec.compiled``
and ``runtime.codec.compiled_frames`` turn them into numbers, and ``_wirecodec.c`` and
``_framecodec.c`` switch on those numbers. They are defined here only: the C enums come from
``_vocabulary.h``, which ``python runtime/codec/vocabulary.py`` writes from this module (``make``
does, when this file changes; ``make check`` fails when the header is stale). Each C module
also exports the numbering it was compiled with (``VOCABULARY``), and :func:`check_built`
refuses an extension built from another vocabulary, so a stale build cannot misread a table;
:func:`check_built_limit` does the same for the row limit.

This module imports nothing of protoframe, so that the build can run it as a script.
"""

from __future__ import annotations

import sys
from types import MappingProxyType
from typing import Final

# How a protobuf field's value is written (kind) and held (mode), in a protobuf layout row:
#   kind: a protobuf scalar type name, "enum", "open_enum" (proto3: unknown numbers are kept
#         as ints) or "message"
#   mode: "required", "optional" (None is unset), "repeated", "packed" (repeated, written
#         packed), "sparse" (an optional message kept in the class's dict of present fields),
#         "implicit" (proto3 implicit presence: the default is not written, and an absent
#         field reads as it), "oneof" (an optional member of a oneof: decoding one clears the
#         others) or "map" (a dict; kind and extra describe its values)
#   A row of the last three modes has a sixth item: the default value ("implicit"), the
#   oneof's index in its message ("oneof"), or (key kind, key default, value default, None
#   for message values) ("map"). Map keys are of MAP_KEY_KINDS.
FIELD_KINDS: Final = (
    "int32", "int64", "uint32", "uint64", "sint32", "sint64", "bool", "enum", "fixed32",
    "sfixed32", "fixed64", "sfixed64", "float", "double", "string", "bytes", "message",
    "open_enum",
)
FIELD_MODES: Final = (
    "required", "optional", "repeated", "packed", "sparse", "implicit", "oneof", "map",
)
MAP_KEY_KINDS: Final = (
    "int32", "int64", "uint32", "uint64", "sint32", "sint64", "bool", "fixed32", "sfixed32",
    "fixed64", "sfixed64", "string",
)

# What one row of a frame struct's layout does (see runtime/codec/compiled_frames.py):
#   int        a stored integer
#   const      a constant: written on encode, checked on decode
#   size       the byte size of a later field
#   size_rest  the byte size of everything after it: the struct's region ends there (plus an
#              adjustment, adjust:, which the number counts beyond it)
#   checksum   a checksum of the bytes from the next field to the end
#   proto      a sized protobuf message
#   bytes      bytes sized by a size field, or the rest of the region
#   struct     a nested struct, there as FRAME_PRESENCE says: always, when bytes remain, or
#              when a peeked integer matches
#   uuid       16 bytes, a uuid.UUID
#   switch     a struct chosen by an earlier switch_key row, sized by the size row before it
#              or reaching to the end of the region
#   switch_key the integer choosing a switch's struct (on encode, found from the body's type)
#   struct_run nested structs one after another up to the end of the region (a list), or of
#              the bytes the size row right before it reads
#   prefixed   bytes, UTF-8 or modified UTF-8 text after a length prefix of their own
#   default    a stored integer read when its bytes remain, a default value when not
#   skip_trailing  the last row: bytes after the last field are skipped
#   varint     a stored unsigned LEB128 varint (up to 10 bytes, 64 bits)
#   bool       a stored byte read as a bool
#   count_of   the number of items of a later struct_array or int_array row (on encode, its
#              length)
#   struct_array  as many nested structs as its count_of row says (a list), or as a program
#              over earlier integer rows gives (count: an expression or another field)
#   condition  a stored integer there when its program (EXPR_OPS) gives true, else None
#   blocks     a nested struct's encoding cut in length-prefixed blocks after a block count
#   proto_prefixed  a protobuf message after a length prefix of its own (a varint)
#   struct_when, proto_prefixed_when  a nested struct (always there but for its condition), a
#              proto_prefixed message, there when its program gives true, else None
#   len_value  an integer the encoder works out as a constant plus the length of a bytes row's
#              value (Pravega's table keys); decoding steps over it
#   int_when   a stored integer there when its program gives true, else None: a condition whose
#              program may read the length of an earlier bytes row ("len") and messages' attrs
#   prefixed_optional  a prefixed row read when bytes remain, None when not (written when not None)
#   default_bool  a stored bool read when its byte remains, a default bool when not
# The rows TANK brought (issue #21); their programs may read the struct's params ("param"):
#   guard      no field of its own: the next row is there when its program gives true; when
#              not, that row's value is None (0 for a value row) and nothing is read or written
#   value      an integer (fixed width or varint) not stored: read on decode for the rows
#              after it, written on encode as its program (the spec's value:) computes it
#   derive     no bytes: a stored integer or bool its program computes from earlier rows (on
#              encode, the value held must be what the program gives)
#   struct_args   a nested struct taking params: its program leaves one value per param
#   array_args    nested structs taking params, as many as its count_of row or a param says;
#              its program (which may read the item's "index") leaves their params
#   size_of_struct  the byte size (fixed width or varint) of a later struct_sized row
#   struct_sized  a nested struct (params as struct_args) that fills the size its size row reads
#   message_bytes  bytes sized by an integer field of the message an earlier proto row decoded
#              (on encode, that field is set to the bytes' length first)
#   lenenc     bytes or UTF-8 text after a MySQL length-encoded integer (shortest form written,
#              any form read); when nullable, 0xfb stands for None
#   const_bytes  constant bytes (a fixed-length or prefixed constant string): written on
#              encode, compared on decode, not stored
#   fixed      bytes or UTF-8 text of a fixed length
#   text_rest  UTF-8 text to the end of the region
#   struct_run_when  a struct_run there when its program (EXPR_OPS) gives true, else None
#   float      an IEEE 754 single or double (4 or 8 bytes) in either byte order
#   int_array  as many stored integers of one width as its count_of row says (a list), or
#              as a program gives (as struct_array)
# The rows AMQP's bit fields brought:
#   bits       an unsigned integer of named bit sub-fields (the bit_field rows right after it),
#              not stored: decoding gives up when a reserved bit is set; encoding packs it
#              from its sub-fields
#   bit_field  no bytes: some bits of the bits row before it, a stored bool, integer or enum
#              member, or (with a value program, run on encode) not stored
#   derived_key  no bytes: a switch's key its program computes from earlier rows, not stored;
#              on encode found from the body's type first (value rows before it may read it),
#              and its program must give it back
#   masked_bytes  bytes XOR-ed with the bytes of an earlier key row (an unsigned integer's, in
#              its byte order, or bytes), repeated; sent as they are when the key is None. Sized
#              by an earlier size row, an earlier integer row, or the rest of the region
#   requires   no field of its own (after the fields): a rule (require:) whose program gives
#              true; when it does not, the Python code raises its error
#   terminated bytes or UTF-8 text ended by a terminator (bytes) in the struct's region, which
#              the value may not hold (a C string, a request line's words)
#   int_range  a stored integer (fixed width or varint) whose value must lie in a range and
#              may have to be nonzero (min:, max:, nonzero:)
#   lenenc_int a MySQL length-encoded integer (any form read, the shortest written): stored,
#              None for NULL (0xfb) when nullable; or a constant, not stored
#   lenenc_optional  a lenenc row (not nullable) read when bytes remain, None when not (written
#              when not None): MariaDB's OK packet's info
#   delimited  no field of its own (the first row): the struct ends with a delimiter, its
#              fields read from the bytes before its first occurrence (which they fill), and
#              written after them (content holding it gives up)
# The rows TANK's consume response brought:
#   marker     an optional constant integer, there when a peek of its width matches it; stored
#              as a bool (True when there), written when True
#   size_range the byte size (fixed width, unsigned) of the fields from the next row to the
#              one its size_range_end row follows: decoding bounds them by it and checks that
#              they fill it; encoding fills it in once they are written. Not stored
#   size_range_end  no field of its own: where the size_range row's fields end
FRAME_OPS: Final = ("int", "const", "size", "size_rest", "checksum", "proto", "bytes", "struct",
                    "uuid", "switch", "switch_key", "struct_run", "prefixed", "default",
                    "skip_trailing", "varint", "bool", "count_of", "struct_array", "condition",
                    "blocks", "proto_prefixed", "struct_when", "proto_prefixed_when",
                    "len_value", "int_when", "prefixed_optional", "default_bool",
                    "guard", "value", "derive", "struct_args", "array_args", "size_of_struct",
                    "struct_sized", "message_bytes",
                    "lenenc", "const_bytes", "fixed", "text_rest", "struct_run_when",
                    "float", "int_array", "bits", "bit_field", "derived_key",
                    "masked_bytes", "requires", "terminated", "delimited", "int_range",
                    "lenenc_int", "lenenc_optional", "marker", "size_range", "size_range_end")
# Words of a plan the compiled codec takes without a row of their own: params of int and bool
# kinds, which the holder's row passes as 64-bit integers.
FRAME_PLAN_WORDS: Final = ("params",)
# The steps of a condition row's program (generator/compiled_exprs.py), evaluated on a stack of
# 64-bit integers: "field" pushes an earlier row's integer, "const" a constant; "not" and
# "neg" take one value, the others two (and/or by truth; the comparisons give 0 or 1); "attr"
# pushes an integer attribute of an earlier row's protobuf message (struct_when and
# proto_prefixed_when rows only); "len" the length of an earlier bytes row's value (those and
# int_when rows).
# The programs of the rows TANK brought also use: "param" (push the struct's param of that
# number), "index" (an array_args item's index), "select" (a if c else b, from a, c, b),
# "orv" and "andv" (Python's or/and, giving one of their values). "has" pushes whether an
# earlier optional struct row is there (1) or None (0). The programs run on encode only (value
# and bit_field rows) may also push whether a stored field is not None ("has") and the length
# of a stored bytes field ("len").
EXPR_OPS: Final = ("field", "const", "not", "neg", "and", "or", "bitand", "bitor", "bitxor",
                   "rshift", "lshift", "add", "sub", "eq", "ne", "lt", "le", "gt", "ge", "attr",
                   "len", "param", "index", "select", "orv", "andv", "has")
# The most values a program holds at once (generator/compiled_exprs.py keeps to it).
EXPR_MAX_DEPTH: Final = 16
# A row of the generated table only: a protobuf envelope, which the C codec takes as "proto"
# with a command dispatch.
ENVELOPE: Final = "envelope"
# Words of the generated tables only, and the row each becomes: a signed size, or an unsigned
# size of a switch, is a "size" row (a negative size gives up); bytes sized by a signed size
# are a "bytes" row; text read when bytes remain, with a default when not, a "prefixed" row
# holding that default.
FRAME_ALIASES: Final = MappingProxyType({
    "signed_size": "size", "size_of_other": "size", "signed_bytes": "bytes",
    "prefixed_default": "prefixed", "signed_size_rest": "size_rest",
    # A size of the rest counting more or less than it (adjust:): a "size_rest" row with the
    # adjustment.
    "adjusted_size_rest": "size_rest",
    # A switch decoding another struct each way: a "switch" row with the cases of both
    # directions (its struct's decode methods take to_server, as the Python ones do).
    "directional_switch": "switch",
    # Nested structs one after another filling the size of the size row right before them
    # (AMQP's field tables): a "struct_run" row naming that size row.
    "struct_run_sized": "struct_run",
    # A derived integer that is the size of a later field: a "derive" row whose value is not
    # stored (the struct has no attribute for it) and which encoding does not check.
    "derived_size": "derive",
})
FRAME_PRESENCE: Final = ("always", "remaining", "peek")
# The integer widths, in bytes, the frame codec reads and writes (3: u24/i24, MariaDB's packet
# length); a struct with an integer of another width stays on the Python codec.
FRAME_INT_WIDTHS: Final = (1, 2, 3, 4, 8)
# The most rows a frame struct's table may have: the compiled codec keeps a struct's sizes and
# values in arrays of this length on the C stack. The generator leaves a longer struct to the
# Python methods. The C header defines it as FRAME_MAX_ROWS, and ``_framecodec`` exports the
# value it was compiled with as ``MAX_ROWS``, which :func:`check_built_limit` compares.
FRAME_MAX_ROWS: Final = 64

# Each vocabulary as the C code names it: (export name, enum prefix, first number, names,
# name of the end marker, or "" for none).
_C_ENUMS: Final = (
    ("FIELD_KINDS", "K", 1, FIELD_KINDS, "K_KIND_END"),
    ("FIELD_MODES", "M", 0, FIELD_MODES, "M_MODE_END"),
    ("FRAME_OPS", "OP", 1, FRAME_OPS, "OP_END"),
    ("FRAME_PRESENCE", "PRESENT", 0, FRAME_PRESENCE, ""),
    ("EXPR_OPS", "X", 1, EXPR_OPS, "X_END"),
)


def _numbered(first: int, names: tuple[str, ...]) -> MappingProxyType[str, int]:
    return MappingProxyType({name: first + i for i, name in enumerate(names)})


# name -> number, for each vocabulary, as the C enums number them.
NUMBERS: Final = MappingProxyType({
    export: _numbered(first, names) for export, _, first, names, _ in _C_ENUMS
})
KINDS: Final = NUMBERS["FIELD_KINDS"]
MODES: Final = NUMBERS["FIELD_MODES"]
OPS: Final = NUMBERS["FRAME_OPS"]
PRESENCE: Final = NUMBERS["FRAME_PRESENCE"]
EXPR: Final = NUMBERS["EXPR_OPS"]

HEADER_PATH: Final = "runtime/codec/_vocabulary.h"


def c_header() -> str:
    """The text of ``_vocabulary.h``: the row limit, one enum per vocabulary, and the table
    each C module exports as ``VOCABULARY`` for :func:`check_built`."""
    lines = [
        "/* Generated from runtime/codec/vocabulary.py by `python runtime/codec/vocabulary.py`",
        "   (make runs it). DO NOT EDIT: change vocabulary.py and run make. */",
        "#ifndef PROTOFRAME_VOCABULARY_H",
        "#define PROTOFRAME_VOCABULARY_H",
        "",
        f"#define FRAME_MAX_ROWS {FRAME_MAX_ROWS}",
        f"#define EXPR_MAX_DEPTH {EXPR_MAX_DEPTH}",
        "",
    ]
    table = []
    for export, prefix, first, names, end in _C_ENUMS:
        items = [f"{prefix}_{name.upper()} = {number}"
                 for name, number in _numbered(first, names).items()]
        if end:
            items.append(f"{end} = {first + len(names)}")
        lines.append(f"enum {{ /* {export} */")
        lines += [f"    {item}," for item in items]
        lines += ["};", ""]
        table += [f'    {{"{export}", "{name}", {prefix}_{name.upper()}}},' for name in names]
    lines += [
        "/* (vocabulary, name, number) for each word; ended by a NULL vocabulary. */",
        "typedef struct { const char *vocabulary, *name; int number; } VocabularyWord;",
        "static const VocabularyWord VOCABULARY_WORDS[] = {",
        *table,
        "    {NULL, NULL, 0},",
        "};",
        "",
        "#endif",
    ]
    return "\n".join(lines) + "\n"


def check_built(module_name: str, built: object, wanted: tuple[str, ...]) -> None:
    """Raise ImportError unless ``built`` (a C module's ``VOCABULARY``: vocabulary -> name ->
    number) numbers the ``wanted`` vocabularies as :data:`NUMBERS` does."""
    if not isinstance(built, dict):
        raise ImportError(f"{module_name} exports no VOCABULARY: it was built from older "
                          "sources; rebuild it (make venv, or pip install again)")
    for export in wanted:
        mine, theirs = dict(NUMBERS[export]), built.get(export)
        if theirs != mine:
            raise ImportError(
                f"{module_name} was compiled with another {export} than "
                f"runtime/codec/vocabulary.py defines ({theirs} against {mine}): regenerate "
                f"{HEADER_PATH} and rebuild (make venv)")


def check_built_limit(module_name: str, name: str, built: object, wanted: int) -> None:
    """Raise ImportError unless ``built`` (a C module's constant ``name``) is ``wanted``."""
    if built is None:
        raise ImportError(f"{module_name} exports no {name}: it was built from older sources; "
                          "rebuild it (make venv, or pip install again)")
    if built != wanted:
        raise ImportError(
            f"{module_name} was compiled with {name} = {built} where "
            f"runtime/codec/vocabulary.py says {wanted}: regenerate {HEADER_PATH} and rebuild "
            "(make venv)")


def main(argv: list[str]) -> int:
    """``vocabulary.py``: print the header; ``vocabulary.py --check FILE``: exit 1 if FILE is
    not what it would print."""
    if argv[:1] == ["--check"] and len(argv) == 2:
        with open(argv[1], encoding="utf-8") as f:
            if f.read() == c_header():
                return 0
        print(f"{argv[1]} is stale: run make (it runs runtime/codec/vocabulary.py)",
              file=sys.stderr)
        return 1
    if argv:
        print("usage: vocabulary.py [--check HEADER]", file=sys.stderr)
        return 2
    sys.stdout.write(c_header())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
