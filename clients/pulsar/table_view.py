"""``TableView``: the latest value of every key of a topic, as the Java client's TableView.

A reader reads the topic from its earliest message; each message with a key sets that key's
value, and one with an empty payload removes the key (what a compacted topic's tombstones do).
Messages without a key are skipped. ``start`` returns once everything the topic held when it
was called is in the view; after that, a background task applies new messages as they arrive
and calls the listeners. ``refresh`` waits until the view has caught up with the topic's
current end.

The values are decoded by the function given to ``start`` (``bytes`` keeps them raw): the seam
where a schema's decoder goes, which makes a ``TableView[T]`` of typed values.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Generic, TypeVar

from protoframe.clients.pulsar import errors
from protoframe.clients.pulsar.message import Message, MessageId
from protoframe.clients.pulsar.reader import Reader

__all__ = ["TableView"]

log = logging.getLogger(__name__)

T = TypeVar("T")

Listener = Callable[[str, T], object]


class TableView(Mapping[str, T], Generic[T]):
    """Read-only mapping of key -> latest value (``PulsarClient.create_table_view``).

    Also has the Java client's names: ``get``, ``size``, ``is_empty``, ``contains_key``,
    ``key_set``, ``values``, ``entry_set``, ``for_each``, ``listen``, ``for_each_and_listen``.
    A listener is called as ``listener(key, value)`` for every update, with the decoded
    value (a removal is not reported, as in the Java client).
    """

    def __init__(self, reader: Reader, decode: Callable[[bytes], T]) -> None:
        self._reader = reader
        self._decode = decode
        self._data: dict[str, T] = {}
        self._listeners: list[Listener[T]] = []
        # The last message applied, per partition: what ``refresh`` compares with the end.
        self._applied: dict[int, MessageId] = {}
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self._error: BaseException | None = None

    @classmethod
    async def start(cls, reader: Reader, decode: Callable[[bytes], T]) -> TableView[T]:
        """A view fed by ``reader`` (positioned at the earliest message), filled with what the
        topic holds now."""
        view = cls(reader, decode)
        view._task = asyncio.ensure_future(view._follow())
        try:
            await view.refresh()
        except BaseException:
            await view.close()
            raise
        return view

    async def _follow(self) -> None:
        try:
            async for msg in self._reader:
                self._apply(msg)
                async with self._changed:
                    self._changed.notify_all()
        except BaseException as exc:
            self._error = exc
            async with self._changed:
                self._changed.notify_all()
            if not isinstance(exc, errors.AlreadyClosed | asyncio.CancelledError):
                log.warning("table view of %s stopped: %s", self._reader.topic(), exc)
            raise

    def _apply(self, msg: Message) -> None:
        mid = msg.message_id()
        self._applied[mid.partition()] = mid
        if not msg.has_partition_key():
            log.debug("table view of %s: message %s has no key; skipped",
                      self._reader.topic(), mid)
            return
        key = msg.partition_key()
        data = msg.data()
        if not data:
            self._data.pop(key, None)
            return
        value = self._decode(data)
        self._data[key] = value
        for listener in list(self._listeners):
            try:
                listener(key, value)
            except Exception:
                log.exception("table view listener failed on key %r", key)

    async def refresh(self) -> None:
        """Until every message the topic holds now is in the view."""
        ends = await self._reader.consumer().get_last_message_ids()

        def caught_up() -> bool:
            if self._error is not None:
                return True
            for end in ends:
                if end.entry_id() < 0:
                    continue
                applied = self._applied.get(end.partition())
                if applied is None or (applied.ledger_id(), applied.entry_id(),
                                       applied.batch_index()) < (
                        end.ledger_id(), end.entry_id(), end.batch_index()):
                    return False
            return True

        async with self._changed:
            await self._changed.wait_for(caught_up)
        if self._error is not None and not isinstance(self._error, asyncio.CancelledError):
            raise self._error

    # ---- the mapping ------------------------------------------------------------------------

    def __getitem__(self, key: str) -> T:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(dict(self._data))

    def __len__(self) -> int:
        return len(self._data)

    def size(self) -> int:
        return len(self._data)

    def is_empty(self) -> bool:
        return not self._data

    def contains_key(self, key: str) -> bool:
        return key in self._data

    def key_set(self) -> set[str]:
        return set(self._data)

    def entry_set(self) -> list[tuple[str, T]]:
        """The (key, value) pairs (a list: values need not be hashable)."""
        return list(self._data.items())

    def for_each(self, action: Listener[T]) -> None:
        """Call ``action(key, value)`` for every key now in the view."""
        for key, value in list(self._data.items()):
            action(key, value)

    def listen(self, action: Listener[T]) -> None:
        """Call ``action(key, value)`` for every later update."""
        self._listeners.append(action)

    def for_each_and_listen(self, action: Listener[T]) -> None:
        """``for_each`` then ``listen``: every key now, then every update."""
        self.for_each(action)
        self.listen(action)

    # ---- closing ----------------------------------------------------------------------------

    async def close(self) -> None:
        """Stop following the topic and close its reader."""
        await self._reader.close()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def __aenter__(self) -> TableView[T]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<TableView {self._reader.topic()}: {len(self._data)} keys>"
