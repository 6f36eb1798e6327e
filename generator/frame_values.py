"""The code of the operations that bound a field's values, for both Python codecs: terminated
bytes and strings (``Terminated``), constant ones (``ConstBytes``), integers with a range
(``RangedInt``), and lists ended by a terminator or bounded in length (``Array`` with
``item_limits``).

``frame_decoder.Decoder.value`` and ``frame_encoder.Encoder.write`` match on these operations
and call the functions here. A terminator is found with ``bytes.find``/``startswith`` over
the region, never byte by byte; a list's ``max_items`` is checked before each element is read
(and against a count before the loop), so a hostile count or stream stops at the limit.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from protoframe.generator.frame_emit import (
    annotation,
    bug,
    call_args,
    indent,
    int_read_of,
    raise_lines,
)
from protoframe.generator.layout_ops import (
    Array,
    ConstBytes,
    Nested,
    NestedOther,
    RangedInt,
    ReadUuid,
    Terminated,
)
from protoframe.generator.runtime_modules import ERRORS, MUTF8, PROTOWIRE

if TYPE_CHECKING:
    from protoframe.generator.frame_decoder import Decoder
    from protoframe.generator.frame_encoder import Encoder


def shown(data: bytes) -> str:
    """Bytes as an error message shows them: ``0x00``, ``0x0d0a``."""
    return "0x" + data.hex()


def _rule(op: RangedInt) -> str:
    """What a ranged integer must be, in words: ``must be 1 to 10 and not 0``."""
    if op.low is not None and op.high is not None:
        bound = f"{op.low} to {op.high}"
    elif op.low is not None:
        bound = f"at least {op.low}"
    elif op.high is not None:
        bound = f"at most {op.high}"
    else:
        return "must not be 0"
    return f"must be {bound}" + (" and not 0" if op.nonzero else "")


def readable_bytes(data: bytes) -> str:
    """A bytes literal showing printable ASCII as itself: ``b"AMQP"``, ``b"\\x00"``."""
    return 'b"' + "".join(_ESCAPED.get(b) or (chr(b) if 0x20 <= b < 0x7F else f"\\x{b:02x}")
                          for b in data) + '"'


_ESCAPED = {0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t", 0x22: '\\"', 0x5C: "\\\\"}


def _ruled_out(op: RangedInt, value: str) -> str:
    """The condition under which ``value`` breaks ``op``'s range."""
    tests = []
    if op.low is not None:
        tests.append(f"{value} < {op.low}")
    if op.high is not None:
        tests.append(f"{value} > {op.high}")
    if op.nonzero:
        tests.append(f"{value} == 0")
    return " or ".join(tests)


# ---------------------------------------------------------------------------------------------
# decoding


def decode_value(dec: Decoder, op: Terminated | ConstBytes | RangedInt,
                 target: str) -> list[str]:
    """Read ``op``'s field into ``target`` (a constant is checked, not kept)."""
    f = op.field
    where = f"{dec.s.name}.{f.name}"
    if isinstance(op, RangedInt):
        dec.ctx.imports.use(ERRORS, "ValueNotAllowedError")
        return [*dec.int_read(f, target, op.shape), f"if {_ruled_out(op, target)}:",
                *indent(raise_lines("ValueNotAllowedError", f"{where}: {{{target}}} is not "
                                    f"allowed (it {_rule(op)})",
                                    extra=f", {dec.where(f)}, {target}"))]
    if isinstance(op, ConstBytes):
        dec.ctx.imports.use(ERRORS, "BadMagicError")
        n = len(op.wire)
        expected = repr(op.wire).replace("{", "{{").replace("}", "}}")
        return [*dec.need(str(n), f), f"if buf[pos : pos + {n}] != {readable_bytes(op.wire)}:",
                *indent(raise_lines("BadMagicError", f"{where}: expected {expected}, got "
                                    f"{{buf[pos : pos + {n}]!r}}")),
                f"pos += {n}"]
    dec.ctx.imports.use(ERRORS, "MissingTerminatorError")
    lines = [f"vend = buf.find({readable_bytes(op.terminator)}, pos, end)", "if vend < 0:",
             *indent(raise_lines("MissingTerminatorError", f"{where}: no terminator "
                                 f"{shown(op.terminator)} before the end of its region",
                                 fmt=False))]
    if not op.text:
        lines.append(f"{target} = buf[pos:vend]")
    elif op.encoding == "mutf8":
        dec.ctx.imports.use(MUTF8, "decode as mutf8_decode")
        lines.append(f"{target} = mutf8_decode(buf[pos:vend], {dec.where(f)})")
    else:
        dec.ctx.imports.use(PROTOWIRE, "decode_str")
        lines.append(f"{target} = decode_str(buf, pos, vend, {dec.where(f)})")
    return [*lines, f"pos = vend + {len(op.terminator)}"]


def decode_array(dec: Decoder, op: Array, target: str, end: str = "end") -> list[str]:
    """A list with a terminator, ``min_items`` or ``max_items``, read into ``target``."""
    f = op.field
    el = op.element
    where = f"{dec.s.name}.{f.name}"
    index = f"i_{f.name}" if op.index_used else "_"
    dec.index = index
    items, item = f"a_{f.name}", f"e_{f.name}"
    if op.min_items is not None or op.max_items is not None:
        dec.ctx.imports.use(ERRORS, "ItemCountError")
    lines = [f"{items}: list[{annotation(dec.ctx, dec.s, el.field)}] = []"]
    match el:
        case Nested(struct=struct) | NestedOther(struct=struct):
            args = call_args(f.args, dec.s, dec.name, f)
            read = [f"{item}, pos = {struct.name}.decode_from(buf, pos, {end}{args})"]
        case ReadUuid():
            read = [*dec.need("16", el.field), f"{item} = UUID(bytes=buf[pos : pos + 16])",
                    "pos += 16"]
        case _:
            read = dec.int_read(el.field, item, int_read_of(el))
    full = [] if op.max_items is None else [f"if len({items}) == {op.max_items}:", *indent(
        raise_lines("ItemCountError", f"{where}: more than {op.max_items} items",
                    fmt=False))]
    body: list[str] = [f"{index} = len({items})"] if index != "_" else []
    if op.terminator is not None:
        dec.ctx.imports.use(ERRORS, "MissingTerminatorError")
        missing = [f"if pos >= {end}:", *indent(raise_lines(
            "MissingTerminatorError", f"{where}: no terminator {shown(op.terminator)} before "
            "the end of its region", fmt=False))]
        lines.append("while True:")
        if op.terminator_value is None:  # bytes before the next element end the list
            size = len(op.terminator)
            body += [f"if buf.startswith({readable_bytes(op.terminator)}, pos, {end}):",
                     f"    pos += {size}", "    break", *missing, *full, *read]
        else:  # an element of this value ends it
            body += [*missing, *read, f"if {item} == {op.terminator_value}:", "    break",
                     *full]
        body.append(f"{items}.append({item})")
    elif op.until_end:
        lines.append(f"while pos < {end}:")
        body += [*full, *read, f"{items}.append({item})"]
    else:
        if op.count is None:
            raise bug(f, f"{f.name!r}: an array with neither a count nor until_end")
        n = f"n_{f.name}"
        lines.append(f"{n} = {dec.render(op.count, f, parens=False)}")
        tests = [t for t, bound in ((f"{n} < {op.min_items}", op.min_items),
                                    (f"{n} > {op.max_items}", op.max_items)) if bound]
        if tests:
            lines += [f"if {' or '.join(tests)}:", *indent(raise_lines(
                "ItemCountError", f"{where}: {{{n}}} items, {_count_rule(op)}"))]
        lines.append(f"for {index} in range({n}):")
        body += [*read, f"{items}.append({item})"]
    lines += indent(body)
    if op.min_items is not None and (op.terminator is not None or op.until_end):
        lines += [f"if len({items}) < {op.min_items}:", *indent(raise_lines(
            "ItemCountError", f"{where}: {{len({items})}} items, {_count_rule(op)}"))]
    dec.index = "_"
    return [*lines, f"{target} = {items}"]


def _count_rule(op: Array) -> str:
    if op.min_items is not None and op.max_items is not None:
        return f"{op.min_items} to {op.max_items} allowed"
    if op.min_items is not None:
        return f"at least {op.min_items} needed"
    return f"at most {op.max_items} allowed"


# ---------------------------------------------------------------------------------------------
# encoding


def encode_value(enc: Encoder, op: Terminated | ConstBytes | RangedInt) -> list[str]:
    """Append ``op``'s field: its value checked against the rules, or the constant."""
    f = op.field
    value = f"self.{f.name}"
    where = f"{enc.s.name}.{f.name}"
    if isinstance(op, RangedInt):
        enc.ctx.imports.use(ERRORS, "ValueOutOfRangeError")
        return [f"if {_ruled_out(op, value)}:", *indent(raise_lines(
            "ValueOutOfRangeError", f"{where} = {{{value}}}: it {_rule(op)}")),
            *enc.pack(op.shape, value)]
    if isinstance(op, ConstBytes):
        return [f"{enc.buf} += {readable_bytes(op.wire)}"]
    enc.ctx.imports.use(ERRORS, "TerminatorInValueError")
    term = readable_bytes(op.terminator)
    data = value
    lines = []
    if op.text:
        data = f"data_{f.name}"
        lines.append(f"{data} = {enc.str_bytes(op.encoding, value)}")
    if len(op.terminator) == 1:
        holds = f"{term} in {data}"
    else:  # the value may also end with the start of the terminator ("a\r\n" + CR LF CR LF)
        holds = f"({data} + {term}).find({term}) != len({data})"
    return [*lines, f"if {holds}:", *indent(raise_lines(
        "TerminatorInValueError", f"{where} holds its terminator {shown(op.terminator)}",
        fmt=False)), f"{enc.buf} += {data}", f"{enc.buf} += {term}"]


def encode_array(enc: Encoder, op: Array, out: str) -> list[str]:
    """Write a list with a terminator, ``min_items`` or ``max_items`` to ``out``."""
    f = op.field
    where = f"{enc.s.name}.{f.name}"
    value = f"self.{f.name}"
    lines: list[str] = []
    tests = [t for t, bound in ((f"len({value}) < {op.min_items}", op.min_items),
                                (f"len({value}) > {op.max_items}", op.max_items)) if bound]
    if tests:
        enc.ctx.imports.use(ERRORS, "ItemCountOutOfRangeError")
        lines += [f"if {' or '.join(tests)}:", *indent(raise_lines(
            "ItemCountOutOfRangeError", f"{where} has {{len({value})}} items, "
            f"{_count_rule(op)}"))]
    plain = replace(op, terminator=None, terminator_value=None, min_items=None, max_items=None)
    if op.terminator is None:
        return [*lines, *enc.array_write(plain, out)]
    enc.ctx.imports.use(ERRORS, "TerminatorInValueError")
    term = readable_bytes(op.terminator)
    item = f"e_{f.name}"
    loop = enc.array_write(plain, out)
    if not loop or not loop[0].startswith("for "):
        raise bug(f, f"{f.name!r}: a terminated list's loop does not come first")
    if op.terminator_value is not None:
        # Each element is refused before it is written when it equals the terminator.
        loop[1:1] = [f"    if {item} == {op.terminator_value}:", *indent(raise_lines(
            "TerminatorInValueError", f"{where}: an element is the terminator "
            f"{op.terminator_value}, which would end the list there", fmt=False), 2)]
        return [*lines, *loop, f"{out} += {term}"]
    starts = f"starts_{f.name}"
    loop[1:1] = [f"    {starts}.append(len({out}))"]
    return [*lines, f"{starts}: list[int] = []", *loop, f"{out} += {term}",
            f"if any({out}.startswith({term}, s) for s in {starts}):", *indent(raise_lines(
                "TerminatorInValueError", f"{where}: an element's bytes start with the "
                f"terminator {shown(op.terminator)}, which would end the list there",
                fmt=False))]
