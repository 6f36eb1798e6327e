"""The code of variable-length integers beyond protobuf's varint, for the frame codecs: a
varint bounded by ``max_bytes:`` (read, written, and probed as a frame length).

The runtime side is ``runtime/codec/varlen.py``; both codec emitters call these helpers so a
bounded varint reads the same wherever it is.
"""

from __future__ import annotations

from protoframe.generator.frame_emit import EmitContext
from protoframe.generator.runtime_modules import PROTOWIRE, VARLEN


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
