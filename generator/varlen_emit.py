"""The code of lengths beyond a plain count, for the frame codecs: a varint bounded by
``max_bytes:`` (read, written, and probed as a frame length), and a size that counts more than
what it measures (``includes:``, ``adjust:``).

The runtime side is ``runtime/codec/varlen.py``; both codec emitters call these helpers so a
bounded varint reads the same wherever it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protoframe.generator.frame_emit import EmitContext, indent, raise_lines
from protoframe.generator.layout_ops import ReadVarint, SizeOf, SizeRest
from protoframe.generator.runtime_modules import ERRORS, PROTOWIRE, VARLEN

if TYPE_CHECKING:
    from protoframe.generator.frame_decoder import Decoder


def bounded_read(ctx: EmitContext, where: str, target: str, max_bytes: int) -> list[str]:
    """Read a varint of at most ``max_bytes`` bytes at ``pos`` into ``target`` (``where``:
    the quoted ``Struct.field`` errors name)."""
    ctx.imports.use(VARLEN, "read_bounded_varint")
    ctx.imports.use(PROTOWIRE, "truncated")
    return ["try:",
            f"    {target}, pos = read_bounded_varint(buf, pos, end, {max_bytes})",
            "except IndexError:",
            f"    raise truncated({where}) from None"]


def bounded_bytes(ctx: EmitContext, value: str, max_bytes: int | None) -> str:
    """An expression: ``value`` as a varint (of at most ``max_bytes`` bytes when bounded)."""
    if max_bytes is None:
        ctx.imports.use(PROTOWIRE, "varint_bytes")
        return f"varint_bytes({value})"
    ctx.imports.use(VARLEN, "bounded_varint_bytes")
    return f"bounded_varint_bytes({value}, {max_bytes})"


def unadjust(ctx: EmitContext, name: str, target: str, adjust: int) -> list[str]:
    """Turn the number just read into ``target`` into the size it measures: take off what it
    counts besides (``includes:``, ``adjust:``), ``LengthTooSmallError`` when it is less
    (``name``: the ``Struct.field`` the message names)."""
    if adjust < 0:  # a number smaller than what it measures is never too small
        return [f"{target} += {-adjust}"]
    ctx.imports.use(ERRORS, "LengthTooSmallError")
    return [f"if {target} < {adjust}:",
            *indent(raise_lines("LengthTooSmallError", f"{name}: {{{target}}} is less than "
                                f"the {adjust} bytes it counts besides what it measures")),
            f"{target} -= {adjust}"]


def adjusted_size(dec: Decoder, op: SizeOf | SizeRest | ReadVarint, target: str) -> list[str]:
    """Read size ``op`` whose number counts more than it measures (``adjust`` bytes more) into
    ``target``, as the size it measures; a size of the rest then ends the region."""
    f = op.field
    if isinstance(op, ReadVarint):
        lines = (bounded_read(dec.ctx, dec.where(f), target, op.max_bytes)
                 if op.max_bytes is not None else dec.int_read(f, target, "varint"))
    else:
        lines = dec.int_read(f, target, op.int_type)
    lines += unadjust(dec.ctx, f"{dec.s.name}.{f.name}", target, op.adjust)
    if isinstance(op, SizeRest):
        lines += dec.sets_end(f, target, op.int_type.signed and op.adjust < 0)
    elif isinstance(op, ReadVarint) and op.sets_end:
        lines += dec.sets_end(f, target, False)
    return lines


def plus(expr: str, n: int) -> str:
    """``expr + n`` as source, folding a constant at its end (``len(out) - p - 4`` plus 4 is
    ``len(out) - p``)."""
    if n == 0:
        return expr
    head, sep, last = expr.rpartition(" - ")
    if sep and last.isdigit():
        n -= int(last)
        expr = head
    if n == 0:
        return expr
    return f"{expr} + {n}" if n > 0 else f"{expr} - {-n}"


def lenenc_read(ctx: EmitContext, where: str, target: str, nullable: bool = False) -> list[str]:
    """Read a MySQL length-encoded integer at ``pos`` into ``target``; ``nullable``: NULL
    (0xfb) reads as None, else it raises ``UnexpectedNullError``."""
    reader = "read_lenenc_or_null" if nullable else "read_lenenc"
    ctx.imports.use(VARLEN, reader)
    ctx.imports.use(PROTOWIRE, "truncated")
    return ["try:",
            f"    {target}, pos = {reader}(buf, pos, end)",
            "except IndexError:",
            f"    raise truncated({where}) from None"]


def lenenc_write(ctx: EmitContext, buf: str, value: str) -> str:
    """The statement appending ``value`` to ``buf`` as a length-encoded integer (``None``:
    NULL, written as its byte)."""
    if value == "None":
        return f'{buf} += b"\\xfb"'
    ctx.imports.use(VARLEN, "lenenc_bytes")
    return f"{buf} += lenenc_bytes({value})"
