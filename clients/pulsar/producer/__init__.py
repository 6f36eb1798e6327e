"""Producers: batching, compression, sequence ids, receipts, resend on reconnect, partitions.

``options`` (``ProducerConfig`` and its names), ``future`` (``SendFuture`` and the send op it
belongs to), ``payloads`` (a closed batch or one message as metadata and compressed bytes),
``handle`` (``TopicProducer``: one topic or partition, batches, receipts) and ``producer``
(``Producer``, what applications hold: routing over partitions).

Hot path (``send_async`` of plain data with batching, ``TopicProducer.send_simple``): the
message becomes four byte strings appended to the open batch's list (u32 size, two cached
varint fields, the data; ``batching.append_entry`` inlined, no metadata object), the sequence
id is a counter, and the returned ``SendFuture`` is a three-slot object pointing at the batch's
op, so a million sends make no asyncio futures unless someone awaits them. A full batch
(count, bytes) or the publish-delay timer closes the batch: one ``b"".join``, one compression
call, one ``MessageMetadata``, one SEND frame. Ops are written only while the connection's
write buffer is below its high-water mark; the rest wait in memory, once, until it drains, and
frames written in one event-loop turn leave in one system call.
"""

from protoframe.clients.pulsar.producer.future import SendFuture
from protoframe.clients.pulsar.producer.handle import TopicProducer
from protoframe.clients.pulsar.producer.options import (
    CompressionName,
    CompressionType,
    PartitionsRoutingMode,
    ProducerAccessMode,
    ProducerConfig,
    SendCallback,
)
from protoframe.clients.pulsar.producer.producer import Producer

__all__ = ["CompressionName", "CompressionType", "PartitionsRoutingMode", "Producer",
           "ProducerAccessMode", "ProducerConfig", "SendCallback", "SendFuture",
           "TopicProducer"]
