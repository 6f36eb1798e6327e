"""The code of structs ended by a delimiter (``delimiter:``): decoding reads the fields from
the bytes before the delimiter's first occurrence, encoding writes it after them (refusing
content that holds it, which could not be read back), and a frame's length is where the
delimiter ends (``runtime.codec.stream.find_delimited``; a stream decoder's
``DelimitedLength`` searches each byte once).
"""

from __future__ import annotations

from protoframe.generator.codewriter import bytes_literal
from protoframe.generator.errors import GeneratorBug
from protoframe.generator.frame_emit import EmitContext, indent, raise_lines
from protoframe.generator.layout_plan import LayoutPlan
from protoframe.generator.runtime_modules import ERRORS, STREAM


def delimited_decode(ctx: EmitContext, plan: LayoutPlan, lines: list[str]) -> list[str]:
    """``decode_from``'s body ``lines`` bounded by the struct's delimiter: ``end`` becomes
    where it starts, and the struct goes on after it."""
    delimiter = plan.delimiter
    if delimiter is None:
        return lines
    if lines[-1] != "return obj, pos":
        raise GeneratorBug(f"{plan.name}: decode_from does not end in its return",
                           str(plan.struct.location))
    ctx.imports.use(ERRORS, "TruncatedError")
    ctx.imports.use(ERRORS, "SizeMismatchError")
    literal = bytes_literal(delimiter)
    head = [f"d_end = buf.find({literal}, pos, end)",
            "if d_end < 0:", *indent(raise_lines(
                "TruncatedError", f"{plan.name}: no delimiter {delimiter!r}", fmt=False)),
            "end = d_end"]
    body = lines[:-1]
    made = body.index("obj = cls.__new__(cls)")
    if not plan.check_end and not plan.skips_trailing and body[made - 1] != "pos = end":
        body[made:made] = ["if pos != end:", *indent(raise_lines(
            "SizeMismatchError", f"{plan.name}: {{end - pos}} bytes before its delimiter are "
            "left over after the last field"))]
    if plan.skips_trailing:
        body[made:made] = ["pos = end"]
    return [*head, *body, f"return obj, pos + {len(delimiter)}"]


def delimited_encode(ctx: EmitContext, plan: LayoutPlan, lines: list[str]) -> list[str]:
    """``encode_to``'s body ``lines``, then the delimiter; ``EncodeError`` when the fields'
    bytes hold it."""
    delimiter = plan.delimiter
    if delimiter is None:
        return lines
    ctx.imports.use(ERRORS, "EncodeError")
    literal = bytes_literal(delimiter)
    body = [] if lines == ["pass"] else lines
    return ["d_start = len(out)", *body,
            f"if out.find({literal}, d_start) >= 0:", *indent(raise_lines(
                "EncodeError", f"{plan.name}: the fields hold the delimiter {delimiter!r}",
                fmt=False)),
            f"out += {literal}"]


def delimited_length(ctx: EmitContext, plan: LayoutPlan) -> tuple[list[str], str] | None:
    """For a struct with a delimiter: the body of its stateless length probe and the
    expression a stream decoder uses instead (it remembers how far it searched); else None."""
    delimiter = plan.delimiter
    if delimiter is None:
        return None
    ctx.imports.use(STREAM, "find_delimited")
    ctx.imports.use(STREAM, "DelimitedLength")
    literal = bytes_literal(delimiter)
    return ([f"return find_delimited(buf, pos, end, limit, {literal})"],
            f"DelimitedLength({literal})")
