"""Bit fields: an unsigned integer declared as named runs of bits (``bits:``).

The integer becomes computed: encoding packs it from its parts (``value:``), reserved parts
left zero. Each named part becomes a field of the struct right after the integer, with no bytes
of its own (``derive:`` its bits of the integer) and ``bit_of`` saying where it sits, so
expressions, conditions and switches name it like any other field. Everything is checked here,
with the position of the offending key, before any emitter runs.
"""

from __future__ import annotations

import keyword

from protoframe.generator.build_context import BuildContext, PathT
from protoframe.generator.expr import parse
from protoframe.generator.frame_bits import BitPart, BitSlot, FrameEnum
from protoframe.generator.frame_ir import (
    INT_TYPES,
    BoolField,
    FrameField,
    IntField,
)
from protoframe.generator.spec_yaml import LocDict

# Keys a field with bits: cannot have: its value is its parts, and it is always there.
_CLASHES = ("const", "value", "derive", "size_of", "count_of", "checksum", "when", "when_peek",
            "when_remaining", "default")


def bit_parts(ctx: BuildContext, f: FrameField, item: LocDict,
              path: PathT) -> list[tuple[int, FrameField]]:
    """Read ``item``'s ``bits:`` into ``f`` (an integer field); the named parts as fields, in
    order, to follow ``f`` in its struct, each with its index in ``bits:`` ([] when there are
    none or the key is wrong)."""
    bpath = [*path, "bits"]
    kind = item["type"]
    if not isinstance(f, IntField) or INT_TYPES.get(kind, (0, True))[1]:
        ctx.error("bits: needs an unsigned fixed-width integer (u8, u16, u32 or u64)", bpath,
                  key=True)
        return []
    clash = [k for k in _CLASHES if k in item]
    if clash:
        ctx.error(f"bits: cannot be combined with {', '.join(clash)}: the integer is its "
                  "parts, and always there", bpath, key=True)
        return []
    raw = item["bits"]
    before = len(ctx.errors)
    widths = [_width(ctx, part, [*bpath, i]) for i, part in enumerate(raw)]
    total = f.width * 8
    # A wrong width was reported: their sum says nothing more, and the parts still become
    # fields, so that what names them is not reported too.
    if len(ctx.errors) == before and sum(widths) != total:
        ctx.error(f"bits: the widths add up to {sum(widths)}, but a {kind} has {total} bits",
                  bpath, key=True)
        return []
    shift = total
    out: list[tuple[int, FrameField]] = []
    for i, (part, width) in enumerate(zip(raw, widths, strict=True)):
        ppath = [*bpath, i]
        shift -= width
        reserved = bool(part.get("reserved", False))
        name = part.get("name")
        is_bool = part.get("type") == "bool"
        if name is None and not reserved:
            ctx.error("bits: a part needs a name unless it is reserved: true", ppath)
            continue
        if name is not None and (keyword.iskeyword(name) or name.startswith("_")):
            ctx.error(f"invalid identifier {name!r}: a Python keyword or private name",
                      [*ppath, "name"])
            continue
        bp = BitPart(name, width, shift, is_bool, reserved,
                     ctx.loc([*ppath, "name"] if name is not None else ppath))
        f.bits.append(bp)
        for key in ("enum", "value"):
            if reserved and key in part:
                ctx.error(f"bits: a reserved part is zero; it cannot have {key}:",
                          [*ppath, key])
        if reserved or name is None:
            continue
        sub: FrameField
        loc = ctx.loc([*ppath, "name"])
        if is_bool:
            sub = BoolField(name=name, doc=part.get("doc", ""), location=loc)
        else:
            sub = IntField(name=name, doc=part.get("doc", ""), location=loc, width=f.width,
                           signed=False, order=f.order)
        sub.derive = parse(_unpack_text(f.name, bp, total))
        if "value" in part:  # computed on encode from other fields, not stored
            sub.value = ctx.expr(part["value"], [*ppath, "value"])
        sub.bit_of = BitSlot(f.name, shift, width, _enum(ctx, part, width, ppath))
        out.append((i, sub))
    f.value = parse(pack_text(f.bits))
    return out


def _enum(ctx: BuildContext, part: LocDict, width: int, path: PathT) -> FrameEnum | None:
    """The spec enum a part's values are (``enum:``), its values checked to fit the part."""
    if "enum" not in part:
        return None
    name = part["enum"]
    enum = ctx.frame_enums.get(name)
    if part.get("type") == "bool":
        ctx.error("bits: a bool part cannot have an enum", [*path, "enum"])
        return None
    if enum is None:
        ctx.error(f"bits: unknown enum {name!r} (the spec's enums: declares none of that "
                  "name)", [*path, "enum"])
        return None
    for member, value in enum.members:
        if not 0 <= value < 1 << width:
            ctx.error(f"bits: {name}.{member} = {value} does not fit the part's {width} bits",
                      [*path, "enum"])
            return None
    return enum


def _width(ctx: BuildContext, part: LocDict, path: PathT) -> int:
    """A part's width: as given, or 1 for a bool (a bool of another width is an error)."""
    if part.get("type") == "bool":
        if part.get("width", 1) != 1:
            ctx.error("bits: a bool part is one bit wide", [*path, "width"])
        return 1
    if "width" not in part:
        ctx.error("bits: a part needs width: <bits> (or type: bool, one bit)", path)
        return 0
    width = part["width"]
    assert isinstance(width, int)
    return width


def pack_text(parts: list[BitPart]) -> str:
    """The expression packing the named parts into the integer (reserved bits stay zero)."""
    terms = [p.name if p.shift == 0 else f"({p.name} << {p.shift})"
             for p in parts if not p.reserved and p.name is not None]
    return " | ".join(terms) or "0"


def _unpack_text(container: str, part: BitPart, total: int) -> str:
    """The expression giving ``part`` back from the integer ``container`` holds."""
    low = (1 << part.width) - 1
    if part.shift == 0:
        return f"{container} & {low:#x}"
    if part.shift + part.width == total:
        return f"{container} >> {part.shift}"
    return f"({container} >> {part.shift}) & {low:#x}"
