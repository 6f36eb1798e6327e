"""The builder's rules for masked bytes, ``mask: <field>`` on a bytes field: its bytes are
XOR-ed on the wire with the bytes of an earlier field, repeated (RFC 6455 5.3: a WebSocket
client's payload and its 32-bit masking key).

The key is a stored unsigned integer (its bytes in its own byte order: a ``u32`` key
``0x37FA213D`` masks with ``37 fa 21 3d``) or bytes of a fixed ``length:``; a key that may be
None (``when: masked``) leaves the bytes as they are when it is. The masked field is bounded
by a ``size:`` (a field or ``rest``); a prefix, a fixed length, a terminator, a constant,
compression or NULL would be read from masked bytes, so they are refused.
"""

from __future__ import annotations

from collections.abc import Callable

from protoframe.generator.build_context import PathT
from protoframe.generator.frame_ir import BytesField, FrameField, IntField, StructDef
from protoframe.generator.spec_yaml import LocDict

Report = Callable[[str, PathT], None]


def read_mask(f: FrameField, item: LocDict, path: PathT, report: Report) -> None:
    """``mask: <field>`` on a bytes field."""
    if "mask" not in item:
        return
    if not isinstance(f, BytesField):
        report(f"mask: needs a bytes field, not {f.kind}", [*path, "mask"])
        return
    f.mask = item["mask"]
    clash = [k for k in ("prefix", "length", "terminator", "const", "compression", "nullable")
             if k in item]
    if clash:
        report(f"mask: cannot be combined with {', '.join(clash)} (they would be read from "
               "masked bytes); bound a masked field with size:", [*path, "mask"])
    elif "size" not in item:
        report("mask: needs a size: (a field before it or rest) to bound the masked bytes",
               [*path, "mask"])


def check_mask(struct: StructDef, f: FrameField, earlier: list[str], path: PathT,
               report: Report) -> None:
    """The key of a masked field: a stored unsigned integer or fixed-length bytes before it."""
    if not isinstance(f, BytesField) or f.mask is None:
        return
    at = [*path, "mask"]
    key = struct.field(f.mask)
    if key is None or f.mask not in earlier:
        report(f"mask: {f.mask!r} does not name a field before {f.name!r} (the key must be "
               "read before the bytes it unmasks)", at)
        return
    if key.computed or not key.wire:
        report(f"mask: {f.mask!r} is not stored (it is computed or derived); a masking key "
               "is a field of the value", at)
        return
    if isinstance(key, IntField) and not key.signed and not key.bits:
        f.mask_key = key
    elif isinstance(key, BytesField) and key.length is not None and key.length > 0 \
            and key.mask is None:
        f.mask_key = key
    else:
        report(f"mask: {f.mask!r} is not an unsigned integer (u8 ... u64) or bytes with a "
               "length:", at)
