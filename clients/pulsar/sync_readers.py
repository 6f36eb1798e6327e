"""The synchronous client's readers and table views: ``reader.Reader`` and
``table_view.TableView`` run on the client's background event loop (see ``sync``)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterator, Mapping
from typing import Any, Generic, Protocol, TypeVar

from protoframe.clients.pulsar.message import Message, MessageId
from protoframe.clients.pulsar.reader import Reader as AsyncReader
from protoframe.clients.pulsar.schema.base import ValueT
from protoframe.clients.pulsar.table_view import Listener
from protoframe.clients.pulsar.table_view import TableView as AsyncTableView

__all__ = ["Reader", "TableView"]

T = TypeVar("T")
R = TypeVar("R")


class _LoopThread(Protocol):
    """What these need of ``sync``'s loop thread (named here: ``sync`` imports this module)."""

    def run(self, coro: Coroutine[Any, Any, R], timeout: float | None = None) -> R: ...

    def call(self, fn: Callable[[], Any]) -> None: ...


class Reader(Generic[ValueT]):
    """A reader; see ``clients.pulsar.reader.Reader``."""

    def __init__(self, runner: _LoopThread, reader: AsyncReader[ValueT]) -> None:
        self._runner = runner
        self._reader = reader

    def topic(self) -> str:
        return self._reader.topic()

    def is_connected(self) -> bool:
        return self._reader.is_connected()

    def read_next(self, timeout_millis: int | None = None) -> Message[ValueT]:
        """The next message; raises ``Timeout`` after ``timeout_millis`` without one."""
        return self._runner.run(self._reader.read_next(timeout_millis))

    def has_message_available(self) -> bool:
        return self._runner.run(self._reader.has_message_available())

    def seek(self, message_id: MessageId | int) -> None:
        self._runner.run(self._reader.seek(message_id))

    def close(self) -> None:
        self._runner.run(self._reader.close())


class TableView(Mapping[str, T], Generic[T]):
    """A table view; see ``clients.pulsar.table_view.TableView``. Reads are of the view's
    current contents; listeners run on the client's thread."""

    def __init__(self, runner: _LoopThread, view: AsyncTableView[T]) -> None:
        self._runner = runner
        self._view = view

    def __getitem__(self, key: str) -> T:
        return self._view[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._view)

    def __len__(self) -> int:
        return len(self._view)

    def size(self) -> int:
        return len(self._view)

    def is_empty(self) -> bool:
        return self._view.is_empty()

    def contains_key(self, key: str) -> bool:
        return self._view.contains_key(key)

    def key_set(self) -> set[str]:
        return self._view.key_set()

    def entry_set(self) -> list[tuple[str, T]]:
        return self._view.entry_set()

    def for_each(self, action: Listener[T]) -> None:
        self._view.for_each(action)

    def listen(self, action: Listener[T]) -> None:
        self._runner.call(lambda: self._view.listen(action))

    def for_each_and_listen(self, action: Listener[T]) -> None:
        self._runner.run(self._on_loop(lambda: self._view.for_each_and_listen(action)))

    @staticmethod
    async def _on_loop(fn: Callable[[], None]) -> None:
        fn()

    def refresh(self) -> None:
        self._runner.run(self._view.refresh())

    def close(self) -> None:
        self._runner.run(self._view.close())
