"""Choosing the partition of a message, the way the Java client chooses it.

A message with a key goes to ``signSafeMod(hash(key), partitions)``, where the hash is
Murmur3_32 (x86, 32 bit, seed 0, over the key's UTF-8 bytes, masked to 31 bits) as Java's
``Murmur3Hash32`` computes it, or Java's ``String.hashCode`` for the JavaStringHash scheme.
A message without a key goes round-robin. The same key therefore lands on the same partition
whichever client produced it.
"""

from __future__ import annotations

import enum
import itertools
import struct
from collections.abc import Callable

import mmh3

__all__ = [
    "HashingScheme",
    "RoundRobinRouter",
    "SinglePartitionRouter",
    "java_string_hash",
    "murmur3_32",
    "murmur3_32_hash",
    "sign_safe_mod",
]

_M32 = 0xFFFF_FFFF


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3 x86 32-bit of ``data``, as an unsigned 32-bit integer (``mmh3``'s C code)."""
    return mmh3.hash(data, seed, signed=False)


def murmur3_32_hash(key: str | bytes) -> int:
    """Java's ``Murmur3Hash32.makeHash``: murmur3_32 of the UTF-8 bytes, seed 0, & 0x7FFFFFFF."""
    data = key.encode() if isinstance(key, str) else key
    return murmur3_32(data, 0) & 0x7FFF_FFFF


def java_string_hash(key: str | bytes) -> int:
    """Java's ``JavaStringHash.makeHash``: ``String.hashCode()`` & 0x7FFFFFFF."""
    text = key.decode() if isinstance(key, bytes) else key
    h = 0
    for unit in struct.unpack(f"<{len(text.encode('utf-16-le')) // 2}H",
                              text.encode("utf-16-le")):
        h = (31 * h + unit) & _M32
    return h & 0x7FFF_FFFF


def sign_safe_mod(dividend: int, divisor: int) -> int:
    """Java's ``MathUtils.signSafeMod``: a remainder in ``[0, divisor)`` for any dividend.

    ``dividend`` is taken as a signed 32-bit Java ``int`` (Java's ``%`` truncates towards zero,
    then a negative remainder is moved up by ``divisor``).
    """
    if divisor <= 0:
        raise ValueError("divisor must be positive")
    dividend &= _M32
    if dividend >= 0x8000_0000:
        dividend -= 1 << 32
    mod = abs(dividend) % divisor
    if dividend < 0 and mod:
        mod = divisor - mod
    return mod


class HashingScheme(enum.Enum):
    """Which hash maps a key to a partition (the official client's names)."""

    Murmur3_32Hash = "murmur3_32"
    JavaStringHash = "java_string"

    def hash_function(self) -> Callable[[str | bytes], int]:
        if self is HashingScheme.JavaStringHash:
            return java_string_hash
        return murmur3_32_hash


class RoundRobinRouter:
    """Keyed messages by hash, others to partitions in turn (Java's RoundRobinPartition)."""

    def __init__(self, hashing_scheme: HashingScheme = HashingScheme.Murmur3_32Hash,
                 start: int = 0) -> None:
        self._hash = hashing_scheme.hash_function()
        self._counter = itertools.count(start)
        self._cache: dict[str | bytes, int] = {}

    def choose(self, key: str | bytes | None, partitions: int) -> int:
        if key is not None and key != "":
            h = self._cache.get(key)
            if h is None:
                h = self._hash(key)
                if len(self._cache) < 100_000:
                    self._cache[key] = h
            return sign_safe_mod(h, partitions)
        return next(self._counter) % partitions


class SinglePartitionRouter:
    """Keyed messages by hash, all others to one partition chosen at start."""

    def __init__(self, partition: int,
                 hashing_scheme: HashingScheme = HashingScheme.Murmur3_32Hash) -> None:
        self._partition = partition
        self._hash = hashing_scheme.hash_function()

    def choose(self, key: str | bytes | None, partitions: int) -> int:
        if key is not None and key != "":
            return sign_safe_mod(self._hash(key), partitions)
        return self._partition % partitions
