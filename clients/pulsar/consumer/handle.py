"""One consumer on one topic or partition: flow control, receiving, acknowledgements, seek.

Flow control follows the official clients: after subscribing, a consumer grants the broker
``receiver_queue_size`` permits (FLOW) and grants more, in one FLOW, each time the application
has taken half that many messages out of the queue. A batch uses one permit per message.

A MESSAGE is decoded once, its payload decompressed once, and its messages (``batches``) put
into the ``Consumer``'s ``ReceiveQueue`` sharing one ``EntryInfo``. A MESSAGE whose checksum
fails is never delivered: it is acknowledged at once with validation error ChecksumMismatch
(and its permits are returned). Subscribing and subscribing again after a lost connection are
the shared lifecycle's (``handle.TopicHandle``).
"""

from __future__ import annotations

import logging
import uuid

from protoframe.clients.pulsar import errors
from protoframe.clients.pulsar.acks import (
    AckGroupingTracker,
    NegativeAckTracker,
    Position,
    ack_set_words,
    build_ack_commands,
)
from protoframe.clients.pulsar.batching import split_batch
from protoframe.clients.pulsar.chunked import ChunkedMessage, ChunkMessageId
from protoframe.clients.pulsar.connection import ClientConnection
from protoframe.clients.pulsar.consumer.batches import filter_batch, plain_batch
from protoframe.clients.pulsar.consumer.chunks import ChunkAssembler, ChunkLimits
from protoframe.clients.pulsar.consumer.options import ConsumerConfig
from protoframe.clients.pulsar.consumer.queue import ReceiveQueue
from protoframe.clients.pulsar.consumer.redelivery import UnackedTracker
from protoframe.clients.pulsar.handle import HandleState, TopicHandle
from protoframe.clients.pulsar.message import EntryInfo, Message, MessageId, ReceivedEntry
from protoframe.clients.pulsar.session import Session
from protoframe.generated.pulsar import pulsar_api as pb
from protoframe.generated.pulsar.frames import Payload
from protoframe.runtime.codec.compression import decompress
from protoframe.runtime.errors import DecodeError

__all__ = ["TopicConsumer"]

log = logging.getLogger(__name__)

T = pb.BaseCommand.Type
SubType = pb.CommandSubscribe.SubType
AckType = pb.CommandAck.AckType
ValidationError = pb.CommandAck.ValidationError
_NO_COMPRESSION = pb.CompressionType.NONE


class TopicConsumer(TopicHandle[None]):
    """A consumer on one topic or partition; feeds its ``Consumer``'s queue."""

    _fatal = errors.CONSUMER_FATAL
    _creating = "subscribe to"

    def __init__(self, session: Session, queue: ReceiveQueue, topic: str, partition: int,
                 subscription: str, conf: ConsumerConfig, consumer_id: int) -> None:
        super().__init__(session, topic, partition)
        self.queue = queue
        self.subscription = subscription
        self.conf = conf
        self.consumer_id = consumer_id
        self.consumer_name = conf.consumer_name or uuid.uuid4().hex[:10]
        self.queue_size = max(conf.receiver_queue_size, 1)
        self.permits = 0
        self.refill = max(self.queue_size // 2, 1)
        self.tracker = AckGroupingTracker(self._send_acks, max_size=conf.ack_group_max_size,
                                          max_delay=conf.ack_group_time_ms / 1000.0)
        self.nacks = NegativeAckTracker(self._send_redeliver,
                                        conf.negative_ack_redelivery_delay_ms / 1000.0)
        self.reached_end = False
        self.active = True
        self._partial_by_id: dict[Position, bytearray] = {}
        self._is_shared = conf.sub_type in (SubType.Shared, SubType.Key_Shared)
        self.received = 0
        self.index_acks = conf.batch_index_ack_enabled  # read per acknowledged message
        self.unacked: UnackedTracker | None = None  # the ack timeout's, set by ``Consumer``

        # Where a non-durable subscription starts when (re)created; a reader moves it to the
        # last message it read, so that a lost connection resumes there (``reader``).
        self.start_message_id = conf.start_message_id
        self._chunks: ChunkAssembler | None = None  # made at the first chunk
        self.schema = conf.schema  # read by Message.value()

    def __repr__(self) -> str:
        return f"<consumer {self.consumer_name} on {self.topic} / {self.subscription}>"

    # ---- the life on the broker (``TopicHandle``) --------------------------------------------

    def _register(self, cnx: ClientConnection) -> None:
        cnx.consumers[self.consumer_id] = self

    def _unregister(self, cnx: ClientConnection) -> None:
        if cnx.consumers.get(self.consumer_id) is self:
            del cnx.consumers[self.consumer_id]

    def _before_register(self) -> None:
        # Messages still queued from the old connection will come again: drop them first.
        self.queue.drop(self)
        if self._chunks is not None:
            self._chunks.clear()

    async def _create(self, cnx: ClientConnection) -> None:
        conf = self.conf
        key_shared = None
        if conf.sub_type is SubType.Key_Shared:
            key_shared = pb.KeySharedMeta(
                keySharedMode=conf.key_shared_mode,
                hashRanges=[pb.IntRange(start=a, end=b) for a, b in conf.key_shared_ranges]
                or None,
                allowOutOfOrderDelivery=conf.allow_out_of_order_delivery or None)
        start_id = self.start_message_id.to_proto() if self.start_message_id else None
        await cnx.requests.subscribe(
            self.topic, self.subscription, conf.sub_type, self.consumer_id,
            consumer_name=self.consumer_name,
            priority_level=conf.priority_level,
            durable=conf.durable,
            start_message_id=start_id,
            metadata=[pb.KeyValue(key=k, value=v) for k, v in conf.properties.items()]
            or None,
            read_compacted=conf.read_compacted or None,
            initialPosition=conf.initial_position,
            replicate_subscription_state=conf.replicate_subscription_state or None,
            keySharedMeta=key_shared,
            subscription_properties=[pb.KeyValue(key=k, value=v) for k, v
                                     in conf.subscription_properties.items()] or None,
            schema=conf.schema.schema_info() if conf.schema is not None else None,
        )

    def _ready(self, cnx: ClientConnection, answer: None) -> None:
        self.permits = 0
        self._flow(self.queue_size)

    def _lost(self, exc: BaseException) -> None:
        self.queue.fail(exc)

    # ---- flow control -----------------------------------------------------------------------

    def _flow(self, permits: int) -> None:
        cnx = self.cnx
        if cnx is None or permits <= 0:
            return
        try:
            cnx.write_command(pb.BaseCommand(
                type_=T.FLOW, flow=pb.CommandFlow(consumer_id=self.consumer_id,
                                                  messagePermits=permits)))
            # Out now: ``receive`` does not yield while the queue holds messages, so a FLOW
            # left for the end of the loop's turn would reach the broker only once the queue
            # is empty, and every refill would cost the consumer a round trip of idling.
            cnx.conn.flush()
        except ConnectionError:
            pass

    def taken(self, count: int = 1) -> None:
        """The application took ``count`` messages (or they were dropped): maybe refill."""
        permits = self.permits + count
        if permits >= self.refill and self.cnx is not None:
            self.permits = 0
            self._flow(permits)
        else:
            self.permits = permits

    # ---- receiving --------------------------------------------------------------------------

    def message_received(self, cmd: pb.CommandMessage, payload: Payload,
                         cnx: ClientConnection) -> None:
        if cnx is not self.cnx:
            return
        meta = payload.metadata
        data = payload.data
        mid = cmd.message_id
        ledger = mid.ledgerId
        entry = mid.entryId
        if ledger >= 1 << 63:
            ledger -= 1 << 64
        if entry >= 1 << 63:
            entry -= 1 << 64
        if meta.has_num_chunks_from_msg() and meta.num_chunks_from_msg > 1 and \
                not self.conf.deliver_entries:
            self._chunk_received(cmd, meta, data, ledger, entry, cnx)
            return
        compression = meta.compression
        if compression is not _NO_COMPRESSION:
            try:
                data = decompress(compression.name, data, meta.uncompressed_size,
                                  max_size=max(cnx.max_message_size, 5 * 1024 * 1024))
            except (DecodeError, ValueError) as exc:
                log.warning("%r: cannot decompress %d:%d: %s", self, ledger, entry, exc)
                self._discard(mid, ValidationError.DecompressionError,
                              meta.num_messages_in_batch if meta.has_num_messages_in_batch()
                              else 1)
                return
        if self.tracker.is_duplicate(ledger, entry):
            self.taken(meta.num_messages_in_batch if meta.has_num_messages_in_batch() else 1)
            return
        queue = self.queue
        if self.conf.deliver_entries:
            count = meta.num_messages_in_batch if meta.has_num_messages_in_batch() else 0
            self.received += count or 1
            queue.put_entry(ReceivedEntry(
                EntryInfo(ledger, entry, self.partition, count, meta, cmd.redelivery_count,
                          self, self.topic), data))
            return
        if meta.has_num_messages_in_batch():
            count = meta.num_messages_in_batch
            info = EntryInfo(ledger, entry, self.partition, count, meta, cmd.redelivery_count,
                             self, self.topic)
            ack_set = cmd.ack_set
            if not ack_set and not meta.compacted_batch_indexes:
                messages = plain_batch(data, count, info)
                if messages is not None:
                    self.received += len(messages)
                    queue.put_many(messages)
                    return
            try:
                entries = split_batch(data, count)
            except DecodeError as exc:
                log.warning("%r: bad batch %d:%d: %s", self, ledger, entry, exc)
                self._discard(mid, ValidationError.BatchDeSerializeError, count)
                return
            if ack_set or meta.compacted_batch_indexes:
                messages = filter_batch(entries, info, ack_set, meta.compacted_batch_indexes)
                skipped = count - len(messages)
                if skipped:
                    self.taken(skipped)
            else:
                messages = [Message(d, i, info, s) for i, (d, s) in enumerate(entries)]
            self.received += len(messages)
            queue.put_many(messages)
        else:
            info = EntryInfo(ledger, entry, self.partition, 0, meta, cmd.redelivery_count,
                             self, self.topic)
            self.received += 1
            queue.put(Message(data, -1, info, None))

    def _chunk_received(self, cmd: pb.CommandMessage, meta: pb.MessageMetadata, data: bytes,
                        ledger: int, entry: int, cnx: ClientConnection) -> None:
        """One chunk of a chunked message (``consumer.chunks``): delivered once complete."""
        if self.tracker.is_duplicate(ledger, entry):
            self.taken(1)
            return
        chunks = self._chunks
        if chunks is None:
            conf = self.conf
            chunks = self._chunks = ChunkAssembler(
                ChunkLimits(conf.max_pending_chunked_message,
                            conf.auto_ack_oldest_chunked_message_on_queue_full,
                            conf.expire_time_of_incomplete_chunked_message_ms),
                self._ack_chunks, self.taken, repr(self))
        whole = chunks.add(meta, data, (ledger, entry))
        if whole is None:
            return
        data = whole.data
        meta = whole.metadata
        if meta.compression is not _NO_COMPRESSION:
            try:
                data = decompress(meta.compression.name, data, meta.uncompressed_size,
                                  max_size=max(meta.uncompressed_size, cnx.max_message_size))
            except (DecodeError, ValueError) as exc:
                log.warning("%r: cannot decompress chunked message %s: %s", self, meta.uuid,
                            exc)
                self._ack_chunks(whole.positions)
                self.taken(1)
                return
        info = EntryInfo(ledger, entry, self.partition, 0, meta, cmd.redelivery_count, self,
                         self.topic)
        ids = [MessageId(self.partition, chunk_ledger, chunk_entry, -1)
               for chunk_ledger, chunk_entry in whole.positions]
        self.received += 1
        self.queue.put(ChunkedMessage(data, info, ids))

    def _ack_chunks(self, positions: list[tuple[int, int]]) -> None:
        for ledger, entry in positions:
            self.tracker.add(ledger, entry)

    def corrupt_message_received(self, cmd: pb.CommandMessage, payload: Payload | None,
                                 cnx: ClientConnection) -> None:
        """A MESSAGE whose checksum failed: never delivered, acked as ChecksumMismatch."""
        if cnx is not self.cnx:
            return
        if payload is not None:
            meta = payload.metadata
            count = meta.num_messages_in_batch if meta.has_num_messages_in_batch() else 1
        else:
            # The metadata is not trusted (nor decoded), so how many permits the broker counted
            # for the entry is unknown: grant a refill's worth rather than risk a consumer that
            # waits forever for permits the broker thinks it still has.
            count = self.refill
        log.warning("%r: message %d:%d failed its checksum; discarding it", self,
                    cmd.message_id.ledgerId, cmd.message_id.entryId)
        self._discard(cmd.message_id, ValidationError.ChecksumMismatch, count)

    def _discard(self, mid: pb.MessageIdData, error: pb.CommandAck.ValidationError,
                 permits: int) -> None:
        cnx = self.cnx
        if cnx is not None:
            try:
                cnx.write_command(pb.BaseCommand(type_=T.ACK, ack=pb.CommandAck(
                    consumer_id=self.consumer_id, ack_type=AckType.Individual,
                    message_id=[pb.MessageIdData(ledgerId=mid.ledgerId, entryId=mid.entryId)],
                    validation_error=error)))
            except ConnectionError:
                pass
        self.taken(permits)

    def reached_end_of_topic(self) -> None:
        self.reached_end = True
        self.queue.wake()

    def active_changed(self, is_active: bool) -> None:
        self.active = is_active

    # ---- acknowledging ----------------------------------------------------------------------

    def ack_id(self, mid: MessageId) -> None:
        if isinstance(mid, ChunkMessageId):
            for chunk in mid.chunk_message_ids():
                self.tracker.add(chunk.ledger_id(), chunk.entry_id())
            return
        ledger, entry = mid.ledger_id(), mid.entry_id()
        size, index = mid.batch_size(), mid.batch_index()
        if index >= 0 and size > 1:
            key = (ledger, entry)
            acked = self._partial_by_id.get(key)
            if acked is None:
                acked = self._partial_by_id[key] = bytearray(size)
            acked[index] = 1
            if not all(acked):
                if self.conf.batch_index_ack_enabled:
                    self.tracker.add_partial(ledger, entry, acked, size)
                return
            del self._partial_by_id[key]
        self.tracker.add(ledger, entry)

    def ack_cumulative(self, ledger: int, entry: int, index: int, size: int,
                       info: EntryInfo | None) -> None:
        if self._is_shared:
            raise errors.CumulativeAcknowledgementNotAllowedError(
                "cumulative acknowledgement is not allowed on Shared or Key_Shared "
                "subscriptions")
        if index >= 0 and size > 1 and index < size - 1:
            # Part of a batch: everything before this entry is done; this entry is only
            # done up to ``index``.
            if info is not None:
                acked = info.acked
                if acked is None:
                    acked = info.acked = bytearray(size)
                for i in range(index + 1):
                    if not acked[i]:
                        acked[i] = 1
                        info.unacked -= 1
            if self.conf.batch_index_ack_enabled:
                flags = bytearray(size)
                flags[: index + 1] = b"\x01" * (index + 1)
                self.tracker.add_cumulative(ledger, entry, ack_set_words(flags, size))
            elif entry > 0:
                self.tracker.add_cumulative(ledger, entry - 1)
            return
        self.tracker.add_cumulative(ledger, entry)

    def _send_acks(self, individual: list[Position], partial: dict[Position, list[int]],
                   cumulative: tuple[int, int, list[int]] | None) -> None:
        unacked = self.unacked
        if unacked is not None:
            unacked.acked(self, individual)
            if cumulative is not None:
                unacked.acked_upto(self, cumulative[:2])
        cnx = self.cnx
        if cnx is None:
            return  # the broker redelivers what was not acknowledged
        try:
            for body in build_ack_commands(self.consumer_id, individual, partial, cumulative):
                cnx.write_command(pb.BaseCommand(type_=T.ACK, ack=body))
        except ConnectionError:
            pass

    def negative_ack(self, ledger: int, entry: int, delay: float | None = None) -> None:
        self.nacks.add(ledger, entry, delay)

    def redeliver(self, positions: list[Position]) -> None:
        """Ask for these entries again (all unacknowledged ones on Exclusive and Failover)."""
        self._send_redeliver(positions)

    def _send_redeliver(self, positions: list[Position]) -> None:
        cnx = self.cnx
        if cnx is None:
            return
        if not self._is_shared:
            # Exclusive and Failover redeliver everything unacknowledged, from the cursor.
            self.redeliver_all()
            return
        ids = [pb.MessageIdData(ledgerId=ledger & 0xFFFF_FFFF_FFFF_FFFF,
                                entryId=entry & 0xFFFF_FFFF_FFFF_FFFF)
               for ledger, entry in positions]
        try:
            cnx.write_command(pb.BaseCommand(
                type_=T.REDELIVER_UNACKNOWLEDGED_MESSAGES,
                redeliverUnacknowledgedMessages=pb.CommandRedeliverUnacknowledgedMessages(
                    consumer_id=self.consumer_id, message_ids=ids)))
        except ConnectionError:
            pass

    def redeliver_all(self) -> None:
        cnx = self.cnx
        if cnx is None:
            return
        if self.unacked is not None:
            # All of them come again: their ack timeouts start again when they are taken.
            self.unacked.clear(self)
        dropped = self.queue.drop(self)
        try:
            cnx.write_command(pb.BaseCommand(
                type_=T.REDELIVER_UNACKNOWLEDGED_MESSAGES,
                redeliverUnacknowledgedMessages=pb.CommandRedeliverUnacknowledgedMessages(
                    consumer_id=self.consumer_id)))
        except ConnectionError:
            return
        if dropped:
            self.taken(dropped)

    # ---- seek, unsubscribe, close -----------------------------------------------------------

    async def seek(self, message_id: MessageId | None, timestamp: int | None) -> None:
        cnx = self.cnx
        if cnx is None:
            raise errors.NotConnected(f"{self!r} is not connected")
        self.tracker.flush()
        try:
            await cnx.requests.seek(
                self.consumer_id,
                message_id=message_id.to_proto() if message_id is not None else None,
                message_publish_time=timestamp)
        except Exception as exc:
            raise errors.wrap_error(exc, "seek") from None
        self.tracker.clear()
        self.nacks.clear()
        self._partial_by_id.clear()
        if self._chunks is not None:
            self._chunks.clear()
        dropped = self.queue.drop(self)
        if dropped and self.cnx is cnx:
            self.taken(dropped)

    async def get_last_message_id(self) -> MessageId:
        answer = await self._last_message_id_answer()
        return MessageId.from_proto(answer.last_message_id, self.partition)

    async def _last_message_id_answer(self) -> pb.CommandGetLastMessageIdResponse:
        cnx = self.cnx
        if cnx is None:
            raise errors.NotConnected(f"{self!r} is not connected")
        try:
            return await cnx.requests.get_last_message_id(
                self.consumer_id, timeout=self.session.operation_timeout)
        except Exception as exc:
            raise errors.wrap_error(exc, "get_last_message_id") from None

    async def unsubscribe(self) -> None:
        cnx = self.cnx
        if cnx is None:
            raise errors.NotConnected(f"{self!r} is not connected")
        self.tracker.flush()
        try:
            await cnx.requests.unsubscribe(self.consumer_id)
        except Exception as exc:
            raise errors.wrap_error(exc, "unsubscribe") from None
        self._closed(cnx)

    async def close(self) -> None:
        if self.state in (HandleState.CLOSED, HandleState.CLOSING):
            return
        self.tracker.flush()
        self.state = HandleState.CLOSING
        self._stop_reconnecting()
        cnx = self.cnx
        if cnx is not None and cnx.is_open:
            try:
                await cnx.requests.close_consumer(self.consumer_id,
                                                  timeout=self.session.operation_timeout)
            except Exception as exc:
                log.debug("%r: CLOSE_CONSUMER failed: %s", self, exc)
        self._closed(cnx)

    def _closed(self, cnx: ClientConnection | None) -> None:
        self.state = HandleState.CLOSED
        self.tracker.clear()
        self.nacks.clear()
        if self._chunks is not None:
            self._chunks.clear()
        if cnx is not None:
            cnx.consumers.pop(self.consumer_id, None)
        self.cnx = None
