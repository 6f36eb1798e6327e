"""What a TubeMQ consumer hands out and keeps: messages, rebalance records, held partitions."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from protoframe.clients.tubemq.connection import TubeMQConnection
from protoframe.clients.tubemq.rebalance import EventType
from protoframe.clients.tubemq.topics import BrokerInfo

__all__ = ["OP_REGISTER", "OP_UNREGISTER", "HeldPartition", "Message", "Rebalance"]

OP_REGISTER = 31  # RegisterRequestC2B.opType: take a partition
OP_UNREGISTER = 32  # ... and release it


@dataclass(frozen=True, slots=True)
class Message:
    """One message as a broker hands it out."""

    partition: int
    message_id: int
    data: bytes
    flag: int
    checksum: int


@dataclass(frozen=True, slots=True)
class Rebalance:
    """One rebalance event as this consumer carried it out (what ``on_rebalance`` is given).

    ``changed`` are the partitions the event named (taken for a CONNECT, released for a
    DISCONNECT), ``partitions`` those held afterwards, ``ok`` whether every step succeeded.
    """

    rebalance_id: int
    op: EventType
    changed: frozenset[int]
    partitions: frozenset[int]
    ok: bool


def _idle_event() -> asyncio.Event:
    event = asyncio.Event()
    event.set()
    return event


@dataclass(slots=True)
class HeldPartition:
    """A partition this consumer holds: where it is, and whether it may be fetched from."""

    broker: BrokerInfo
    partition: int
    conn: TubeMQConnection
    releasing: bool = False  # a DISCONNECT is under way: no new fetches
    # Cleared from a fetch until its batch is committed (or the fetch found nothing).
    idle: asyncio.Event = field(default_factory=_idle_event)
