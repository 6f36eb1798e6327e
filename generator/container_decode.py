"""The decoder's code for fields that hold other values: arrays (``Array``), switch bodies
(``Switch``) and content split into blocks (``Blocks``).

``frame_decoder.Decoder.value`` matches on these operations and calls the functions here; they
read and write the decoder's state (``dec.index`` while an array's elements are read).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protoframe.generator import case_args
from protoframe.generator.frame_emit import (
    annotation,
    bug,
    call_args,
    indent,
    int_read_of,
    raise_lines,
    switch_of,
)
from protoframe.generator.frame_ir import SwitchField
from protoframe.generator.frame_values import decode_array
from protoframe.generator.layout_ops import Array, Blocks, Nested, NestedOther, ReadUuid, Switch
from protoframe.generator.runtime_modules import ERRORS, PROTOWIRE

if TYPE_CHECKING:
    from protoframe.generator.frame_decoder import Decoder


def array_field(dec: Decoder, op: Array, target: str) -> list[str]:
    region = op.region
    if region.size or region.prefix or region.length is not None:
        # A size_of field measures the array: its elements are read within those bytes
        # (AMQP's field tables), which they must fill.
        lines, vend = dec.region_end(op.field, region)
        if vend != "end":
            return [*lines, *dec.sized_call(op.field, array_to(dec, op, target, vend), vend),
                    f"if pos != {vend}:", *indent(raise_lines(
                        "SizeMismatchError", f"{dec.s.name}.{op.field.name}: content "
                        "does not fill its declared size", fmt=False))]
    return array_to(dec, op, target, "end")


def array_to(dec: Decoder, op: Array, target: str, end: str) -> list[str]:
    if op.item_limits:
        return decode_array(dec, op, target, end)
    f = op.field
    el = op.element
    item_ann = annotation(dec.ctx, dec.s, el.field)
    index = f"i_{f.name}" if op.index_used else "_"
    dec.index = index
    items = f"a_{f.name}"
    # Named for the field: two arrays of one struct may hold different element types.
    item = f"e_{f.name}"
    lines = [f"{items}: list[{item_ann}] = []"]
    match el:
        case Nested(struct=struct) | NestedOther(struct=struct):
            if op.until_end and struct.name in dec.ctx.runs:
                return [f"{target}, pos = {struct.name}.decode_run(buf, pos, {end})"]
            args = call_args(f.args, dec.s, dec.name, f)
            one = [f"{item}, pos = {struct.name}.decode_from(buf, pos, {end}{args})",
                   f"{items}.append({item})"]
        case ReadUuid():
            one = [*dec.need("16", el.field),
                   f"{items}.append(UUID(bytes=buf[pos : pos + 16]))", "pos += 16"]
        case _:
            one = [*dec.int_read(el.field, item, int_read_of(el)), f"{items}.append({item})"]
    if op.until_end:
        lines.append(f"while pos < {end}:")
        if index != "_":
            lines.append(f"    {index} = len({items})")
    else:
        if op.count is None:
            raise bug(f, f"{f.name!r}: an array with neither a count nor until_end")
        count = dec.render(op.count, f, parens=False)
        lines.append(f"for {index} in range({count}):")
    lines += ["    " + x for x in one]
    lines.append(f"{target} = {items}")
    dec.index = "_"
    return lines


def switch_field(dec: Decoder, op: Switch, target: str) -> list[str]:
    f = switch_of(op)
    dec.ctx.imports.use(ERRORS, "UnknownCommandTypeError")
    if not case_args.every_case_takes(f):  # else no case table names it
        dec.ctx.imports.use("collections.abc", "Callable")
    region = op.region
    lines, vend = dec.region_end(f, region) if (region.size or region.prefix) \
        else ([], "end")
    key = f"f_{op.key}"
    alias = f.alias
    base = f.tables
    decoder_type = f"Callable[[bytes, int, int], tuple[{alias}, int]]"
    if op.directional:
        for direction in ("to_server", "to_client"):
            dec.ctx.tables += case_table(f, direction, f"{base}_{direction.upper()}",
                                         decoder_type)
        table = f"({base}_TO_SERVER if to_server else {base}_TO_CLIENT)"
        unknown = "sent {'to' if to_server else 'from'} the server"
    elif not case_args.every_case_takes(f):  # else no case is left for a table
        dec.ctx.tables += case_table(f, "to_client", f"{base}_DECODERS", decoder_type)
        table, unknown = f"{base}_DECODERS", ""
    else:
        table = unknown = ""
    raise_unknown = raise_lines("UnknownCommandTypeError", f"{dec.s.name}.{op.key}: no "
                                f"layout for {{{key}}}{' ' + unknown if unknown else ''}",
                                extra=f", {key}")
    lookup = [
        f"decode_body = {table}.get({key})",
        "if decode_body is None:",
        *indent(raise_unknown),
    ]
    call = f"{target}, pos = decode_body(buf, pos, {vend})"
    if case_args.taking(f):
        # Cases taking params are called with their args; the table holds the others.
        lines += dec.sized_call(f, case_args.decode_lines(
            f, key, target, vend, lambda held: case_args.case_call_args(
                f, held, dec.s, dec.name), [*lookup, call], raise_unknown), vend)
    else:
        lines += [*lookup, *dec.sized_call(f, [call], vend)]
    if vend != "end":
        dec.ctx.imports.use(ERRORS, "SizeMismatchError")
        lines += [f"if pos != {vend}:", *indent(raise_lines(
            "SizeMismatchError", f"{dec.s.name}.{f.name}: {{{vend} - pos}} bytes of the "
            "body left over"))]
    return lines


def blocks_field(dec: Decoder, op: Blocks, target: str) -> list[str]:
    f = op.field
    cw, lw = op.count_type.width, op.length_type.width
    cp = dec.ctx.packer(cw, op.count_type.signed, op.count_type.order)
    lp = dec.ctx.packer(lw, op.length_type.signed, op.length_type.order)
    dec.ctx.imports.use(ERRORS, "SizeMismatchError")
    dec.ctx.imports.use(PROTOWIRE, "truncated")
    lines = [*dec.need(str(cw), f), f"n_blocks = {cp}.unpack_from(buf, pos)[0]", f"pos += {cw}"]
    if op.max_blocks is not None:
        lines += [f"if n_blocks > {op.max_blocks}:", *indent(raise_lines(
            "SizeMismatchError", f"{dec.s.name}.{f.name}: {{n_blocks}} blocks, more than "
            f"{op.max_blocks}"))]
    args = call_args(f.args, dec.s, dec.name, f)
    lines += [
        "parts: list[bytes] = []",
        "for _ in range(n_blocks):",
        *["    " + x for x in dec.need(str(lw), f)],
        f"    n = {lp}.unpack_from(buf, pos)[0]",
        f"    pos += {lw}",
        f"    if n > {op.block_size}:",
        *indent(raise_lines("SizeMismatchError", f"{dec.s.name}.{f.name}: block of {{n}} "
                        f"bytes; blocks hold up to {op.block_size}"), 2),
        "    if pos + n > end:",
        *indent(dec.overrun(f, "block of {n} bytes runs past the end"), 2),
        "    parts.append(buf[pos : pos + n])",
        "    pos += n",
        "content = b\"\".join(parts)",
        *dec.sized_call(f, [f"{target}, used = {op.struct.name}.decode_from(content, 0, "
                           f"len(content){args})"], "content"),
        "if used != len(content):",
        *indent(raise_lines("SizeMismatchError", f"{dec.s.name}.{f.name}: "
                        "{len(content) - used} bytes of block content left over")),
    ]
    return lines


def case_table(f: SwitchField, direction: str, name: str, decoder_type: str) -> list[str]:
    lines = [f"{name}: dict[int, {decoder_type}] = {{"]
    for c in f.cases:
        struct = getattr(c, direction)
        if struct is not None and not struct.params:  # with params: decoded ahead of it
            lines.append(f"    {c.value}: {struct.name}.decode_from,")
    lines.append("}")
    return lines
