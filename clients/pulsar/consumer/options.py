"""How a consumer is configured: ``ConsumerConfig`` and the official client's names for it."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Literal

from protoframe.clients.pulsar import errors
from protoframe.clients.pulsar.consumer.policies import ConsumerDeadLetterPolicy, RedeliveryBackoff
from protoframe.clients.pulsar.message import MessageId
from protoframe.clients.pulsar.schema.base import Schema
from protoframe.generated.pulsar import pulsar_api as pb

__all__ = ["ConsumerConfig", "ConsumerType", "InitialPosition", "InitialPositionName",
           "SubscriptionTypeName", "parse_initial_position", "parse_sub_type"]

SubType = pb.CommandSubscribe.SubType


class ConsumerType(enum.Enum):
    """Subscription types (the official client's names)."""

    Exclusive = "Exclusive"
    Shared = "Shared"
    Failover = "Failover"
    KeyShared = "Key_Shared"

    @property
    def sub_type(self) -> pb.CommandSubscribe.SubType:
        return pb.CommandSubscribe.SubType[str(self.value)]


class InitialPosition(enum.Enum):
    """Where a new subscription starts."""

    Latest = "latest"
    Earliest = "earliest"


SubscriptionTypeName = Literal["Exclusive", "Shared", "Failover", "Key_Shared", "KeyShared",
                               "exclusive", "shared", "failover", "key_shared"]
InitialPositionName = Literal["latest", "earliest", "Latest", "Earliest"]


def parse_sub_type(value: ConsumerType | pb.CommandSubscribe.SubType | str
                   ) -> pb.CommandSubscribe.SubType:
    if isinstance(value, ConsumerType):
        return value.sub_type
    if isinstance(value, pb.CommandSubscribe.SubType):
        return value
    key = value.replace("_", "").lower()
    for sub in SubType:
        if sub.name.replace("_", "").lower() == key:
            return sub
    raise errors.InvalidConfiguration(f"unknown subscription type {value!r}")


def parse_initial_position(value: InitialPosition | pb.CommandSubscribe.InitialPosition | str
                           ) -> pb.CommandSubscribe.InitialPosition:
    if isinstance(value, InitialPosition):
        value = value.value
    if isinstance(value, pb.CommandSubscribe.InitialPosition):
        return value
    lowered = value.lower()
    if lowered == "earliest":
        return pb.CommandSubscribe.InitialPosition.Earliest
    if lowered == "latest":
        return pb.CommandSubscribe.InitialPosition.Latest
    raise errors.InvalidConfiguration(f"unknown initial position {value!r}")


@dataclass
class ConsumerConfig:
    sub_type: pb.CommandSubscribe.SubType = SubType.Exclusive
    initial_position: pb.CommandSubscribe.InitialPosition = \
        pb.CommandSubscribe.InitialPosition.Latest
    receiver_queue_size: int = 1000
    consumer_name: str | None = None
    negative_ack_redelivery_delay_ms: int = 60000
    ack_group_time_ms: int = 100
    ack_group_max_size: int = 1000
    batch_index_ack_enabled: bool = False
    properties: dict[str, str] = field(default_factory=dict)
    durable: bool = True
    read_compacted: bool = False
    replicate_subscription_state: bool = False
    priority_level: int | None = None
    key_shared_mode: pb.KeySharedMode = pb.KeySharedMode.AUTO_SPLIT
    key_shared_ranges: list[tuple[int, int]] = field(default_factory=list)
    allow_out_of_order_delivery: bool = False
    start_message_id: MessageId | None = None
    deliver_entries: bool = False
    # Redelivery, dead and retry letters (``consumer.redelivery``, ``consumer.dead_letters``).
    unacked_messages_timeout_ms: int | None = None
    tick_duration_ms: int = 1000
    negative_ack_redelivery_backoff: RedeliveryBackoff | None = None
    dead_letter_policy: ConsumerDeadLetterPolicy | None = None
    retry_enable: bool = False
    subscription_properties: dict[str, str] = field(default_factory=dict)
    max_pending_chunked_message: int = 10
    auto_ack_oldest_chunked_message_on_queue_full: bool = False
    expire_time_of_incomplete_chunked_message_ms: int = 60000
    # How messages' values are decoded, and what SUBSCRIBE registers; None: bytes.
    schema: Schema[Any] | None = None
