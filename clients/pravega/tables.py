"""A typed asyncio client of one table segment: versioned puts, gets, removals and paged scans.

```python
table = await TableSegmentClient.create(connection, "_system/_tables/meta")
version = await table.put(b"k", b"v")                      # unconditional
await table.put(b"k", b"w", version=version)               # only if still at that version
await table.put(b"new", b"1", version=NOT_EXISTS)          # only if absent
entry = await table.get(b"k")                              # TableEntry or None
async for entry in table.entries(): ...                    # every entry, page by page
```

A refused condition raises ``TableKeyBadVersion`` or ``TableKeyDoesNotExist`` and changes
nothing; a batch (``put_all``, ``remove_all``) is written all or none. After ``seal()`` the
table segment is read-only: updates and removals raise ``SegmentIsSealed``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from protoframe.generated.pravega import frames
from protoframe.runtime.errors import RequestFailed

from .connection import PravegaConnection
from .errors import reply_error
from .table_keys import NO_VERSION, NOT_EXISTS, TableEntry

__all__ = ["DEFAULT_PAGE_SIZE", "NOT_EXISTS", "NO_VERSION", "TableChanges", "TableEntry",
           "TableSegmentClient"]

DEFAULT_PAGE_SIZE = 100


@dataclass(frozen=True, slots=True)
class TableChanges:
    """One delta read: the entries changed, and where to continue from."""

    entries: list[TableEntry]
    reached_end: bool
    next_position: int
    should_clear: bool


class TableSegmentClient:
    """Requests on the table segment ``name`` over ``connection``."""

    def __init__(self, connection: PravegaConnection, name: str, *, delegation_token: str = "",
                 page_size: int = DEFAULT_PAGE_SIZE) -> None:
        self.connection = connection
        self.name = name
        self.delegation_token = delegation_token
        self.page_size = page_size

    @classmethod
    async def create(cls, connection: PravegaConnection, name: str, *, key_length: int = 0,
                     delegation_token: str = "") -> TableSegmentClient:
        """Create the table segment (``SegmentAlreadyExists`` if it exists) and return it."""
        try:
            await connection.requests.create_table_segment(name, delegation_token,
                                                           key_length=key_length)
        except RequestFailed as exc:
            raise reply_error(exc) from None
        return cls(connection, name, delegation_token=delegation_token)

    async def delete(self, *, must_be_empty: bool = False) -> None:
        """Delete the table segment; ``TableSegmentNotEmpty`` if ``must_be_empty`` and not."""
        try:
            await self.connection.requests.delete_table_segment(self.name, must_be_empty,
                                                                self.delegation_token)
        except RequestFailed as exc:
            raise reply_error(exc) from None

    async def seal(self) -> None:
        """Make the table segment read-only (SEAL_SEGMENT, as for a stream segment); sealing
        a sealed one is no error. ``NoSuchSegment`` if it does not exist."""
        try:
            await self.connection.requests.seal_segment(self.name, self.delegation_token)
        except RequestFailed as exc:
            raise reply_error(exc) from None

    async def info(self) -> frames.TableSegmentInfo:
        """Length, entry count and key length."""
        try:
            return await self.connection.requests.get_table_segment_info(
                self.name, self.delegation_token)
        except RequestFailed as exc:
            raise reply_error(exc) from None

    # ---- updates ---------------------------------------------------------------------------

    async def put(self, key: bytes, value: bytes, *, version: int | None = None) -> int:
        """Write ``key``; the new version. ``version`` makes it conditional: the key's current
        version, or ``NOT_EXISTS`` for "only if absent"."""
        return (await self.put_all([(key, value, version)]))[0]

    async def put_all(self, updates: Sequence[tuple[bytes, bytes, int | None]], *,
                      table_segment_offset: int = -1) -> list[int]:
        """Write ``(key, value, version)`` updates together, all or none; their versions."""
        entries = [frames.TableEntry(key=_key(key, version), value=frames.TableValue(data=value))
                   for key, value, version in updates]
        try:
            reply = await self.connection.requests.update_table_entries(
                self.name, self.delegation_token, entries,
                table_segment_offset=table_segment_offset)
        except RequestFailed as exc:
            raise reply_error(exc) from None
        return list(reply.updated_versions)

    async def remove(self, key: bytes, *, version: int | None = None) -> None:
        """Remove ``key`` (no error if absent, unless ``version`` makes it conditional)."""
        await self.remove_all([(key, version)])

    async def remove_all(self, keys: Sequence[tuple[bytes, int | None]], *,
                         table_segment_offset: int = -1) -> None:
        """Remove ``(key, version)`` keys together, all or none."""
        try:
            await self.connection.requests.remove_table_keys(
                self.name, self.delegation_token, [_key(k, v) for k, v in keys],
                table_segment_offset=table_segment_offset)
        except RequestFailed as exc:
            raise reply_error(exc) from None

    # ---- reads -----------------------------------------------------------------------------

    async def get(self, key: bytes) -> TableEntry | None:
        """The entry of ``key``, None if absent."""
        return (await self.get_all([key]))[0]

    async def get_all(self, keys: Sequence[bytes]) -> list[TableEntry | None]:
        """The entry of each key, in order, None for an absent one."""
        try:
            reply = await self.connection.requests.read_table(
                self.name, self.delegation_token, [_key(k, None) for k in keys])
        except RequestFailed as exc:
            raise reply_error(exc) from None
        return [None if e.key.key_version in (None, NOT_EXISTS) else _entry(e)
                for e in reply.entries]

    async def keys_page(self, continuation_token: bytes = b"", count: int | None = None
                        ) -> tuple[list[tuple[bytes, int]], bytes]:
        """One page of ``(key, version)`` after ``continuation_token``, and the next token."""
        try:
            reply = await self.connection.requests.read_table_keys(
                self.name, self.delegation_token, count or self.page_size, continuation_token)
        except RequestFailed as exc:
            raise reply_error(exc) from None
        return ([(k.data, _version(k)) for k in reply.keys], reply.continuation_token)

    async def entries_page(self, continuation_token: bytes = b"", count: int | None = None
                           ) -> tuple[list[TableEntry], bytes]:
        """One page of entries after ``continuation_token``, and the next token."""
        try:
            reply = await self.connection.requests.read_table_entries(
                self.name, self.delegation_token, count or self.page_size, continuation_token)
        except RequestFailed as exc:
            raise reply_error(exc) from None
        return [_entry(e) for e in reply.entries], reply.continuation_token

    async def keys(self) -> AsyncIterator[tuple[bytes, int]]:
        """Every ``(key, version)``, page by page until a page comes back empty."""
        token = b""
        while True:
            page, token = await self.keys_page(token)
            if not page:
                return
            for item in page:
                yield item

    async def entries(self) -> AsyncIterator[TableEntry]:
        """Every entry, page by page until a page comes back empty."""
        token = b""
        while True:
            page, token = await self.entries_page(token)
            if not page:
                return
            for entry in page:
                yield entry

    async def changes_since(self, position: int, count: int | None = None) -> TableChanges:
        """The entries written at or after ``position`` (a version or an earlier
        ``next_position``), the latest of each key."""
        try:
            reply = await self.connection.requests.read_table_entries_delta(
                self.name, self.delegation_token, position, count or self.page_size)
        except RequestFailed as exc:
            raise reply_error(exc) from None
        return TableChanges([_entry(e) for e in reply.entries], reply.reached_end,
                            reply.last_position, reply.should_clear)


def _key(data: bytes, version: int | None) -> frames.TableKey:
    if not data:
        raise ValueError("a table key cannot be empty")
    return frames.TableKey(data=data, key_version=NO_VERSION if version is None else version)


def _version(key: frames.TableKey) -> int:
    return key.key_version if key.key_version is not None else NO_VERSION


def _entry(entry: frames.TableEntry) -> TableEntry:
    return TableEntry(entry.key.data, entry.value.data, _version(entry.key))
