"""Checksums frame layouts can declare, computed without copying the covered bytes."""

from __future__ import annotations

import zlib
from typing import Protocol

import crc32c as _crc32c

from protoframe.runtime.codec.protowire import BytesLike


class Checksum(Protocol):
    """A checksum function; ``value`` continues a sum over earlier bytes, so pieces need no join."""

    def __call__(self, data: BytesLike, value: int = 0, /) -> int: ...


# The library functions themselves, not wrappers: these run once per message on the hot path.
crc32c: Checksum = _crc32c.crc32c
"""CRC-32C (Castagnoli), hardware-accelerated where the CPU has it."""

crc32: Checksum = zlib.crc32
"""CRC-32 (IEEE 802.3), as zlib computes it."""

