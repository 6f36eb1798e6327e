"""Both codecs' code of masked bytes (``MaskedBytes``, ``mask: <field>``): decoding XORs the
bytes read with the key's, encoding the value's bytes before they are written
(``runtime.codec.masking.xor_mask``, one ``bytes.translate`` per key byte, in C)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from protoframe.generator.codewriter import q
from protoframe.generator.layout_ops import MaskedBytes
from protoframe.generator.runtime_modules import MASKING

if TYPE_CHECKING:
    from protoframe.generator.frame_decoder import Decoder
    from protoframe.generator.frame_encoder import Encoder


def _key_bytes(op: MaskedBytes, key: str) -> str:
    """The expression of the key's bytes: an integer's in its byte order, or the bytes."""
    if op.key_int is None:
        return key
    return f"{key}.to_bytes({op.key_int.width}, {q(op.key_int.order)})"


def _masked(op: MaskedBytes, data: str, key: str) -> str:
    masked = f"xor_mask({data}, {_key_bytes(op, key)})"
    return f"{data} if {key} is None else {masked}" if op.key_optional else masked


def mask_decode(dec: Decoder, op: MaskedBytes, target: str) -> list[str]:
    """Read the masked bytes of ``op``'s field, unmasked, into ``target``."""
    dec.ctx.imports.use(MASKING, "xor_mask")
    lines, vend = dec.region_end(op.field, op.region)
    return [*lines, f"{target} = {_masked(op, f'buf[pos:{vend}]', dec.name(op.key))}",
            f"pos = {vend}"]


def mask_encode(enc: Encoder, op: MaskedBytes) -> list[str]:
    """Write the value's bytes masked (those encoded ahead of their size, if they were)."""
    enc.ctx.imports.use(MASKING, "xor_mask")
    data = f"b_{op.name}" if op.region.size_written_first else f"self.{op.name}"
    return [f"{enc.buf} += {_masked(op, data, f'self.{op.key}')}"]
