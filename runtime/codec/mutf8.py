"""Java's modified UTF-8 (``DataOutput.writeUTF``), used by Pravega's Java server for strings.

It differs from UTF-8 in two ways: NUL is written as the two bytes C0 80, and characters
outside the Basic Multilingual Plane are written as two three-byte surrogates instead of one
four-byte sequence. Python's codecs cover both: ``surrogatepass`` turns surrogate pairs into
bytes and back.
"""

from __future__ import annotations

from protoframe.runtime.errors import InvalidUtf8Error


def encode(text: str) -> bytes:
    """Encode ``text`` as modified UTF-8."""
    if text.isascii() and "\x00" not in text:
        return text.encode("ascii")
    units = text.encode("utf-16-be", "surrogatepass")
    chars = (units[i] << 8 | units[i + 1] for i in range(0, len(units), 2))
    out = bytearray()
    for c in chars:
        if 0 < c < 0x80:
            out.append(c)
        elif c < 0x800:
            out += bytes((0xC0 | c >> 6, 0x80 | c & 0x3F))
        else:
            out += bytes((0xE0 | c >> 12, 0x80 | (c >> 6) & 0x3F, 0x80 | c & 0x3F))
    return bytes(out)


def decode(data: bytes, where: str = "string") -> str:
    """Decode modified UTF-8; plain UTF-8 without 4-byte sequences decodes the same way."""
    if data.isascii():
        return data.decode("ascii")
    try:
        text = data.replace(b"\xc0\x80", b"\x00").decode("utf-8", "surrogatepass")
        # Re-join surrogate pairs that arrived as two 3-byte sequences.
        return text.encode("utf-16-be", "surrogatepass").decode("utf-16-be")
    except UnicodeError as exc:
        raise InvalidUtf8Error(f"{where}: invalid modified UTF-8 ({exc})") from None
