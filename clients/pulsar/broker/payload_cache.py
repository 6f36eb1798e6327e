"""The payloads of persisted entries most recently read back from the broker log."""

from __future__ import annotations

from collections import OrderedDict


class PayloadCache:
    """The most recently used payloads, up to ``capacity`` bytes."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.size = 0
        self._items: OrderedDict[int, bytes] = OrderedDict()

    def get(self, offset: int) -> bytes | None:
        data = self._items.get(offset)
        if data is not None:
            self._items.move_to_end(offset)
        return data

    def put(self, offset: int, data: bytes) -> None:
        if len(data) > self.capacity or offset in self._items:
            return
        self._items[offset] = data
        self.size += len(data)
        while self.size > self.capacity:
            _, old = self._items.popitem(last=False)
            self.size -= len(old)

    def clear(self) -> None:
        self._items.clear()
        self.size = 0
