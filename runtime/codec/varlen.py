"""Variable-length integers beyond protobuf's varint, for generated frame codecs.

- *Bounded base-128* (``type: varint, max_bytes: N``): the protobuf layout (7 bits a byte,
  little-endian groups, the top bit says another byte follows) limited to ``N`` bytes, as
  MQTT's remaining length is (1 to 4 bytes, values below 2**28): a continuation bit on the
  ``N``-th byte is malformed.

The readers take ``(buf, pos, end)`` and return ``(value, next position)``; they raise
``IndexError`` when the integer runs past ``end`` (generated decoders turn that into
``TruncatedError``, as for ``read_varint``), and the ``peek_*`` forms used by the frame
length probe return None instead, so a stream decoder waits for more bytes.
"""

from __future__ import annotations

from protoframe.runtime.errors import MalformedVarintError, ValueOutOfRangeError


def peek_varint(buf: bytes, pos: int, end: int, max_bytes: int = 10) -> tuple[int, int] | None:
    """The base-128 varint at ``pos`` and the position after it, None while it is incomplete
    before ``end``; ``MalformedVarintError`` when it has more than ``max_bytes`` bytes."""
    value = shift = 0
    last = pos + max_bytes
    while pos < end:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        if pos >= last:
            raise MalformedVarintError(f"varint longer than {max_bytes} bytes at offset "
                                       f"{pos - max_bytes}")
        shift += 7
    return None


def read_bounded_varint(buf: bytes, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    """The varint of at most ``max_bytes`` bytes at ``pos`` (``IndexError`` past ``end``)."""
    read = peek_varint(buf, pos, end, max_bytes)
    if read is None:
        raise IndexError(pos)
    return read


def bounded_varint_bytes(value: int, max_bytes: int) -> bytes:
    """``value`` as a varint of at most ``max_bytes`` bytes (``ValueOutOfRangeError`` if it
    needs more, or is negative)."""
    if value < 0 or value >> (7 * max_bytes):
        raise ValueOutOfRangeError(f"{value} does not fit a varint of at most {max_bytes} "
                                   f"bytes (0 to {(1 << 7 * max_bytes) - 1})")
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
