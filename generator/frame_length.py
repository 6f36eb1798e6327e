"""The frame-length probe: the body of ``frame_length(buf, pos, end, limit)``.

The stream decoder asks it how long the frame at ``pos`` is once its header is in, so that
garbage (a bad magic, a negative or oversized length) fails before a whole frame is buffered.
"""

from __future__ import annotations

from protoframe.generator.errors import GeneratorBug
from protoframe.generator.frame_checks import frame_length_field
from protoframe.generator.frame_emit import (
    EmitContext,
    indent,
    offset_expr,
    raise_lines,
)
from protoframe.generator.frame_ir import (
    INT_TYPES,
    IntField,
    VarintField,
)
from protoframe.generator.layout_ops import Const, ReadVarint, SizeOf, SizeRest, kind_op
from protoframe.generator.layout_plan import LayoutPlan
from protoframe.generator.probed_length import probed_length_lines
from protoframe.generator.runtime_modules import ERRORS, VARLEN
from protoframe.generator.varlen_emit import plus


def magic_checks(ctx: EmitContext, plan: LayoutPlan, upto: int) -> list[str]:
    """Checks of the constants in the first ``upto`` header bytes, so garbage fails fast."""
    lines: list[str] = []
    offset = 0
    for op in plan.field_ops:
        size = op.field.fixed_size
        if offset >= upto or size is None:
            break
        if isinstance(op, Const):
            t = op.int_type
            packer = ctx.packer(t.width, t.signed, t.order)
            ctx.imports.use(ERRORS, "BadMagicError")
            lines += [f"magic = {packer}.unpack_from(buf, {offset_expr('pos', offset)})[0]",
                      f"if magic != {op.value:#x}:", *indent(raise_lines(
                          "BadMagicError", f"{plan.name}.{op.name}: expected {op.value:#x}, "
                          "got {magic:#x}"))]
        offset += size
    return lines


def length_lines(ctx: EmitContext, plan: LayoutPlan) -> list[str]:
    """Body of ``frame_length(buf, pos, end, limit)``: the frame size once the header is in."""
    frame = plan.struct
    length = frame_length_field(frame)
    if length is None:
        raise GeneratorBug("no frame length field (frame_checks lets no such frame through)",
                           str(frame.location))
    if length.kind == "probe":
        return probed_length_lines(ctx, plan)
    f, offset = length.field, length.offset
    adjust = size_adjust(plan, f.name)
    if isinstance(f, IntField):
        between = length.between
        header = offset + f.width
        packer = ctx.packer(f.width, f.signed, f.order)
        ctx.imports.use(ERRORS, "FrameTooLargeError")
        ctx.imports.use(ERRORS, "SizeMismatchError")
        # An unsigned length cannot make the size smaller than the header.
        negative = [f"if size < {header + between}:",
                    "    raise SizeMismatchError(f\"negative frame length {size}\")"]
        number = f"{packer}.unpack_from(buf, {offset_expr('pos', offset)})[0]"
        if adjust > 0:
            ctx.imports.use(ERRORS, "LengthTooSmallError")
            raw = plus("size", adjust - header - between)
            negative = [f"if size < {header + between}:", *indent(raise_lines(
                "LengthTooSmallError", f"frame length {{{raw}}} is less than the {adjust} "
                "bytes it counts besides the rest"))]
        return [
            f"if end - pos < {header}:",
            "    return None",
            *magic_checks(ctx, plan, header),
            f"size: int = {_added(header + between - adjust, number)}",
            *(negative if f.signed or adjust > 0 else []),
            "if size > limit:",
            "    raise FrameTooLargeError(f\"frame of {size} bytes is over the "
            "{limit}-byte limit\")",
            "return size",
        ]
    if isinstance(f, VarintField):
        return varint_length_lines(ctx, plan, offset, length.between, f.max_bytes, adjust)
    cw, cs = INT_TYPES[f.block_count]
    lw, ls = INT_TYPES[f.block_length]
    cp = ctx.packer(cw, cs, ctx.spec.byte_order)
    lp = ctx.packer(lw, ls, ctx.spec.byte_order)
    ctx.imports.use(ERRORS, "FrameTooLargeError")
    most = f"min({f.max_blocks}, limit // {lw})" if f.max_blocks else f"limit // {lw}"
    return [
        f"p = {offset_expr('pos', offset)}",
        f"if end - p < {cw}:",
        "    return None",
        *magic_checks(ctx, plan, offset),
        f"count: int = {cp}.unpack_from(buf, p)[0]",
        f"p += {cw}",
        f"if count > {most}:",
        "    raise FrameTooLargeError(f\"{count} blocks: over the limit\")",
        "for _ in range(count):",
        f"    if end - p < {lw}:",
        "        return None",
        f"    n: int = {lp}.unpack_from(buf, p)[0]",
        f"    if n > {f.block_size}:",
        f"        raise FrameTooLargeError(f\"block of {{n}} bytes: blocks hold up to "
        f"{f.block_size}\")",
        f"    p += {lw} + n",
        "    if p - pos > limit:",
        "        raise FrameTooLargeError(f\"frame over the {limit}-byte limit\")",
        "if p > end:",
        "    return None",
        "return p - pos",
    ]


def _added(base: int, number: str) -> str:
    """``base + number``, written as the shortest sum (``4 + x``, ``x``, ``x - 2``)."""
    if base > 0:
        return f"{base} + {number}"
    return plus(number, base)


def size_adjust(plan: LayoutPlan, name: str) -> int:
    """What frame length ``name`` counts besides the bytes after it (``includes:``,
    ``adjust:``)."""
    op = kind_op(plan.op(name))
    return op.adjust if isinstance(op, SizeOf | SizeRest | ReadVarint) else 0


def varint_length_lines(ctx: EmitContext, plan: LayoutPlan, offset: int, between: int,
                        max_bytes: int | None, adjust: int = 0) -> list[str]:
    """``frame_length`` of a frame whose length is a varint at ``offset``: None while the
    varint is incomplete, ``MalformedVarintError`` when it is longer than it may be (10 bytes,
    or ``max_bytes``), ``FrameTooLargeError`` before a byte of an oversize body is kept."""
    ctx.imports.use(VARLEN, "peek_varint")
    ctx.imports.use(ERRORS, "FrameTooLargeError")
    if adjust > 0:
        ctx.imports.use(ERRORS, "LengthTooSmallError")
    most = f", {max_bytes}" if max_bytes is not None else ""
    return [
        f"if end - pos <= {offset}:",
        "    return None",
        *magic_checks(ctx, plan, offset),
        f"read = peek_varint(buf, {offset_expr('pos', offset)}, end{most})",
        "if read is None:",
        "    return None",
        f"size: int = {plus('read[1] - pos', between - adjust)} + read[0]",
        *([f"if size < {plus('read[1] - pos', between)}:", *indent(raise_lines(
            "LengthTooSmallError", f"frame length {{read[0]}} is less than the {adjust} bytes "
            "it counts besides the rest"))] if adjust > 0 else []),
        "if size > limit:",
        "    raise FrameTooLargeError(f\"frame of {size} bytes is over the "
        "{limit}-byte limit\")",
        "return size",
    ]
