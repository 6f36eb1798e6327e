"""What a SEND carries: a closed batch, or one message, as metadata and (compressed) bytes.

Pure functions of what the producer hands them; the producer decides when a batch closes and
whether the result is too big for the broker.
"""

from __future__ import annotations

import time

from protoframe.clients.pulsar.batching import BatchBuilder
from protoframe.generated.pulsar import pulsar_api as pb
from protoframe.generated.pulsar.frames import Payload
from protoframe.runtime.codec.compression import compress

__all__ = ["batch_payload", "compressed_payload"]


def compressed_payload(meta: pb.MessageMetadata, data: bytes,
                       compression: pb.CompressionType) -> Payload:
    """``data`` under ``meta``, compressed with ``compression`` (noted in ``meta``)."""
    if compression is not pb.CompressionType.NONE:
        meta.compression = compression
        meta.uncompressed_size = len(data)
        data = compress(compression.name, data)
    return Payload(metadata=meta, data=data)


def batch_payload(batch: BatchBuilder, producer_name: str,
                  compression: pb.CompressionType) -> Payload:
    """The payload of a closed batch: one ``MessageMetadata`` for all its messages (one
    ``b"".join`` and one compression call, however many messages it holds)."""
    meta = pb.MessageMetadata(
        producer_name=producer_name, sequence_id=batch.first_sequence_id,
        publish_time=int(time.time() * 1000), num_messages_in_batch=batch.count,
        partition_key=batch.common_key(),
    )
    if batch.last_sequence_id != batch.first_sequence_id:
        meta.highest_sequence_id = batch.last_sequence_id
    return compressed_payload(meta, batch.payload(), compression)
