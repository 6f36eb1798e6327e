"""The payloads of persisted entries most recently read back from the broker log."""

from __future__ import annotations

from collections import OrderedDict

# What an item costs besides its payload bytes: the bytes object's header, its offset as an
# int, the ordered dict's slots and links, which a churning dict keeps sparse (170 to 230 bytes,
# measured with tracemalloc on CPython 3.11). Without it a cache of small payloads would hold
# more than twice the memory it is given.
ITEM_OVERHEAD = 240


class PayloadCache:
    """The most recently used payloads, up to ``capacity`` bytes (counting each item's
    ``ITEM_OVERHEAD``)."""

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
        cost = len(data) + ITEM_OVERHEAD
        if cost > self.capacity or offset in self._items:
            return
        self._items[offset] = data
        self.size += cost
        while self.size > self.capacity:
            _, old = self._items.popitem(last=False)
            self.size -= len(old) + ITEM_OVERHEAD

    def clear(self) -> None:
        self._items.clear()
        self.size = 0
