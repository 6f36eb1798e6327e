"""The builder's rules for variable-length integers and adjusted sizes: ``max_bytes:`` on a
varint, a varint that is the size of the rest of its struct, and ``includes:`` / ``adjust:`` on
a size field (with ``size_extra``, what such a size counts beyond what it measures), and
MySQL's length-encoded integers (``encoding: lenenc``, ``prefix: lenenc``, their NULL).

A varint ``size_of: rest`` is written after what follows it is encoded, by inserting its bytes
in front of them (its width is not known ahead, so no placeholder can be patched): nothing that
is filled in after the fields it covers may cover the varint itself.
"""

from __future__ import annotations

from collections.abc import Callable

from protoframe.generator.build_context import PathT
from protoframe.generator.frame_ir import (
    BytesField,
    FrameField,
    IntField,
    StringField,
    StructDef,
    VarintField,
)
from protoframe.generator.spec_yaml import LocDict

Report = Callable[[str, PathT], None]

# Base-128 varints of up to 10 bytes hold 64 bits.
MAX_VARINT_BYTES = 10


def read_max_bytes(f: FrameField, item: LocDict, path: PathT, report: Report) -> None:
    """``max_bytes: N`` on a varint: at most N bytes (MQTT's remaining length: 4)."""
    if "max_bytes" not in item:
        return
    if not isinstance(f, VarintField):
        report("max_bytes: needs a varint field", [*path, "max_bytes"])
        return
    f.max_bytes = item["max_bytes"]
    if f.const is not None and f.const >> (7 * f.max_bytes):
        report(f"const: {f.const} needs more than the {f.max_bytes} bytes of max_bytes",
               [*path, "const"])


def check_varint_rest(struct: StructDef, index: int, f: FrameField, path: PathT,
                      report: Report) -> None:
    """A varint ``size_of: rest`` at ``struct.fields[index]``: what may not cover it."""
    names = [g.name for g in struct.fields]
    for j, g in enumerate(struct.fields):
        if g is f:
            continue
        if g.size_of == "rest" and j < index:
            report(f"{f.name!r} (a varint size of the rest) is inside the rest {g.name!r} "
                   "measures: only one of them can be the size of the rest", [*path, "size_of"])
        if g.checksum is not None and g.checksum.start in names and \
                names.index(g.checksum.start) <= index:
            report(f"checksum {g.name!r} covers {f.name!r}, a varint size of the rest, which "
                   "is written after the fields it measures; start the checksum after it",
                   [*path, "size_of"])
        if g.size_range is not None and g.size_range[0] in names and \
                g.size_range[1] in names and \
                names.index(g.size_range[0]) <= index <= names.index(g.size_range[1]):
            report(f"size_of range {g.name!r} covers {f.name!r}, a varint size of the rest, "
                   "which is written after the fields it measures", [*path, "size_of"])


def read_adjustment(f: FrameField, item: LocDict, path: PathT, report: Report) -> None:
    """``includes: self | header`` and ``adjust: N`` on a size field: the number on the wire
    is the size it measures plus its own bytes, or the struct's bytes up to and including it,
    plus N (PostgreSQL's lengths include themselves)."""
    keys = [k for k in ("includes", "adjust") if k in item]
    if not keys:
        return
    if f.size_of is None:
        for key in keys:
            report(f"{key}: needs a size_of: rest or size_of: <field> field (a size range or a "
                   "count cannot be adjusted)", [*path, key])
        return
    if "includes" in item:
        if not isinstance(f, IntField):
            report("includes: needs a fixed-width integer: a varint's own width is not known "
                   "until its value is (use adjust: instead)", [*path, "includes"])
            return
        f.size_includes = item["includes"]
    if "adjust" in item:
        adjust = item["adjust"]
        if adjust == 0:
            report("adjust: 0 changes nothing; leave it out", [*path, "adjust"])
            return
        if isinstance(f, IntField):
            most = 1 << (8 * f.width - (1 if f.signed else 0))
            if abs(adjust) >= most:
                report(f"adjust: {adjust} does not fit a {f.width}-byte size", [*path, "adjust"])
                return
        f.size_adjust = adjust


def check_header(struct: StructDef, index: int, f: FrameField, path: PathT,
                 report: Report) -> None:
    """``includes: header``: every field before the size has a fixed size, so the header's
    length is known when the code is generated."""
    for g in struct.fields[:index]:
        if g.fixed_size is None:
            report(f"includes: header needs fixed-size fields before {f.name!r}, and "
                   f"{g.name!r} has none", [*path, "includes"])
            return


def size_extra(struct: StructDef, f: FrameField) -> int:
    """What the number in size field ``f`` counts beyond the bytes it measures (the rules
    above hold: ``includes`` is on a fixed-width integer, the header has a fixed size)."""
    extra = f.size_adjust
    if f.size_includes is not None and isinstance(f, IntField):
        extra += f.width
        if f.size_includes == "header":
            index = struct.fields.index(f)
            extra += sum(g.fixed_size or 0 for g in struct.fields[:index])
    return extra


def read_lenenc(f: FrameField, item: LocDict, path: PathT, report: Report) -> None:
    """``encoding: lenenc`` on a varint: MySQL's length-encoded integer (``encoding:`` on a
    string names its text encoding instead)."""
    encoding = item.get("encoding")
    if encoding is None or isinstance(f, StringField):
        if encoding == "lenenc":
            report("encoding: lenenc needs a varint field (a length-encoded string is "
                   "prefix: lenenc)", [*path, "encoding"])
        return
    if not isinstance(f, VarintField):
        report(f"encoding: {encoding} needs a varint (lenenc) or a string (utf8, mutf8)",
               [*path, "encoding"])
        return
    if encoding != "lenenc":
        report(f"encoding: {encoding} is a string encoding; a varint takes lenenc",
               [*path, "encoding"])
        return
    f.encoding = "lenenc"
    clash = [k for k in ("max_bytes",) if k in item]
    if f.size_of == "rest" or clash:
        report("encoding: lenenc cannot be combined with " +
               (", ".join(clash) if clash else "size_of: rest") +
               " (a length-encoded integer has its own widths)", [*path, "encoding"])


def lenenc_nullable(f: FrameField, item: LocDict, path: PathT, report: Report) -> bool:
    """``nullable: true`` where MySQL's NULL (0xfb) stands for None: on a length-encoded
    integer, or bytes or a string with ``prefix: lenenc``. False when ``f`` is neither (the
    signed-prefix rules apply)."""
    lenenc_int = isinstance(f, VarintField) and item.get("encoding") == "lenenc"
    lenenc_prefix = isinstance(f, BytesField | StringField) and f.prefix == "lenenc"
    if not (lenenc_int or lenenc_prefix):
        return False
    clash = [k for k in ("when", "when_peek", "when_remaining", "default", "length", "size",
                         "const", "value", "derive", "size_of", "count_of") if k in item]
    if clash:
        report(f"nullable: cannot be combined with {', '.join(clash)}: its presence is its "
               "NULL (0xfb)", [*path, "nullable"])
    else:
        f.nullable = True
    return True
