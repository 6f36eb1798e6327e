"""The topics behind one ``Consumer``: several of them, a pattern's matches, growing partitions.

``ConsumerTopics`` creates and starts the ``TopicConsumer``s of a topic (one per partition)
into the consumer's shared receive queue, adds the ones of a topic that a pattern discovery
found after subscribing, closes those of a topic gone from the matches, and, every
``partitions_update_interval`` seconds, asks for each topic's partition count again and
subscribes to the partitions added since (Pulsar partitions only grow).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

from protoframe.clients.pulsar.consumer.consumer import Consumer
from protoframe.clients.pulsar.consumer.handle import TopicConsumer
from protoframe.clients.pulsar.handle import start_all

__all__ = ["ConsumerTopics", "PartitionsOf"]

log = logging.getLogger(__name__)

# A topic's full name and its partitions' names and indexes (itself, as -1, if unpartitioned).
PartitionsOf = Callable[[str], Awaitable[tuple[str, list[tuple[str, int]]]]]
# Makes (does not start) the topic consumer of one partition: (name, index) -> handle.
MakeChild = Callable[[str, int], TopicConsumer]


class ConsumerTopics:
    """The topics of ``consumer`` and their partition counts, kept up to date."""

    def __init__(self, consumer: Consumer, partitions_of: PartitionsOf,
                 make_child: MakeChild) -> None:
        self.consumer = consumer
        self._partitions_of = partitions_of
        self._make_child = make_child
        self.partitions: dict[str, int] = {}  # topic -> partitions (0: not partitioned)
        self._lock = asyncio.Lock()  # discovery and partition updates take turns

    @staticmethod
    async def children_for(partitions_of: PartitionsOf, make_child: MakeChild,
                           topics: Iterable[str]) -> tuple[dict[str, int], list[TopicConsumer]]:
        """The (unstarted) topic consumers of ``topics`` and their partition counts."""
        looked_up = await asyncio.gather(*(partitions_of(t) for t in topics))
        counts: dict[str, int] = {}
        children: list[TopicConsumer] = []
        for name, parts in looked_up:
            if name in counts:
                continue
            counts[name] = 0 if parts[0][1] < 0 else len(parts)
            children.extend(make_child(part, index) for part, index in parts)
        return counts, children

    async def add(self, topics: Iterable[str]) -> None:
        """Subscribe to topics found after the consumer was created."""
        async with self._lock:
            new = [t for t in topics if t not in self.partitions]
            if not new:
                return
            counts, children = await self.children_for(self._partitions_of, self._make_child,
                                                       new)
            await start_all(children)
            self.partitions.update(counts)
            self.consumer._add_children(children)
            log.info("%r: subscribed to %s", self.consumer, ", ".join(sorted(counts)))

    async def remove(self, topics: Iterable[str]) -> None:
        """Close the topic consumers of topics that no longer match."""
        async with self._lock:
            for topic in topics:
                if self.partitions.pop(topic, None) is None:
                    continue
                children = self.consumer._children_of(topic)
                self.consumer._remove_children(children)
                await asyncio.gather(*(c.close() for c in children), return_exceptions=True)
                log.info("%r: unsubscribed from %s", self.consumer, topic)

    async def changed(self, added: set[str], removed: set[str]) -> None:
        """A ``TopicDiscovery``'s report."""
        await self.remove(removed)
        await self.add(added)

    async def update_partitions(self) -> None:
        """Subscribe to the partitions added to any topic since the last look."""
        async with self._lock:
            for topic, count in list(self.partitions.items()):
                if count == 0:
                    continue  # a topic without partitions cannot get any
                name, parts = await self._partitions_of(topic)
                added = [(part, index) for part, index in parts if index >= count]
                if not added:
                    continue
                children = [self._make_child(part, index) for part, index in added]
                await start_all(children)
                self.partitions[topic] = len(parts)
                self.consumer._add_children(children)
                log.info("%r: %s grew to %d partitions", self.consumer, topic, len(parts))

    async def follow_partitions(self, interval: float) -> None:
        """``update_partitions`` every ``interval`` seconds until cancelled."""
        while True:
            await asyncio.sleep(interval)
            try:
                await self.update_partitions()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("%r: partition update failed: %s", self.consumer, exc)
