"""Three-byte integers (``u24``/``i24``) with the interface of a ``struct.Struct``.

The ``struct`` module has no 3-byte format, so generated frames modules bind ``_U24LE`` and
friends to an :class:`Int24` instead of a ``Struct``: the emitted code reads and writes it with
the same ``unpack_from``, ``pack`` and ``pack_into`` calls, and a value out of range raises
``struct.error`` as a ``Struct`` would (the generated ``encode`` turns that into
``ValueOutOfRangeError``). MySQL's packet length is a little-endian ``u24``.
"""

from __future__ import annotations

from operator import index
from struct import error as struct_error
from typing import Literal


class Int24:
    """A 3-byte integer codec: ``Int24("<", signed=False)`` is a little-endian ``u24``."""

    __slots__ = ("_order", "_signed", "format")

    size = 3

    def __init__(self, order: Literal["<", ">"], *, signed: bool) -> None:
        self._order: Literal["little", "big"] = "little" if order == "<" else "big"
        self._signed = signed
        self.format = f"{order}{'i' if signed else 'u'}24"

    def unpack_from(self, buffer: bytes | bytearray | memoryview, offset: int = 0
                    ) -> tuple[int]:
        """The integer at ``offset``, as a 1-tuple (``struct.error`` when 3 bytes are not there)."""
        if offset < 0 or len(buffer) - offset < 3:
            raise struct_error(f"unpack_from requires a buffer of at least {offset + 3} bytes")
        return (int.from_bytes(buffer[offset:offset + 3], self._order, signed=self._signed),)

    def pack(self, value: int) -> bytes:
        """The 3 bytes of ``value`` (``struct.error`` when it does not fit)."""
        try:
            return index(value).to_bytes(3, self._order, signed=self._signed)
        except TypeError:
            raise struct_error("required argument is not an integer") from None
        except OverflowError:
            low, high = (-(1 << 23), (1 << 23) - 1) if self._signed else (0, (1 << 24) - 1)
            raise struct_error(f"'{self.format}' format requires {low} <= number <= {high}"
                               ) from None

    def pack_into(self, buffer: bytearray, offset: int, value: int) -> None:
        """Write ``value`` over the 3 bytes at ``offset``."""
        buffer[offset:offset + 3] = self.pack(value)

    def __repr__(self) -> str:
        order = "<" if self._order == "little" else ">"
        return f"Int24({order!r}, signed={self._signed})"
