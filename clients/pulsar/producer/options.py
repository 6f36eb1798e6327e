"""How a producer is configured: ``ProducerConfig`` and the official client's names for it."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from protoframe.clients.pulsar.message import MessageId
from protoframe.clients.pulsar.producer.memory import MemoryLimit
from protoframe.clients.pulsar.routing import HashingScheme
from protoframe.generated.pulsar import pulsar_api as pb

__all__ = ["CompressionName", "CompressionType", "PartitionsRoutingMode", "ProducerAccessMode",
           "ProducerConfig", "SendCallback"]

CompressionType = pb.CompressionType
ProducerAccessMode = pb.ProducerAccessMode
CompressionName = Literal["NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY"]
SendCallback = Callable[[BaseException | None, MessageId | None], None]


class PartitionsRoutingMode(enum.Enum):
    """How messages without a key are spread over partitions (the official names)."""

    RoundRobinDistribution = "round_robin"
    UseSinglePartition = "single"
    CustomPartition = "custom"




@dataclass
class ProducerConfig:
    producer_name: str | None = None
    initial_sequence_id: int | None = None
    send_timeout_millis: int = 30000
    compression_type: pb.CompressionType = pb.CompressionType.NONE
    max_pending_messages: int = 1000
    block_if_queue_full: bool = False
    batching_enabled: bool = True
    batching_max_messages: int = 1000
    batching_max_bytes: int = 128 * 1024
    batching_max_publish_delay_ms: float = 10
    key_based_batching: bool = False
    properties: dict[str, str] = field(default_factory=dict)
    access_mode: pb.ProducerAccessMode = pb.ProducerAccessMode.Shared
    routing_mode: PartitionsRoutingMode = PartitionsRoutingMode.RoundRobinDistribution
    hashing_scheme: HashingScheme = HashingScheme.Murmur3_32Hash
    message_router: Callable[[str | None, int], int] | None = None
    chunking_enabled: bool = False
    chunk_max_message_size: int = -1  # <= 0: the broker's max message size
    memory_limit: MemoryLimit | None = None  # the client's, shared by its producers
    # What PRODUCER registers (the producer's ``Schema.schema_info()``); None: no schema.
    schema_info: pb.Schema | None = None
