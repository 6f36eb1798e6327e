"""Checksums frame layouts can declare, computed without copying the covered bytes."""

from __future__ import annotations

import zlib
from collections.abc import Callable

import crc32c as _crc32c

from runtime.protowire import BytesLike


def crc32c(data: BytesLike) -> int:
    """CRC-32C (Castagnoli), hardware-accelerated where the CPU has it."""
    return int(_crc32c.crc32c(data))


def crc32(data: BytesLike) -> int:
    """CRC-32 (IEEE 802.3), as zlib computes it."""
    return zlib.crc32(data)


ALGORITHMS: dict[str, Callable[[BytesLike], int]] = {"crc32c": crc32c, "crc32": crc32}
