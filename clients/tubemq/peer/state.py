"""What the embedded TubeMQ master and broker keep: messages, group positions, members.

One ``PeerState`` is shared by the master (``master.Master``: producers, consumers, brokers,
rebalancing) and the broker (``broker.Broker``: messages and consumer-group positions).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from protoframe.clients.tubemq.rebalance import EventType

__all__ = ["BalancedMember", "Event", "Group", "Member", "Part", "PeerState", "RegisteredBroker",
           "Stored"]


@dataclass(frozen=True, slots=True)
class Stored:
    message_id: int
    data: bytes
    flag: int
    checksum: int
    append_time: int


@dataclass
class Group:
    """A consumer group's positions in one partition."""

    committed: int = 0
    fetched: int = 0


# A partition of a topic, as the master balances them: (topic, partitionId).
Part = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Event:
    """A rebalance event sent to a consumer and not yet reported back."""

    rebalance_id: int
    op: EventType
    parts: frozenset[Part]


@dataclass
class Member:
    """A consumer in a group, as the master knows it."""

    client_id: str
    group: str
    topics: list[str]
    last_seen: float  # time.monotonic() of its last register or heartbeat
    # What it holds, by its own last report (HeartRequestC2M.subscribeInfo).
    held: set[Part] = field(default_factory=set)
    pending: Event | None = None


@dataclass
class BalancedMember:
    """A v2 consumer: it chose its own partitions, and the master only records them."""

    client_id: str
    group: str
    topics: list[str]
    source_count: int
    node_id: int
    last_seen: float
    held: set[Part] = field(default_factory=set)


@dataclass
class RegisteredBroker:
    """A broker registered with the master, as it last reported itself."""

    broker_id: str
    online: bool
    read_status: int
    write_status: int
    conf_id: int
    conf_checksum: int
    default_conf: str
    topic_confs: list[str]
    last_seen: float
    heartbeats: int = 0


@dataclass
class PeerState:
    partitions: int
    topics: dict[str, list[list[Stored]]] = field(default_factory=dict)
    groups: dict[tuple[str, str, int], Group] = field(default_factory=dict)
    producers: dict[str, list[str]] = field(default_factory=dict)
    consumers: dict[str, Member] = field(default_factory=dict)
    balanced: dict[str, BalancedMember] = field(default_factory=dict)  # v2 consumers
    brokers: dict[str, RegisteredBroker] = field(default_factory=dict)
    # (group, topic, partition) -> the client holding it
    holders: dict[tuple[str, str, int], str] = field(default_factory=dict)
    next_id: int = 1
    next_rebalance_id: int = 1

    def log_of(self, topic: str) -> list[list[Stored]]:
        return self.topics.setdefault(topic, [[] for _ in range(self.partitions)])

