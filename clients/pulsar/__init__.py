"""A typed asyncio Pulsar client on the generated bindings, shaped like the official client.

```python
client = PulsarClient("pulsar://127.0.0.1:6650")
producer = await client.create_producer("my-topic", compression_type="LZ4")
msg_id = await producer.send(b"data", properties={"k": "v"}, partition_key="key")
consumer = await client.subscribe("my-topic", "sub", subscription_type="Shared",
                                  initial_position="earliest")
msg = await consumer.receive()
await consumer.acknowledge(msg)
await client.close()
```

``clients.pulsar.sync.Client`` is the same client for synchronous code. Also here, in
``clients.pulsar.broker``, an embedded broker (``make run`` runs ``examples/pulsar_demo``).
"""

from protoframe.clients.pulsar.auth import (
    AuthenticationBasic,
    AuthenticationTLS,
    AuthenticationToken,
)
from protoframe.clients.pulsar.chunked import ChunkMessageId
from protoframe.clients.pulsar.client import PulsarClient
from protoframe.clients.pulsar.consumer import (
    Consumer,
    ConsumerDeadLetterPolicy,
    ConsumerType,
    InitialPosition,
    MultiplierRedeliveryBackoff,
)
from protoframe.clients.pulsar.errors import (
    AlreadyClosed,
    AuthenticationError,
    AuthorizationError,
    ConnectError,
    ConsumerBusy,
    CumulativeAcknowledgementNotAllowedError,
    MemoryBufferIsFull,
    MessageTooBig,
    ProducerBusy,
    ProducerQueueIsFull,
    PulsarException,
    SubscriptionNotFound,
    Timeout,
    TopicNotFound,
    TopicTerminated,
)
from protoframe.clients.pulsar.message import Message, MessageId
from protoframe.clients.pulsar.oauth2 import AuthenticationOauth2
from protoframe.clients.pulsar.producer import (
    CompressionType,
    PartitionsRoutingMode,
    Producer,
    ProducerAccessMode,
    SendFuture,
)
from protoframe.clients.pulsar.reader import Reader
from protoframe.clients.pulsar.routing import HashingScheme
from protoframe.clients.pulsar.table_view import TableView
from protoframe.runtime.io.auth import Authentication

__all__ = [
    "AlreadyClosed",
    "Authentication",
    "AuthenticationBasic",
    "AuthenticationError",
    "AuthenticationOauth2",
    "AuthenticationTLS",
    "AuthenticationToken",
    "AuthorizationError",
    "ChunkMessageId",
    "CompressionType",
    "ConnectError",
    "Consumer",
    "ConsumerBusy",
    "ConsumerDeadLetterPolicy",
    "ConsumerType",
    "CumulativeAcknowledgementNotAllowedError",
    "HashingScheme",
    "InitialPosition",
    "MemoryBufferIsFull",
    "Message",
    "MessageId",
    "MessageTooBig",
    "MultiplierRedeliveryBackoff",
    "PartitionsRoutingMode",
    "Producer",
    "ProducerAccessMode",
    "ProducerBusy",
    "ProducerQueueIsFull",
    "PulsarClient",
    "PulsarException",
    "Reader",
    "SendFuture",
    "SubscriptionNotFound",
    "TableView",
    "Timeout",
    "TopicNotFound",
    "TopicTerminated",
]
