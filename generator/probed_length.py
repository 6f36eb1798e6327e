"""The frame-length probe of a frame whose header sizes its last field through conditional
fields (``frame_checks.probed_length_field``): WebSocket's 7-bit length, extended to 16 or 64
bits by the value it holds, and a masking key there only when the MASK bit is set.

The header is read by the decoder's own code for those fields (so reserved bits, unknown
enum values and constants fail before the body is buffered); running out of bytes means the
header is not in yet, and the frame ends ``size`` bytes after it.
"""

from __future__ import annotations

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
    ctx.imports.use(ERRORS, "TruncatedError")
    ctx.imports.use(ERRORS, "FrameTooLargeError")
    return [
        "start = pos",
        "try:",
        *indent(decoder.out),
        "except TruncatedError:",
        "    return None  # the header is not in yet",
        f"size: int = pos - start + {decoder.name(size.name)}",
        "if size > limit:",
        "    raise FrameTooLargeError(f\"frame of {size} bytes is over the "
        "{limit}-byte limit\")",
        "return size",
    ]
