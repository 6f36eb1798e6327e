"""Reassembling chunked messages on a consumer, as the official clients do.

Chunks of one message (same producer name and ``uuid``) are collected until the last one
(``chunk_id == num_chunks_from_msg - 1``) arrives, then joined, decompressed and delivered as one
``ChunkedMessage`` whose id names every chunk. Each chunk short of the last gives its flow
permit back at once (the broker counts chunks as messages).

What Pulsar does with the unusual cases, done here the same way:

* more than ``max_pending_chunked_message`` messages under way: the oldest is dropped; its
  chunks are acknowledged with ``auto_ack_oldest_chunked_message_on_queue_full``, else left
  unacknowledged (the broker sends them again after a reconnect or a redelivery request);
* a message not complete ``expire_time_of_incomplete_chunked_message_ms`` after its first chunk
  came: dropped and its chunks acknowledged;
* a chunk that does not continue its message (a gap, no first chunk, a size that does not add
  up): the message is dropped with a warning and its chunks left unacknowledged; the stray
  chunk itself is acknowledged only once it is older than the expiry time;
* the first chunk again: a redelivery (same position) starts over; a producer's resend (a new
  position) also starts over and acknowledges the superseded chunks; a chunk seen already is
  ignored, or acknowledged when it is a resent copy at a new position.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from protoframe.clients.pulsar.acks import Position
from protoframe.generated.pulsar import pulsar_api as pb

__all__ = ["ChunkAssembler", "ChunkLimits", "CompleteMessage"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChunkLimits:
    """The consumer options (the official names) that bound reassembly."""

    max_pending_chunked_message: int = 10  # 0: no limit
    auto_ack_oldest_chunked_message_on_queue_full: bool = False
    expire_time_of_incomplete_chunked_message_ms: int = 60000  # 0: never expire


@dataclass
class _Pending:
    """A chunked message under way."""

    total_size: int
    received_at: float
    parts: list[bytes] = field(default_factory=list)
    positions: list[Position] = field(default_factory=list)
    size: int = 0

    @property
    def last_chunk_id(self) -> int:
        return len(self.parts) - 1


@dataclass
class CompleteMessage:
    """A chunked message whose chunks have all come: its compressed bytes, the last chunk's
    metadata, and every chunk's position in order."""

    data: bytes
    metadata: pb.MessageMetadata
    positions: list[Position]


class ChunkAssembler:
    """The chunked messages under way on one topic consumer (see the module docstring).

    ``ack(positions)`` acknowledges chunks; ``release(n)`` gives ``n`` flow permits back.
    """

    def __init__(self, limits: ChunkLimits, ack: Callable[[list[Position]], None],
                 release: Callable[[int], None], name: str = "consumer") -> None:
        self.limits = limits
        self._ack = ack
        self._release = release
        self._name = name
        self._pending: dict[tuple[str, str], _Pending] = {}  # oldest first
        self._timer: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, meta: pb.MessageMetadata, data: bytes, position: Position
            ) -> CompleteMessage | None:
        """Take one chunk; the whole message once this is its last chunk."""
        key = (meta.producer_name, meta.uuid)
        chunk_id = meta.chunk_id
        pending = self._pending.get(key)
        if chunk_id == 0:
            if pending is not None:
                del self._pending[key]
                if pending.positions[0] != position:
                    # The producer sent the message again: the old copy's chunks are done with.
                    self._ack(pending.positions)
            else:
                self._make_room()
            pending = self._pending[key] = _Pending(meta.total_chunk_msg_size, time.monotonic())
            self._arm()
        elif pending is not None and chunk_id <= pending.last_chunk_id:
            if position not in pending.positions:
                self._ack([position])  # a resent copy of a chunk already here
            self._release(1)
            return None
        elif pending is None or chunk_id != pending.last_chunk_id + 1:
            self._unexpected(key, meta, position, pending)
            return None
        pending.parts.append(data)
        pending.positions.append(position)
        pending.size += len(data)
        if pending.size > pending.total_size:
            self._unexpected(key, meta, position, pending)
            return None
        if chunk_id < meta.num_chunks_from_msg - 1:
            self._release(1)
            return None
        del self._pending[key]
        if pending.size != pending.total_size:
            self._unexpected(key, meta, position, pending)
            return None
        return CompleteMessage(b"".join(pending.parts), meta, pending.positions)

    def _unexpected(self, key: tuple[str, str], meta: pb.MessageMetadata, position: Position,
                    pending: _Pending | None) -> None:
        got = pending.last_chunk_id if pending is not None else -1
        log.warning("%s: dropping chunked message %s of %s: chunk %d of %d (%d bytes of %d) "
                    "after chunk %d", self._name, meta.uuid, meta.producer_name, meta.chunk_id,
                    meta.num_chunks_from_msg, pending.size if pending else 0,
                    meta.total_chunk_msg_size, got)
        self._pending.pop(key, None)
        self._release(1)
        expire = self.limits.expire_time_of_incomplete_chunked_message_ms
        if expire > 0 and time.time() * 1000 > meta.publish_time + expire:
            self._ack([position])

    def _make_room(self) -> None:
        limit = self.limits.max_pending_chunked_message
        while limit > 0 and len(self._pending) >= limit:
            key = next(iter(self._pending))
            oldest = self._pending.pop(key)
            log.info("%s: %d chunked messages under way; dropping the oldest, %s of %s", self._name,
                     limit, key[1], key[0])
            if self.limits.auto_ack_oldest_chunked_message_on_queue_full:
                self._ack(oldest.positions)

    def _arm(self) -> None:
        expire = self.limits.expire_time_of_incomplete_chunked_message_ms
        if expire <= 0 or self._timer is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._timer = loop.call_later(expire / 1000.0, self._expire)

    def _expire(self) -> None:
        self._timer = None
        expire = self.limits.expire_time_of_incomplete_chunked_message_ms / 1000.0
        now = time.monotonic()
        for key, pending in list(self._pending.items()):
            if pending.received_at + expire <= now:
                del self._pending[key]
                log.info("%s: chunked message %s of %s incomplete after %.3f s; dropping it",
                         self._name, key[1], key[0], expire)
                self._ack(pending.positions)
        if self._pending:
            oldest = next(iter(self._pending.values()))
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(max(oldest.received_at + expire - now, 0.001),
                                          self._expire)

    def clear(self) -> None:
        """Forget every message under way (their chunks come again after a reconnect)."""
        self._pending.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
