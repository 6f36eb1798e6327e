"""The protocol page's layout sections: one table per struct (the frame first), its facts
and the cases of each switch.

Offsets are shown while every field before is of fixed size; sizes, types and notes say
what the spec says of each field, in the spec's own words where it has an expression.
"""

from __future__ import annotations

from dataclasses import dataclass

from protoframe.generator.docs_text import (
    ProtoNames,
    Table,
    case_value,
    cell,
    code,
    expr_text,
    join,
    link,
)
from protoframe.generator.frame_ir import (
    ArrayField,
    BlocksField,
    BoolField,
    BytesField,
    FloatField,
    FrameField,
    IntField,
    ProtoField,
    StringField,
    StructDef,
    StructField,
    SwitchField,
    UuidField,
    VarintField,
)
from protoframe.generator.spec_ir import FrameSpec
from protoframe.runtime.codec import mutf8


@dataclass
class LayoutView:
    anchor: str
    name: str
    doc: str
    facts: list[str]  # Markdown list items: params, trailing bytes
    table: Table
    switches: list[tuple[str, Table]]  # (caption, cases table)


def layout(spec: FrameSpec, s: StructDef, names: ProtoNames,
           anchors: dict[str, str]) -> LayoutView:
    rows: list[list[str]] = []
    offset: int | None = 0
    switches: list[tuple[str, Table]] = []
    for i, f in enumerate(s.fields, start=1):
        size = f.fixed_size
        rows.append([
            str(i),
            code(f.name),
            cell(_type_text(spec, f, names, anchors)),
            "—" if offset is None or not f.wire else str(offset),
            cell(_size_col(spec, s, f)),
            cell(_notes(spec, s, f, names)),
        ])
        offset = None if offset is None or size is None else offset + size
        if isinstance(f, SwitchField):
            key = s.field(f.switch_on or "")
            width = key.width if isinstance(key, IntField) else 0
            switches.append((f"Cases of `{f.name}`, selected by `{f.switch_on}`",
                             _cases_table(f, anchors, width)))
    table = Table(["#", "field", "type", "offset", "size (bytes)", "notes"], rows)
    facts = [] if rows else ["No fields: the layout is empty."]
    if s.params:
        facts.append("Params (passed by the field that holds it with `args:`, not stored): "
                     + join(f"`{p.name}` ({p.kind})" for p in s.params))
    if s.trailing == "ignore":
        facts.append("Trailing bytes after the last field are skipped (`trailing: ignore`).")
    if s.delimiter is not None:
        facts.append(f"It ends with the delimiter `{s.delimiter.hex(' ')}` "
                     f"({s.delimiter!r}), after its fields; they hold no copy of it.")
    if s.requires:
        facts.append("Every value obeys (`require:`; `RequirementError` on decode, "
                     "`RequirementUnmetError` on encode): "
                     + join(f"`{r.expr.text}`" for r in s.requires))
    return LayoutView(
        anchor=anchors[s.name],
        name=s.name,
        doc=s.doc.strip(),
        facts=facts,
        table=table,
        switches=switches,
    )


def _type_text(spec: FrameSpec, f: FrameField, names: ProtoNames,
               anchors: dict[str, str]) -> str:
    if f.bit_of is not None:
        slot = f.bit_of
        high = slot.shift + slot.width - 1
        span = f"bit {high}" if slot.width == 1 else f"bits {high}..{slot.shift}"
        kind = "bool, " if isinstance(f, BoolField) else \
            f"enum {slot.enum.name}, " if slot.enum is not None else ""
        return f"{kind}{span} of `{slot.container}`"
    match f:
        case IntField():
            t = f"{'i' if f.signed else 'u'}{f.width * 8}"
            if f.width > 1 and f.order != spec.byte_order:
                t += f" ({f.order}-endian)"
            return t
        case FloatField():
            t = f"f{f.width * 8}"
            return t + (f" ({f.order}-endian)" if f.order != spec.byte_order else "")
        case StringField():
            return f"string ({f.encoding})"
        case ProtoField(message=message) if message is not None:
            return f"proto `{names(message.full_name)}`"
        case StructField(struct=held) if held is not None:
            return f"struct {link(held.name, anchors)}"
        case BlocksField(struct=held) if held is not None:
            return f"blocks of {link(held.name, anchors)}"
        case ArrayField(element=StructField(struct=held)) if held is not None:
            return f"array of {link(held.name, anchors)}"
        case ArrayField(element=element) if element is not None:
            return f"array of {_type_text(spec, element, names, anchors)}"
        case SwitchField():
            return f"switch on `{f.switch_on}`"
        case VarintField(encoding="lenenc"):
            return "lenenc integer" + (" (0xfb: None)" if f.nullable else "")
    return f.kind  # varint, bool, uuid, bytes


def _size_col(spec: FrameSpec, s: StructDef, f: FrameField) -> str:
    if not f.wire:
        return "0 (derived)"
    fixed = f.fixed_size
    if fixed is not None:
        return str(fixed)
    if isinstance(f, IntField | BoolField | UuidField | FloatField) and f.optional:
        return f"{f.width_when_present}, or 0 when absent"
    if isinstance(f, VarintField) and f.encoding == "lenenc":
        return "1, 3, 4 or 9 (lenenc)"
    if isinstance(f, VarintField) and f.max_bytes is not None:
        return f"1–{f.max_bytes} (varint)" if f.max_bytes > 1 else "1 (varint)"
    if isinstance(f, VarintField):
        return "1–10 (varint)"
    if f.length is not None:
        return f"{f.length}, or 0 when absent"
    if f.size == "rest":
        return "the rest"
    if f.size is not None:
        return f"`{f.size}`"
    if f.prefix is not None:
        null = (" (0xfb: None)" if f.prefix == "lenenc" else " (-1: None)") if f.nullable else ""
        return f"{f.prefix} length prefix{null} + length"
    if f.terminator is not None:
        return f"up to the terminator `0x{f.terminator.hex()}` (included)"
    if isinstance(f, BytesField | StringField | ProtoField):
        return "the rest"
    if isinstance(f, ArrayField) and f.element is not None:
        each = f.element.fixed_size
        per = f" × {each}" if each is not None else " items"
        if f.until_end:
            return "items to the end" if each is None else f"the rest (items of {each})"
        assert f.count is not None
        return f"`{expr_text(f.count)}`{per}"
    if isinstance(f, BlocksField):
        return (f"{f.block_count} count, then per block {f.block_length} length + up to "
                f"{f.block_size}")
    return "variable"


def _notes(spec: FrameSpec, s: StructDef, f: FrameField, names: ProtoNames) -> str:
    notes: list[str] = []
    width = f.width if isinstance(f, IntField) else 0
    if f.marker and f.const is not None:
        notes.append(f"marker {_hex(f.const, width)}: present when the next {width} "
                     "bytes hold it; stored as a bool")
    elif f.const is not None:
        notes.append(f"constant {_hex(f.const, width)}, checked on decode")
    if isinstance(f, IntField) and f.reserved_mask:
        notes.append(f"reserved bits {_hex(f.reserved_mask, width)} must be zero "
                     "(`ReservedBitsError`)")
    if f.derive is not None and f.bit_of is None:
        notes.append(f"no bytes of its own: decode computes `{expr_text(f.derive)}`")
    if f.value is not None:
        notes.append(f"computed: `{expr_text(f.value)}`")
    if f.size_of == "rest":
        notes.append(f"size of everything after it in the {'frame' if s.is_frame else 'struct'}")
    elif f.size_of is not None:
        notes.append(f"size of `{f.size_of}`")
    if f.size_includes == "self":
        notes.append("counting its own bytes too")
    elif f.size_includes == "header":
        notes.append(f"counting `{s.name}` from its start too")
    if f.size_adjust:
        notes.append(f"plus {f.size_adjust}" if f.size_adjust > 0 else
                     f"minus {-f.size_adjust}")
    if f.size_range is not None and f.size_range[0] == f.size_range[1]:
        notes.append(f"size of `{f.size_range[0]}`")
    elif f.size_range is not None:
        notes.append(f"size of the fields `{f.size_range[0]}` through `{f.size_range[1]}`")
    if f.count_of is not None:
        notes.append(f"number of items in `{f.count_of}`")
    if f.checksum is not None:
        notes.append(f"{f.checksum.algorithm} of the bytes from `{f.checksum.start}` to the "
                     f"end of `{s.name}`, checked on decode")
    if f.is_switch_key:
        sw = next((g for g in s.fields if isinstance(g, SwitchField)
                   and g.switch_on == f.name), None)
        if sw is not None:
            notes.append(f"selects the case of `{sw.name}`; set from its type on encode")
    if f.when is not None:
        notes.append(f"present when `{expr_text(f.when)}`")
    if f.when_peek is not None and not f.marker:
        kind, equals = f.when_peek
        notes.append(f"present when the next {kind} (peeked, not consumed) is "
                     f"{_hex(equals, int(kind[1:]) // 8)}")
    if f.when_remaining:
        notes.append("present when bytes remain")
    if f.default is not None:
        notes.append(f"default `{_default(f.default)}` when absent")
    if isinstance(f, ProtoField) and f.dispatch_on is not None:
        enum = f.dispatch_on.type.enum
        enum_name = names(enum.full_name) if enum is not None else "?"
        notes.append(f"dispatch: `{f.dispatch_on.proto_name}` ({enum_name}) names the command; "
                     "its body is the field whose number equals that value (see Commands)")
    if f.compression is not None:
        text = f"compressed with the codec in `{f.compression.codec}`"
        if f.compression.uncompressed_size is not None:
            text += f", uncompressed size in `{f.compression.uncompressed_size}`"
        notes.append(text + f"; `decompressed_{f.name}()` undoes it")
    if isinstance(f, BytesField) and f.mask is not None:
        notes.append(f"XOR-masked on the wire with `{f.mask}` (unmasked when it is None)"
                     if f.mask_key is not None and f.mask_key.optional
                     else f"XOR-masked on the wire with `{f.mask}`")
    if isinstance(f, SwitchField) and s.is_frame and f.cases:
        notes.append("the command (see Commands)")
    notes += _value_notes(f)
    if f.args:
        notes.append("args: " + join(f"`{k}` = `{expr_text(v)}`" for k, v in f.args.items()))
    if isinstance(f, BlocksField) and f.max_blocks is not None:
        notes.append(f"at most {f.max_blocks} blocks")
    if f.doc:
        notes.append(f.doc.strip())
    return "; ".join(notes)


def _hex(value: int, width: int) -> str:
    """Markdown for a constant: `` `0x0e01` ``; a negative one also as its two's complement in
    ``width`` bytes: `` `-1` (`0xffffffff`) ``."""
    digits = max(2 * width, 2)
    if value >= 0:
        return f"`0x{value:0{digits}x}`"
    if width == 0:
        return f"`{value}`"
    return f"`{value}` (`0x{value & ((1 << 8 * width) - 1):0{digits}x}`)"


def _default(value: int | str | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _cases_table(f: SwitchField, anchors: dict[str, str], width: int) -> Table:
    rows = []
    for c in f.cases:
        if c.to_server is c.to_client:
            assert c.to_server is not None
            to_server = to_client = link(c.to_server.name, anchors)
        else:
            to_server = link(c.to_server.name, anchors) if c.to_server else "—"
            to_client = link(c.to_client.name, anchors) if c.to_client else "—"
        name = code(c.name) if c.client_name is None else \
            f"{code(c.name)} to server, {code(c.client_name)} to client"
        rows.append([case_value(c.value, width, c.literal), name, to_server, to_client])
    return Table(["value", "name", "to server", "to client"], rows)



def _value_notes(f: FrameField) -> list[str]:
    """What a field's terminator, constant bytes, range and item counts say."""
    notes: list[str] = []
    if isinstance(f, ArrayField) and f.terminator_value is not None:
        notes.append(f"ends at an item {f.terminator_value} (not stored)")
    elif isinstance(f, ArrayField) and f.terminator is not None:
        notes.append(f"ends where the next bytes are `0x{f.terminator.hex()}`")
    if f.const_data is not None:
        if isinstance(f, StringField):
            text = mutf8.decode(f.const_data) if f.encoding == "mutf8" else \
                f.const_data.decode()
            shown = f"`{text!r}`"
        elif all(0x20 <= b < 0x7F for b in f.const_data):
            shown = f"`{f.const_data!r}`"  # printable: b'AMQP'
        else:
            shown = f"`0x{f.const_data.hex()}`"
        notes.append(f"constant {shown}, checked on decode")
    bounds = [f"at least {f.min_value}" if f.min_value is not None else "",
              f"at most {f.max_value}" if f.max_value is not None else "",
              "not 0" if f.nonzero else ""]
    if any(bounds):
        notes.append("value " + ", ".join(b for b in bounds if b) + ", checked both ways")
    if isinstance(f, ArrayField) and (f.min_items is not None or f.max_items is not None):
        items = [f"at least {f.min_items}" if f.min_items is not None else "",
                 f"at most {f.max_items}" if f.max_items is not None else ""]
        notes.append("items: " + ", ".join(i for i in items if i) + ", checked both ways")
    return notes
