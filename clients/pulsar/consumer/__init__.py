"""Consumers: subscriptions, flow control, receive, acknowledgements, redelivery, seek.

``options`` (``ConsumerConfig`` and its names), ``batches`` (batched payloads into messages,
pure functions), ``queue`` (the receive queue), ``handle`` (``TopicConsumer``: one topic or
partition, flow control, acknowledgements), ``consumer`` (``Consumer``, what applications
hold), ``policies`` (dead-letter policy, negative-ack backoff), ``redelivery`` (the ack
timeout), ``dead_letters`` (dead and retry letters) and ``listener`` (message listeners).
For a partitioned topic a ``Consumer`` has one ``TopicConsumer`` per partition, all
feeding the same queue; otherwise one.
"""

from protoframe.clients.pulsar.consumer.batches import entry_messages, uniform_layout
from protoframe.clients.pulsar.consumer.consumer import Consumer, MessageListener
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
from protoframe.clients.pulsar.consumer.policies import (
    ConsumerDeadLetterPolicy,
    MultiplierRedeliveryBackoff,
    RedeliveryBackoff,
)
from protoframe.clients.pulsar.consumer.queue import ReceiveQueue

__all__ = ["Consumer", "ConsumerConfig", "ConsumerDeadLetterPolicy", "ConsumerType",
           "InitialPosition", "InitialPositionName", "MessageListener",
           "MultiplierRedeliveryBackoff", "ReceiveQueue", "RedeliveryBackoff",
           "SubscriptionTypeName", "TopicConsumer",
           "entry_messages", "parse_initial_position", "parse_sub_type", "uniform_layout"]
