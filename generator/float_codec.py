"""The code of ``f32``/``f64`` fields (``ReadFloat``) for the Python codecs: an IEEE 754
single or double in the field's byte order, read and written with a module-level
``struct.Struct`` (``_F32BE``, ``_F64LE``...). Encoding an ``f32`` rounds the value to single
precision, as ``struct`` does, and raises ``ValueOutOfRangeError`` for a finite number beyond
its range.

``frame_decoder.Decoder.value`` and ``frame_encoder.Encoder.write`` match on the operation and
call the functions here. The compiled codec has a ``float`` row of its own (by the functions
``struct`` uses), which gives the number to these methods when it is not an exact float or
int, or is beyond an ``f32``'s range, so that they raise their errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protoframe.generator.layout_ops import ReadFloat
from protoframe.generator.runtime_modules import ERRORS

if TYPE_CHECKING:
    from protoframe.generator.frame_decoder import Decoder
    from protoframe.generator.frame_emit import EmitContext
    from protoframe.generator.frame_encoder import Encoder


def float_packer(ctx: EmitContext, op: ReadFloat) -> str:
    """The name of the module's ``Struct`` for ``op``'s width and byte order."""
    little = op.order == "little"
    name = f"_F{op.width * 8}{'LE' if little else 'BE'}"
    ctx.packers[name] = f'Struct("{"<" if little else ">"}{"f" if op.width == 4 else "d"}")'
    return name


def decode_float(dec: Decoder, op: ReadFloat, target: str) -> list[str]:
    """Read ``op``'s number into ``target``."""
    packer = float_packer(dec.ctx, op)
    return [*dec.need(str(op.width), op.field), f"{target} = {packer}.unpack_from(buf, pos)[0]",
            f"pos += {op.width}"]


def encode_float(enc: Encoder, op: ReadFloat, value: str) -> list[str]:
    """Append ``value`` as ``op``'s number; one it cannot hold raises ``ValueOutOfRangeError``
    (``struct`` raises ``OverflowError`` for it, which ``encode`` does not turn into one)."""
    enc.ctx.imports.use(ERRORS, "ValueOutOfRangeError")
    where = f"{enc.s.name}.{op.field.name}"
    return ["try:", f"    {enc.buf} += {float_packer(enc.ctx, op)}.pack({value})",
            "except OverflowError:",
            f'    raise ValueOutOfRangeError(f"{where}: {{{value}!r}} is beyond '
            f'f{op.width * 8}\'s range") from None']
