"""Checksums frame layouts can declare, computed without copying the covered bytes."""

from __future__ import annotations

import zlib
from collections.abc import Callable

import crc32c as _crc32c

from runtime.protowire import BytesLike

# The library functions themselves, not wrappers: these run once per message on the hot path.
crc32c: Callable[[BytesLike], int] = _crc32c.crc32c
"""CRC-32C (Castagnoli), hardware-accelerated where the CPU has it."""

crc32: Callable[[BytesLike], int] = zlib.crc32
"""CRC-32 (IEEE 802.3), as zlib computes it."""

