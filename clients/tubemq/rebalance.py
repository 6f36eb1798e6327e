"""What a TubeMQ master and consumer say to each other when a group's partitions move.

The master balances a group's partitions across its consumers and tells each consumer what to
change with a rebalance event (``EventProto``) in a heartbeat answer (``HeartResponseM2C.event``):
``rebalanceId``, ``opType`` (an ``EventType``), ``status`` (``EventStatus.TODO``) and
``subscribeInfo``, one ``SubscribeInfo`` string per partition concerned. The consumer releases
(``DISCONNECT``) or takes (``CONNECT``) those partitions at their brokers and reports the event
back in its next heartbeat (``HeartRequestC2M.event``, same ``rebalanceId`` and ``opType``,
``status`` ``DONE`` or ``FAILED``). Partitions leave one consumer before they reach another:
the master sends every ``DISCONNECT`` of a rebalance, and a partition is only in a
``CONNECT`` once no other consumer of the group holds it.

The numbers are upstream's (``corebase.balance.EventType`` and ``EventStatus``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

from protoframe.clients.tubemq.topics import BrokerInfo, parse_topic_info

__all__ = ["EventStatus", "EventType", "SubscribeInfo", "assign_partitions", "node_share",
           "parse_subscribe_info"]


class EventType(IntEnum):
    """``EventProto.opType``: what the consumer is asked to do."""

    CONNECT = 1  # take partitions (after others released them)
    DISCONNECT = 2  # release partitions; a CONNECT may follow
    REPORT = 3  # report what is held
    ONLY_CONNECT = 10  # take partitions, nothing was released first
    ONLY_DISCONNECT = 20  # release partitions, nothing follows


class EventStatus(IntEnum):
    """``EventProto.status``: TODO as the master sends it, DONE or FAILED as reported."""

    FAILED = -2
    UNKNOWN = -1
    TODO = 0
    PROCESSING = 1
    DONE = 2


CONNECTS = frozenset({EventType.CONNECT, EventType.ONLY_CONNECT})
DISCONNECTS = frozenset({EventType.DISCONNECT, EventType.ONLY_DISCONNECT})


@dataclass(frozen=True, slots=True)
class SubscribeInfo:
    """One partition as held by one consumer of a group."""

    consumer_id: str
    group: str
    broker: BrokerInfo
    topic: str
    partition: int

    def __str__(self) -> str:
        # Upstream clients and masters separate the three parts with '#' (the .proto comment
        # shows '-'); both are read, '#' is written.
        return f"{self.consumer_id}@{self.group}#{self.broker}#{self.topic}:{self.partition}"


# consumerId@group, then brokerId:host:port, then topic:partitionId; '#' or '-' between parts.
# A client id or group may hold '-', so the broker part anchors the split.
_SUBSCRIBE_INFO = re.compile(r"([^@]+)@(.+?)[#-](\d+):([^:#]+):(\d+)[#-](.+):(\d+)")


def parse_subscribe_info(text: str) -> SubscribeInfo:
    """``consumerId@group#brokerId:host:port#topic:partitionId`` (or with '-' between the
    parts); raises ``ValueError`` on anything else."""
    m = _SUBSCRIBE_INFO.fullmatch(text)
    if m is None:
        raise ValueError(f"not a consumerId@group#broker#topic:partitionId entry: {text!r}")
    return SubscribeInfo(m[1], m[2], BrokerInfo(int(m[3]), m[4], int(m[5])), m[6], int(m[7]))


def assign_partitions(partitions: Iterable[int], consumers: Iterable[str]) -> dict[str, set[int]]:
    """Deal ``partitions`` out round-robin over ``consumers`` sorted by id.

    The result depends only on the two sets (not on their order), so a master computes the
    same assignment however members arrived; every consumer has a (possibly empty) entry, and
    the counts differ by at most one.
    """
    members = sorted(set(consumers))
    result: dict[str, set[int]] = {c: set() for c in members}
    if not members:
        return result
    for i, partition in enumerate(sorted(set(partitions))):
        result[members[i % len(members)]].add(partition)
    return result


def node_share(layout: Iterable[str], topic: str, source_count: int,
               node_id: int) -> tuple[dict[int, BrokerInfo], list[str]]:
    """The partitions of ``topic`` that node ``node_id`` of ``source_count`` takes in a
    client-balanced group (master protocol v2), with the broker holding each; and the layout
    entries that could not be read.

    Every partition of the layout (``TopicInfo`` strings) has a place, sorted by broker id
    and then partition; a node takes the places equal to its id modulo ``source_count``.
    """
    places: list[tuple[int, int, BrokerInfo]] = []
    unreadable: list[str] = []
    for text in layout:
        try:
            info = parse_topic_info(text)
        except ValueError:
            unreadable.append(text)
            continue
        if info.topic == topic:
            places += [(info.broker.broker_id, p, info.broker) for p in range(info.partitions)]
    places.sort(key=lambda place: place[:2])
    mine = {p: broker for i, (_, p, broker) in enumerate(places) if i % source_count == node_id}
    return mine, unreadable
