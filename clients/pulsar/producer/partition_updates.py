"""A producer's partition count, asked for again periodically: new partitions get producers.

Pulsar lets an administrator add partitions to a partitioned topic (never remove them); the
official clients notice by asking for the partitioned metadata every
``partitions_update_interval`` and create producers on the new partitions, which routing then
includes. ``follow_partitions`` does that for one ``Producer``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from protoframe.clients.pulsar.handle import start_all
from protoframe.clients.pulsar.producer.handle import TopicProducer
from protoframe.clients.pulsar.producer.producer import Producer

__all__ = ["update_partitions", "follow_partitions"]

log = logging.getLogger(__name__)

PartitionsOf = Callable[[str], Awaitable[tuple[str, list[tuple[str, int]]]]]


async def update_partitions(producer: Producer[Any], partitions_of: PartitionsOf,
                            make_child: Callable[[str, int], TopicProducer]) -> int:
    """Create producers on the partitions added since; return how many were added."""
    count = producer.partitions()
    if count == 0:
        return 0  # a topic without partitions cannot get any
    _, parts = await partitions_of(producer.topic())
    added = [make_child(part, index) for part, index in parts if index >= count]
    if not added:
        return 0
    await start_all(added)
    producer._add_partitions(added)
    log.info("%r: %s grew to %d partitions", producer, producer.topic(), len(parts))
    return len(added)


async def follow_partitions(producer: Producer[Any], partitions_of: PartitionsOf,
                            make_child: Callable[[str, int], TopicProducer],
                            interval: float) -> None:
    """``update_partitions`` every ``interval`` seconds until cancelled."""
    while True:
        await asyncio.sleep(interval)
        try:
            await update_partitions(producer, partitions_of, make_child)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("%r: partition update failed: %s", producer, exc)
