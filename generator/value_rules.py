"""The keys that bound a field's values: ``terminator:`` (strings, bytes and lists ended by
bytes or an element value), ``const:`` on strings and bytes, ``min:``/``max:``/``nonzero:`` on
integers and ``min_items:``/``max_items:`` on lists.

Read by ``StructBuilder.field`` once a field's own keys are (``read_value_rules``), and
checked against what the rest of the struct makes of the field (``check_value_rules``: a size
field measuring a terminated field, a count field for a terminated list, a switch key with a
range), each mistake at the position of its key.
"""

from __future__ import annotations

from protoframe.generator.build_context import BuildContext, PathT
from protoframe.generator.frame_ir import (
    INT_TYPES,
    ArrayField,
    BoolField,
    BytesField,
    FrameField,
    IntField,
    StringField,
    StructDef,
    StructField,
    UuidField,
    VarintField,
    raw_indices,
)
from protoframe.generator.literals import LiteralError, byte_string, integer
from protoframe.generator.spec_yaml import LocDict
from protoframe.runtime.codec import mutf8

VARINT_MAX = (1 << 64) - 1


def int_bounds(f: FrameField) -> tuple[int, int]:
    """The values an integer or varint field's type can hold."""
    if isinstance(f, IntField):
        bits = f.width * 8
        return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if f.signed else (0, (1 << bits) - 1)
    return 0, VARINT_MAX


def terminated_at(data: bytes, terminator: bytes) -> bool:
    """Whether ``data`` followed by ``terminator`` would decode back as ``data``: the first
    terminator in the two together is the one appended."""
    return (data + terminator).find(terminator) == len(data)


class ValueRules(BuildContext):
    def read_value_rules(self, f: FrameField, item: LocDict, path: PathT) -> None:
        """The value-bounding keys of ``f``, after its own keys are read."""
        if "terminator" in item:
            if isinstance(f, ArrayField):
                self.list_terminator(f, item, path)
            else:
                self.terminator(f, item, path)
        if "const" in item and isinstance(f, BytesField | StringField):
            self.const_data(f, item, path)
        if any(k in item for k in ("min", "max", "nonzero")):
            self.value_range(f, item, path)
        if any(k in item for k in ("min_items", "max_items")):
            self.item_counts(f, item, path)

    def clash(self, item: LocDict, path: PathT, key: str, keys: tuple[str, ...],
              why: str) -> bool:
        """Report ``key`` given with any of ``keys``; whether it was."""
        found = [k for k in keys if k in item]
        if found:
            self.error(f"{key}: cannot be combined with {', '.join(found)}: {why}",
                       [*path, key])
        return bool(found)

    def terminator(self, f: FrameField, item: LocDict, path: PathT) -> None:
        """``terminator:`` on bytes or a string: the value runs to the first terminator."""
        tpath = [*path, "terminator"]
        if not isinstance(f, BytesField | StringField):
            self.error("terminator: needs a bytes, string or array field", tpath)
            return
        if self.clash(item, path, "terminator", ("length", "prefix", "size", "compression"),
                      "the terminator is what bounds the field"):
            return
        f.terminator = b"\0"  # stands in while the terminator is wrong: one mistake, one error
        try:
            f.terminator = byte_string(item["terminator"])
        except LiteralError as exc:
            self.error(f"terminator: {exc}", tpath)

    def list_terminator(self, f: ArrayField, item: LocDict, path: PathT) -> None:
        """``terminator:`` on an array: an element value (integers) or bytes (structs)."""
        tpath = [*path, "terminator"]
        if self.clash(item, path, "terminator", ("count", "until_end", "size", "prefix",
                                                 "length"),
                      "the terminator is what ends the list"):
            return
        el = f.element
        f.terminator = b"\0"  # stands in while the terminator is wrong: one mistake, one error
        try:
            if isinstance(el, IntField | VarintField):
                value = integer(item["terminator"])
                low, high = int_bounds(el)
                if not low <= value <= high:
                    self.error(f"terminator: {value} does not fit the list's elements "
                               f"({low} to {high})", tpath)
                    return
                f.terminator_value = value
                f.terminator = element_bytes(el, value)
            elif isinstance(el, StructField):
                f.terminator = byte_string(item["terminator"])
            elif el is not None:
                self.error("terminator: a list of integers ends at an element value, a list "
                           f"of structs at bytes; a list of {el.kind} cannot have one", tpath)
        except LiteralError as exc:
            self.error(f"terminator: {exc}", tpath)

    def const_data(self, f: BytesField | StringField, item: LocDict, path: PathT) -> None:
        """``const:`` on bytes (their bytes) or a string (its text): written, checked, not
        stored; without a length, prefix or terminator it is as long as the constant."""
        cpath = [*path, "const"]
        unbounded = f.length is None and f.prefix is None and f.terminator is None
        if unbounded and "size" not in item:
            f.length = 0  # stands in while the constant is wrong: one mistake, one error
        if self.clash(item, path, "const", ("when", "when_peek", "when_remaining", "default",
                                            "size", "nullable", "compression"),
                      "a constant is always there and has its own length"):
            return
        raw = item["const"]
        try:
            if isinstance(f, StringField):
                if not isinstance(raw, str):
                    self.error("const: on a string field is its text, a YAML string", cpath)
                    return
                data = mutf8.encode(raw) if f.encoding == "mutf8" else raw.encode()
            else:
                data = byte_string(raw)
        except LiteralError as exc:
            self.error(f"const: {exc}", cpath)
            return
        if not data and f.prefix is None and f.terminator is None:
            self.error("const: an empty constant without a prefix or terminator takes no "
                       "bytes at all", cpath)
            return
        if not unbounded and f.length is not None and f.length != len(data):
            self.error(f"const: the constant is {len(data)} bytes, but length: is {f.length}",
                       cpath)
            return
        if f.terminator is not None and not terminated_at(data, f.terminator):
            self.error(f"const: the constant holds its terminator {f.terminator!r}", cpath)
            return
        if unbounded:
            f.length = len(data)
        f.const_data = data

    def value_range(self, f: FrameField, item: LocDict, path: PathT) -> None:
        """``min:``, ``max:`` and ``nonzero:`` on a stored integer or varint."""
        key = next(k for k in ("min", "max", "nonzero") if k in item)
        kpath = [*path, key]
        if not isinstance(f, IntField | VarintField):
            self.error(f"{key}: needs an integer or varint field", kpath)
            return
        if self.clash(item, path, key, ("const", "value", "derive", "size_of", "count_of",
                                        "checksum"),
                      "it bounds a stored value, and this one is computed"):
            return
        if isinstance(f, VarintField) and (f.encoding == "lenenc" or f.max_bytes is not None):
            self.error(f"{key}: bounds on a length-encoded or max_bytes: varint are not in the "
                       "language yet; bound a plain varint or a fixed-width integer", kpath)
            return
        low, high = int_bounds(f)
        bounds: dict[str, int] = {}
        for name in ("min", "max"):
            if name not in item:
                continue
            try:
                bounds[name] = integer(item[name])
            except LiteralError as exc:
                self.error(f"{name}: {exc}", [*path, name])
                return
            if not low <= bounds[name] <= high:
                self.error(f"{name}: {bounds[name]} is outside what a {_type_name(f)} holds "
                           f"({low} to {high})", [*path, name])
                return
        f.min_value, f.max_value = bounds.get("min"), bounds.get("max")
        if f.min_value is not None and f.max_value is not None and f.min_value > f.max_value:
            self.error(f"max: {f.max_value} is below min: {f.min_value}, so no value is "
                       "allowed", [*path, "max"])
        f.nonzero = bool(item.get("nonzero", False))
        lo = f.min_value if f.min_value is not None else low
        hi = f.max_value if f.max_value is not None else high
        if f.nonzero and lo == hi == 0:
            self.error("nonzero: min: and max: allow nothing but 0", [*path, "nonzero"])
        elif isinstance(f.default, int) and not (lo <= f.default <= hi and not (
                f.nonzero and f.default == 0)):
            self.error(f"default: {f.default} is not a value the field allows", [*path,
                                                                                "default"])

    def item_counts(self, f: FrameField, item: LocDict, path: PathT) -> None:
        """``min_items:`` and ``max_items:`` on an array."""
        key = "min_items" if "min_items" in item else "max_items"
        if not isinstance(f, ArrayField):
            self.error(f"{key}: needs an array field", [*path, key])
            return
        f.min_items, f.max_items = item.get("min_items"), item.get("max_items")
        if f.min_items is not None and f.max_items is not None and f.min_items > f.max_items:
            self.error(f"max_items: {f.max_items} is below min_items: {f.min_items}",
                       [*path, "max_items"])

    def check_value_rules(self, struct: StructDef, path: PathT) -> None:
        """What the rest of the struct makes of the fields: sizes, counts and switch keys."""
        for i, f in zip(raw_indices(struct), struct.fields, strict=True):
            fpath = [*path, "fields", i]
            if isinstance(f, ArrayField) and f.terminator is not None and f.count is not None:
                self.error("terminator: a list with a count_of field is not ended by a "
                           "terminator", [*fpath, "terminator"])
            elif f.terminator is not None and f.size is not None:
                self.error(f"terminator: {f.name!r} is measured by {f.size!r} too; the "
                           "terminator is what bounds it", [*fpath, "terminator"])
            el = f.element if isinstance(f, ArrayField) else None
            if isinstance(el, StructField) and f.terminator is not None and el.struct \
                    is not None and min_wire_size(el.struct) == 0:
                self.error(f"terminator: an element of {el.struct.name} can take no bytes at "
                           "all, so the list could grow without reading any (every element "
                           "must take at least one byte)", [*fpath, "terminator"])
            if f.const_data is not None and f.size is not None:
                self.error(f"const: {f.name!r} is measured by {f.size!r}, but a constant has "
                           "its own length", [*fpath, "const"])
            bounded = [k for k, v in (("min", f.min_value), ("max", f.max_value),
                                      ("nonzero", f.nonzero or None)) if v is not None]
            if bounded and f.is_switch_key:
                self.error(f"{bounded[0]}: {f.name!r} is a switch key, whose values are its "
                           "cases", [*fpath, bounded[0]])
            elif bounded and f.computed:  # a size another field's size: names
                self.error(f"{bounded[0]}: {f.name!r} is a size the encoder computes; bound "
                           "the field it measures instead", [*fpath, bounded[0]])


def min_wire_size(s: StructDef, seen: frozenset[str] = frozenset()) -> int:
    """The fewest bytes a value of ``s`` can take (0 when it may take none)."""
    if s.name in seen:
        return 0
    total = 0
    for f in s.fields:
        if not f.wire or f.optional:
            continue
        if isinstance(f, IntField | BoolField | UuidField) or f.length is not None:
            total += f.width_when_present or f.length or 0
        elif isinstance(f, VarintField):
            total += 1
        elif f.prefix is not None:
            total += 1 if f.prefix == "varint" else INT_TYPES[f.prefix][0]
        elif f.terminator is not None:
            total += len(f.terminator)
        elif isinstance(f, StructField) and f.struct is not None and f.size is None:
            total += min_wire_size(f.struct, seen | {s.name})
    return total


def varint_bytes(value: int) -> bytes:
    """``value`` (not negative) as a base-128 varint."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def element_bytes(el: IntField | VarintField, value: int) -> bytes:
    """How a list element of ``value`` is written."""
    if isinstance(el, VarintField):
        return varint_bytes(value)
    if el.order == "little":
        return value.to_bytes(el.width, "little", signed=el.signed)
    return value.to_bytes(el.width, "big", signed=el.signed)


def _type_name(f: FrameField) -> str:
    if isinstance(f, IntField):
        return next(k for k, v in INT_TYPES.items() if v == (f.width, f.signed))
    return "varint"
