"""Consumers: subscriptions, flow control, receive, acknowledgements, redelivery, seek.

``options`` (``ConsumerConfig`` and its names), ``batches`` (batched payloads into messages,
pure functions), ``queue`` (the receive queue), ``handle`` (``TopicConsumer``: one topic or
partition, flow control, acknowledgements) and ``consumer`` (``Consumer``, what applications
hold). For a partitioned topic a ``Consumer`` has one ``TopicConsumer`` per partition, all
feeding the same queue; otherwise one.
"""

from protoframe.clients.pulsar.consumer.batches import entry_messages, uniform_layout
from protoframe.clients.pulsar.consumer.consumer import Consumer
from protoframe.clients.pulsar.consumer.handle import TopicConsumer
from protoframe.clients.pulsar.consumer.options import (
    ConsumerConfig,
    ConsumerType,
    InitialPosition,
    InitialPositionName,
    SubscriptionTypeName,
    parse_initial_position,
    parse_sub_type,
)
from protoframe.clients.pulsar.consumer.queue import ReceiveQueue

__all__ = ["Consumer", "ConsumerConfig", "ConsumerType", "InitialPosition",
           "InitialPositionName", "ReceiveQueue", "SubscriptionTypeName", "TopicConsumer",
           "entry_messages", "parse_initial_position", "parse_sub_type", "uniform_layout"]
