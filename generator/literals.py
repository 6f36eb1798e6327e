"""Integers a spec may write as a character literal: ``'D'`` for 0x44.

Protocols that name their messages by a letter (PostgreSQL's ``'D'``, ``'Q'``) read better with
the letter than with its code, so wherever the language expects an integer that a protocol's
documentation gives as a character (switch case and ``names:`` keys, route ``values:`` keys,
``set:`` values of integer fields, expressions), a literal stands for one byte: a printable
ASCII character, or an escape (``'\\n'``, ``'\\0'``, ``'\\''``, ``'\\\\'``, ``'\\x1b'``). Anything
else is an error saying why, never a guess: ``'é'`` would be two bytes in UTF-8.
"""

from __future__ import annotations

_ESCAPES = {"\\": 0x5C, "'": 0x27, '"': 0x22, "0": 0x00, "a": 0x07, "b": 0x08, "f": 0x0C,
            "n": 0x0A, "r": 0x0D, "t": 0x09, "v": 0x0B}
_HEX = frozenset("0123456789abcdefABCDEF")


class LiteralError(ValueError):
    """A value that is not an integer of the spec language; the message says why."""


def is_char_literal(text: str) -> bool:
    """Whether ``text`` is written as a character literal (valid or not): quoted in ``'``."""
    return len(text) >= 2 and text[0] == "'" and text[-1] == "'"


def char_code(text: str) -> int:
    """The byte a character literal stands for; ``LiteralError`` when it is not one byte."""
    inner = text[1:-1]
    if not inner:
        raise LiteralError(f"empty character literal {text}: it must hold one character")
    if inner[0] == "\\":
        if len(inner) == 2 and inner[1] in _ESCAPES:
            return _ESCAPES[inner[1]]
        if inner[1:2] == "x" and len(inner) == 4 and set(inner[2:]) <= _HEX:
            return int(inner[2:], 16)
        if len(inner) > 1 and (inner[1] in _ESCAPES or inner[1:2] == "x" and len(inner) > 4):
            raise LiteralError(f"character literal {text} holds more than one byte")
        raise LiteralError(f"character literal {text} has an unknown escape: use \\\\, \\', "
                           "\\0, \\a, \\b, \\f, \\n, \\r, \\t, \\v or \\xNN")
    if len(inner) > 1:
        raise LiteralError(f"character literal {text} holds {len(inner)} characters; it "
                           "stands for one byte")
    code = ord(inner)
    if code > 0x7E:
        raise LiteralError(f"character literal {text} is not ASCII: write its byte escaped "
                           "('\\xNN')")
    if code < 0x20:
        raise LiteralError(f"character literal {text!r} holds a control character: write it "
                           f"escaped ('\\x{code:02x}')")
    if inner == "'":
        raise LiteralError(f"character literal {text} must escape its quote: '\\''")
    return code


def integer(value: object) -> int:
    """An integer as the spec writes one: a number, a string ``int(x, 0)`` reads (``"0x0d"``)
    or a character literal (``"'D'"``); ``LiteralError`` otherwise."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    text = str(value).strip()
    if is_char_literal(text):
        return char_code(text)
    try:
        return int(text, 0)
    except ValueError:
        raise LiteralError(f"{value!r} is not an integer") from None


def byte_string(value: object) -> bytes:
    """Bytes as the spec writes them (a terminator, a constant's bytes): one byte as an
    integer (0 to 255) or a character literal (``"'\\0'"``), bytes in hex (``"0x0d0a"``, two
    digits a byte), or a double-quoted string with the character literals' escapes
    (``'"\\r\\n"'``, ``'"AMQP"'``); ``LiteralError`` otherwise."""
    if isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value <= 0xFF:
            raise LiteralError(f"{value} is not one byte (0 to 255)")
        return bytes([value])
    text = str(value)
    if is_char_literal(text):
        return bytes([char_code(text)])
    if text[:2].lower() == "0x":
        digits = text[2:]
        if not digits or len(digits) % 2 or not set(digits) <= _HEX:
            raise LiteralError(f"{text!r} is not bytes in hex: write two hex digits a byte "
                               "('0x00', '0x0d0a')")
        return bytes.fromhex(digits)
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        return _quoted(text)
    raise LiteralError(f"{value!r} is not bytes: write an integer, a character literal "
                       "(\"'\\0'\"), hex (\"0x0d0a\") or a quoted string ('\"\\r\\n\"')")


def _quoted(text: str) -> bytes:
    """The bytes of a double-quoted string: ASCII characters and escapes, as in character
    literals (``\\"`` for a quote)."""
    inner, out, i = text[1:-1], bytearray(), 0
    if not inner:
        raise LiteralError(f"{text} is empty: it must hold at least one byte")
    while i < len(inner):
        if inner[i] == "\\":
            step = 4 if inner[i + 1 : i + 2] == "x" else 2
            piece = inner[i : i + step]
        else:
            step, piece = 1, inner[i]
            if piece == '"':
                raise LiteralError(f"{text} must escape its quotes: \\\"")
        if piece == "'":
            out.append(0x27)
        else:
            try:
                out.append(char_code(f"'{piece}'"))
            except LiteralError as exc:
                raise LiteralError(f"{text}: {exc}") from None
        i += step
    return bytes(out)
