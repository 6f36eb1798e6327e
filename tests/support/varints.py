"""Base-128 varints written independently of the codecs under test, and the integer values at
the edges the decoders treat apart."""

from __future__ import annotations

__all__ = ["EDGES", "varint"]

# One byte (read in place), the first two-byte value, the 32-bit boundaries, the largest that
# fits a signed 64-bit int (made as one), past it, and as wide as a varint goes.
EDGES = (0, 1, 0x7F, 0x80, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1)


def varint(value: int) -> bytes:
    """``value`` as a varint; a negative one as its 64-bit two's complement (ten bytes), as
    protobuf writes an int32 or int64 below zero."""
    value &= 2**64 - 1
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
