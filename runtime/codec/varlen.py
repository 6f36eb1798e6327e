"""Variable-length integers beyond protobuf's varint, for generated frame codecs.

- *Bounded base-128* (``type: varint, max_bytes: N``): the protobuf layout (7 bits a byte,
  little-endian groups, the top bit says another byte follows) limited to ``N`` bytes, as
  MQTT's remaining length is (1 to 4 bytes, values below 2**28): a continuation bit on the
  ``N``-th byte is malformed.
- *MySQL length-encoded integers* (``encoding: lenenc``, ``prefix: lenenc``): a value below
  0xfb in one byte, else 0xfc and a little-endian u16, 0xfd and a u24, or 0xfe and a u64;
  0xfb stands for NULL and 0xff begins no integer.

The readers take ``(buf, pos, end)`` and return ``(value, next position)``; they raise
``IndexError`` when the integer runs past ``end`` (generated decoders turn that into
``TruncatedError``, as for ``read_varint``), and the ``peek_*`` forms used by the frame
length probe return None instead, so a stream decoder waits for more bytes.
"""

from __future__ import annotations

from protoframe.runtime.errors import (
    MalformedLengthEncodedError,
    MalformedVarintError,
    UnexpectedNullError,
    ValueOutOfRangeError,
)

# The byte that stands for NULL where a length-encoded integer is expected.
LENENC_NULL = 0xFB
_LENENC_WIDTHS = {0xFC: 2, 0xFD: 3, 0xFE: 8}


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


def peek_lenenc(buf: bytes, pos: int, end: int) -> tuple[int | None, int] | None:
    """The length-encoded integer at ``pos`` (None for NULL) and the position after it, or
    None while it is incomplete before ``end``."""
    if pos >= end:
        return None
    first = buf[pos]
    if first < LENENC_NULL:
        return first, pos + 1
    if first == LENENC_NULL:
        return None, pos + 1
    width = _LENENC_WIDTHS.get(first)
    if width is None:
        raise MalformedLengthEncodedError(
            f"0x{first:02x} at offset {pos} begins no length-encoded integer")
    if end - pos - 1 < width:
        return None
    return int.from_bytes(buf[pos + 1:pos + 1 + width], "little"), pos + 1 + width


def read_lenenc_or_null(buf: bytes, pos: int, end: int) -> tuple[int | None, int]:
    """The length-encoded integer at ``pos``, None for NULL (``IndexError`` past ``end``)."""
    read = peek_lenenc(buf, pos, end)
    if read is None:
        raise IndexError(pos)
    return read


def read_lenenc(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """The length-encoded integer at ``pos``, where NULL is not allowed
    (``UnexpectedNullError``)."""
    value, pos = read_lenenc_or_null(buf, pos, end)
    if value is None:
        raise UnexpectedNullError(f"NULL (0xfb) at offset {pos - 1} where a length-encoded "
                                  "integer is required")
    return value, pos


def lenenc_bytes(value: int | None) -> bytes:
    """``value`` as a length-encoded integer in its shortest form, None as NULL (0xfb)."""
    if value is None:
        return b"\xfb"
    if value < 0 or value >> 64:
        raise ValueOutOfRangeError(f"{value} is not a length-encoded integer (0 to 2**64 - 1)")
    if value < LENENC_NULL:
        return bytes((value,))
    if value < 0x10000:
        return b"\xfc" + value.to_bytes(2, "little")
    if value < 0x1000000:
        return b"\xfd" + value.to_bytes(3, "little")
    return b"\xfe" + value.to_bytes(8, "little")
