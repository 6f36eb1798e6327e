"""A chunked message's id and the message reassembled from its chunks.

A message over the broker's size limit travels as several entries ("chunks") sharing one
``uuid`` in their metadata. Its id, as the official clients give it (``ChunkMessageIdImpl``),
is the last chunk's position, carrying the first chunk's; it also keeps every chunk's position
so that acknowledging the message (or its id) acknowledges each chunk.
"""

from __future__ import annotations

from collections.abc import Sequence

from protoframe.clients.pulsar.message import EntryInfo, Message, MessageId
from protoframe.generated.pulsar import pulsar_api as pb

__all__ = ["ChunkMessageId", "ChunkedMessage"]


class ChunkMessageId(MessageId):
    """The id of a chunked message: the last chunk's position, with the first chunk's."""

    __slots__ = ("_first", "_chunks")

    def __init__(self, chunks: Sequence[MessageId]) -> None:
        if not chunks:
            raise ValueError("a chunked message has at least one chunk")
        last = chunks[-1]
        super().__init__(last.partition(), last.ledger_id(), last.entry_id(), -1)
        self._first = chunks[0]
        self._chunks = tuple(chunks)

    def first_chunk_message_id(self) -> MessageId:
        return self._first

    def last_chunk_message_id(self) -> MessageId:
        return MessageId(self._partition, self._ledger_id, self._entry_id, -1)

    def chunk_message_ids(self) -> tuple[MessageId, ...]:
        """Every chunk's position, in order (what acknowledging this id acknowledges)."""
        return self._chunks

    def to_proto(self) -> pb.MessageIdData:
        data = super().to_proto()
        data.first_chunk_message_id = self._first.to_proto()
        return data

    def __str__(self) -> str:
        # As the official client prints a chunked message's id: first chunk, then last.
        return f"{self._first};{self.last_chunk_message_id()}"

    def __repr__(self) -> str:
        return (f"ChunkMessageId(first={self._first!r}, last={self.last_chunk_message_id()!r}, "
                f"chunks={len(self._chunks)})")


class ChunkedMessage(Message):
    """A message reassembled from its chunks; its entry information is the last chunk's."""

    __slots__ = ("_chunk_ids",)

    def __init__(self, data: bytes, entry: EntryInfo, chunk_ids: Sequence[MessageId]) -> None:
        super().__init__(data, -1, entry, None)
        self._chunk_ids = tuple(chunk_ids)

    def message_id(self) -> ChunkMessageId:
        return ChunkMessageId(self._chunk_ids)

    def num_chunks(self) -> int:
        return len(self._chunk_ids)
