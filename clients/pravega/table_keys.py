"""What a table segment holds, shared by the client and the embedded store: an entry (key,
value, version) and the two version values with a meaning of their own."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["NOT_EXISTS", "NO_VERSION", "TableEntry"]

NO_VERSION = -(1 << 63)  # Long.MIN_VALUE: an update or removal with no condition
NOT_EXISTS = -1  # "only if the key is absent"; and the version a missing key is read with


@dataclass(frozen=True, slots=True)
class TableEntry:
    """A key, its value and its version (the table segment offset it was last written at)."""

    key: bytes
    value: bytes
    version: int
