"""Sending a message over the broker's size limit as chunks, as the official producers do.

The message is compressed whole, then cut into pieces that fit the limit with their metadata.
Every chunk carries the message's metadata plus ``uuid`` (producer name and sequence id),
``chunk_id``, ``num_chunks_from_msg`` and ``total_chunk_msg_size`` (the compressed size), and
the message's one sequence id: the broker de-duplicates on the last chunk only. Each chunk is
its own send op (one SEND with ``is_chunk``); a ``ChunkedSendOp`` that is never written stands
for the whole message, finishing when the last chunk's receipt comes (or at the first error)
with a ``ChunkMessageId``.
"""

from __future__ import annotations

import asyncio
import functools

from protoframe.clients.pulsar.chunked import ChunkMessageId
from protoframe.clients.pulsar.message import MessageId
from protoframe.clients.pulsar.producer.future import SendOp
from protoframe.generated.pulsar import pulsar_api as pb
from protoframe.generated.pulsar.frames import Payload

__all__ = ["ChunkedSendOp", "chunk_payloads"]

# Room left for the chunk fields and the varints whose size the estimate cannot know.
_METADATA_SLACK = 64


def chunk_payloads(meta: pb.MessageMetadata, data: bytes, limit: int) -> list[Payload]:
    """``data`` (already compressed, as ``meta`` says) cut into payloads of at most ``limit``
    bytes of metadata and data each."""
    uuid = f"{meta.producer_name}-{meta.sequence_id}"
    meta.uuid = uuid
    meta.total_chunk_msg_size = len(data)
    meta.num_chunks_from_msg = 1
    meta.chunk_id = 0
    room = limit - len(meta.encode()) - _METADATA_SLACK
    if room <= 0:
        raise ValueError(f"a chunk of at most {limit} bytes has no room for data next to its "
                         "metadata")
    count = max(1, -(-len(data) // room))
    encoded = meta.encode()
    payloads = []
    view = memoryview(data)
    for index in range(count):
        chunk_meta = pb.MessageMetadata.decode(encoded)
        chunk_meta.num_chunks_from_msg = count
        chunk_meta.chunk_id = index
        payloads.append(Payload(metadata=chunk_meta,
                                data=bytes(view[index * room:(index + 1) * room])))
    return payloads


class ChunkedSendOp(SendOp):
    """The whole chunked message: done when all its chunk ops are (see the module docstring)."""

    __slots__ = ("chunk_ids", "remaining")

    def __init__(self, partition: int, loop: asyncio.AbstractEventLoop | None, created: float,
                 chunks: list[SendOp]) -> None:
        super().__init__(partition, loop, created)
        self.chunk_ids: list[MessageId] = []
        self.remaining = len(chunks)
        for chunk in chunks:
            chunk.add_callback(functools.partial(self._chunk_done, chunk))

    def _chunk_done(self, chunk: SendOp) -> None:
        if self.done:
            return
        if chunk.error is not None:
            self.finish(-1, -1, chunk.error)
            return
        self.chunk_ids.append(MessageId(self.partition, chunk.ledger_id, chunk.entry_id, -1))
        self.remaining -= 1
        if self.remaining == 0:
            self.finish(chunk.ledger_id, chunk.entry_id, None)

    def message_id(self, index: int) -> MessageId:
        if len(self.chunk_ids) == 1:
            return self.chunk_ids[0]
        return ChunkMessageId(self.chunk_ids)
