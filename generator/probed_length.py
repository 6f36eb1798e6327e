"""The frame-length probe of a frame whose header sizes its last field through conditional
fields (``frame_checks.probed_length_field``): WebSocket's 7-bit length, extended to 16 or 64
bits by the value it holds, and a masking key there only when the MASK bit is set.

The header is read by the decoder's own code for those fields (so reserved bits, unknown
enum values and constants fail before the body is buffered); running out of bytes means the
header is not in yet, and the frame ends ``size`` bytes after it.
"""

from __future__ import annotations

import re

from protoframe.generator.frame_emit import EmitContext, indent
from protoframe.generator.layout_plan import LayoutPlan
from protoframe.generator.runtime_modules import ERRORS


def probed_length_lines(ctx: EmitContext, plan: LayoutPlan) -> list[str]:
    """Body of ``frame_length(buf, pos, end, limit)`` for a probed frame length."""
    from protoframe.generator.frame_decoder import Decoder  # the decoder imports this module

    decoder = Decoder(ctx, plan)
    *head, last = plan.field_ops
    for op in head:
        decoder.field(op)
    size = last.field.size_field
    assert size is not None
    lines = _unkept(decoder.out, decoder.name(size.name))
    ctx.imports.use(ERRORS, "TruncatedError")
    ctx.imports.use(ERRORS, "FrameTooLargeError")
    return [
        "start = pos",
        "try:",
        *indent(lines),
        "except TruncatedError:",
        "    return None  # the header is not in yet",
        f"size: int = pos - start + {decoder.name(size.name)}",
        "if size > limit:",
        "    raise FrameTooLargeError(f\"frame of {size} bytes is over the "
        "{limit}-byte limit\")",
        "return size",
    ]


def _unkept(lines: list[str], size: str) -> list[str]:
    """``lines`` with the header's values that nothing after them reads assigned to ``_``
    (the probe reads them for their checks, and keeps only the size)."""
    assigned = {m.group(1) for line in lines
                if (m := re.match(r"\s*(f_\w+) = ", line)) is not None}
    unread = {name for name in assigned - {size}
              if not any(re.search(rf"\b{name}\b", line) and not re.match(
                  rf"\s*{name} = ", line) for line in lines)}
    return [re.sub(r"^(\s*)(f_\w+) = ", lambda m: m.group(1) + (
        "_" if m.group(2) in unread else m.group(2)) + " = ", line) for line in lines]
