"""Consumers: subscriptions, flow control, receive, acknowledgements, redelivery, seek.

``Consumer`` is what applications hold; it owns the receive queue. For a partitioned topic it
subscribes one ``_TopicConsumer`` per partition, all feeding the same queue; otherwise one.

Flow control follows the official clients: after subscribing, a consumer grants the broker
``receiver_queue_size`` permits (FLOW) and grants more, in one FLOW, each time the application
has taken half that many messages out of the queue. A batch uses one permit per message.

Hot path (MESSAGE -> ``receive`` -> ``acknowledge``): the frame is decoded once; its payload is
decompressed once; a batch whose entries hold no per-message metadata beyond payload size and
sequence id is read straight into ``Message``s by ``_plain_batch`` (a column check and one
slice per message when all entries have the same size), any other by ``batching.split_batch``
(which decodes per-message metadata only when there is some beyond the payload size); every
message is a four-slot ``Message`` sharing one ``EntryInfo``. ``receive`` pops from a deque
and counts a permit; it only suspends when the queue is empty. ``acknowledge`` marks the
message's position in its entry's flags and, once the whole entry is acknowledged, adds one
``(ledger, entry)`` pair to the grouping tracker, which sends one ACK per 100 ms or 1000
entries. A FLOW goes to the socket at once (the receive loop may not yield again until the
queue is empty).

A MESSAGE whose checksum fails is never delivered: it is acknowledged at once with
validation error ChecksumMismatch (and its permits are returned).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import uuid
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from struct import Struct
from struct import error as struct_error
from typing import TYPE_CHECKING, Literal

from protoframe.clients.pulsar import errors
from protoframe.clients.pulsar.acks import (
    AckGroupingTracker,
    NegativeAckTracker,
    Position,
    ack_set_words,
    build_ack_commands,
)
from protoframe.clients.pulsar.batching import split_batch
from protoframe.clients.pulsar.connection import ClientConnection
from protoframe.clients.pulsar.message import EntryInfo, Message, MessageId, ReceivedEntry
from protoframe.clients.pulsar.producer import RETRIABLE
from protoframe.generated.pulsar import pulsar_api as pb
from protoframe.generated.pulsar.frames import Payload
from protoframe.runtime.codec.compression import decompress
from protoframe.runtime.errors import DecodeError
from protoframe.runtime.io.backoff import Backoff

if TYPE_CHECKING:
    from protoframe.clients.pulsar.client import PulsarClient

__all__ = ["Consumer", "ConsumerType", "InitialPosition"]

log = logging.getLogger(__name__)

T = pb.BaseCommand.Type
SubType = pb.CommandSubscribe.SubType
AckType = pb.CommandAck.AckType
ValidationError = pb.CommandAck.ValidationError
_NO_COMPRESSION = pb.CompressionType.NONE


_unpack_u32 = Struct(">I").unpack_from


def _plain_batch(buf: bytes, count: int, info: EntryInfo) -> list[Message] | None:
    """The messages of a batched payload whose entries' metadata all hold ``payload_size``
    (below 16 KiB) and at most ``sequence_id`` after it (what producers write when messages
    have no key, properties or event time), read in one pass straight into ``Message``s; None
    for anything else, which ``split_batch`` then reads (and rejects, if it is malformed).

    Takes only entries that ``split_batch``'s fast path takes (which reads them the same way,
    with no per-message metadata), so the messages are the ones it would give; whatever this
    does not take (longer size varints included), ``split_batch`` still reads or rejects.
    """
    if count > 1:
        messages = _uniform_batch(buf, count, info)
        if messages is not None:
            return messages
    out: list[Message] = []
    append = out.append
    unpack = _unpack_u32
    pos = 0
    end = len(buf)
    index = 0
    try:
        while pos < end:
            mstart = pos + 4
            mend = mstart + unpack(buf, pos)[0]
            if mend > end or mend == mstart or buf[mstart] != 0x18:  # payload_size first
                return None
            size = buf[mstart + 1]
            if size < 0x80:
                p = mstart + 2
            else:
                high = buf[mstart + 2]
                if high >= 0x80:
                    return None
                size = (size & 0x7F) | (high << 7)
                p = mstart + 3
            if p != mend:
                # Only a sequence_id (field 8, varint) may follow, ending the metadata.
                if p > mend or buf[p] != 0x40:
                    return None
                q = p + 1
                while buf[q] >= 0x80:
                    q += 1
                if q + 1 != mend:
                    return None
            pos = mend + size
            if pos > end:
                return None
            append(Message(buf[mend:pos], index, info, None))
            index += 1
    except (IndexError, struct_error):
        return None
    if count >= 0 and index != count:
        return None
    return out


def _uniform_batch(buf: bytes, count: int, info: EntryInfo) -> list[Message] | None:
    """``_plain_batch`` for a batch of fixed-size records (see ``uniform_layout``)."""
    layout = uniform_layout(buf, count)
    if layout is None:
        return None
    header, size, stride = layout
    return [Message(buf[o:o + size], i, info, None)
            for i, o in enumerate(range(header, header + len(buf), stride))]


def uniform_layout(buf: bytes, count: int) -> tuple[int, int, int] | None:
    """(header, payload size, stride) when a batched payload is ``count`` records that all have
    the same layout (payloads of one size, sequence ids of one varint length), checked a
    column at a time; None when it is not so regular.

    Record ``i``'s payload is then ``buf[header + i * stride:][:size]``, and it has no
    per-message metadata beyond ``payload_size`` and ``sequence_id``.

    Entries of the same size tile the buffer with a fixed stride, so ``buf[k::stride]`` is byte
    ``k`` of every entry. Every byte up to the sequence id's value (the size prefix, the
    ``payload_size`` field, the ``sequence_id`` tag) must be the same in every entry; the
    sequence id's bytes must all carry the continuation bit but the last, which must not.
    Then every entry is one that ``split_batch``'s fast path accepts.
    """
    end = len(buf)
    if end < 8:  # two entries hold at least 12 bytes
        return None
    msize = _unpack_u32(buf, 0)[0]
    mend = 4 + msize
    if mend > end or msize == 0 or buf[4] != 0x18:
        return None
    size = buf[5]
    if size < 0x80:
        p = 6
    else:
        high = buf[6]
        if high >= 0x80:
            return None
        size = (size & 0x7F) | (high << 7)
        p = 7
    stride = mend + size
    if stride * count != end:
        return None
    if p != mend:
        if p > mend or buf[p] != 0x40 or mend - p > 11:
            return None
        fixed = p + 1  # through the sequence_id tag
    else:
        fixed = p
    for k in range(fixed):
        if buf[k::stride].count(buf[k]) != count:
            return None
    if fixed != mend:
        last = mend - 1
        for k in range(fixed, last):
            if min(buf[k::stride]) < 0x80:
                return None
        if max(buf[last::stride]) >= 0x80:
            return None
    return mend, size, stride


def entry_messages(entry: ReceivedEntry) -> list[Message]:
    """The messages of an entry that ``Consumer.receive_entries`` delivered.

    Raises a ``DecodeError`` subclass when its batch does not split.
    """
    info = entry.info
    if not info.batch_size:
        return [Message(entry.data, -1, info, None)]
    messages = _plain_batch(entry.data, info.batch_size, info)
    if messages is not None:
        return messages
    return [Message(d, i, info, s)
            for i, (d, s) in enumerate(split_batch(entry.data, info.batch_size))]


class ConsumerType(enum.Enum):
    """Subscription types (the official client's names)."""

    Exclusive = "Exclusive"
    Shared = "Shared"
    Failover = "Failover"
    KeyShared = "Key_Shared"

    @property
    def sub_type(self) -> pb.CommandSubscribe.SubType:
        return pb.CommandSubscribe.SubType[str(self.value)]


class InitialPosition(enum.Enum):
    """Where a new subscription starts."""

    Latest = "latest"
    Earliest = "earliest"


SubscriptionTypeName = Literal["Exclusive", "Shared", "Failover", "Key_Shared", "KeyShared",
                               "exclusive", "shared", "failover", "key_shared"]
InitialPositionName = Literal["latest", "earliest", "Latest", "Earliest"]


def parse_sub_type(value: ConsumerType | pb.CommandSubscribe.SubType | str
                   ) -> pb.CommandSubscribe.SubType:
    if isinstance(value, ConsumerType):
        return value.sub_type
    if isinstance(value, pb.CommandSubscribe.SubType):
        return value
    key = value.replace("_", "").lower()
    for sub in SubType:
        if sub.name.replace("_", "").lower() == key:
            return sub
    raise errors.InvalidConfiguration(f"unknown subscription type {value!r}")


def parse_initial_position(value: InitialPosition | pb.CommandSubscribe.InitialPosition | str
                           ) -> pb.CommandSubscribe.InitialPosition:
    if isinstance(value, InitialPosition):
        value = value.value
    if isinstance(value, pb.CommandSubscribe.InitialPosition):
        return value
    lowered = value.lower()
    if lowered == "earliest":
        return pb.CommandSubscribe.InitialPosition.Earliest
    if lowered == "latest":
        return pb.CommandSubscribe.InitialPosition.Latest
    raise errors.InvalidConfiguration(f"unknown initial position {value!r}")


@dataclass
class ConsumerConfig:
    sub_type: pb.CommandSubscribe.SubType = SubType.Exclusive
    initial_position: pb.CommandSubscribe.InitialPosition = \
        pb.CommandSubscribe.InitialPosition.Latest
    receiver_queue_size: int = 1000
    consumer_name: str | None = None
    negative_ack_redelivery_delay_ms: int = 60000
    ack_group_time_ms: int = 100
    ack_group_max_size: int = 1000
    batch_index_ack_enabled: bool = False
    properties: dict[str, str] = field(default_factory=dict)
    durable: bool = True
    read_compacted: bool = False
    replicate_subscription_state: bool = False
    priority_level: int | None = None
    key_shared_mode: pb.KeySharedMode = pb.KeySharedMode.AUTO_SPLIT
    key_shared_ranges: list[tuple[int, int]] = field(default_factory=list)
    allow_out_of_order_delivery: bool = False
    start_message_id: MessageId | None = None
    deliver_entries: bool = False


class _State(enum.Enum):
    CONNECTING = 0
    READY = 1
    CLOSING = 2
    CLOSED = 3
    FAILED = 4


_FATAL = (errors.AuthorizationError, errors.AuthenticationError, errors.TopicNotFound,
          errors.SubscriptionNotFound, errors.InvalidTopicName, errors.IncompatibleSchema,
          errors.NotAllowedError, errors.ConsumerAssignError)


class _TopicConsumer:
    """A consumer on one topic or partition; feeds its parent's queue."""

    def __init__(self, client: PulsarClient, parent: Consumer, topic: str, partition: int,
                 subscription: str, conf: ConsumerConfig, consumer_id: int) -> None:
        self.client = client
        self.parent = parent
        self.topic = topic
        self.partition = partition
        self.subscription = subscription
        self.conf = conf
        self.consumer_id = consumer_id
        self.consumer_name = conf.consumer_name or uuid.uuid4().hex[:10]
        self.cnx: ClientConnection | None = None
        self.state = _State.CONNECTING
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
        self._reconnect_task: asyncio.Task[None] | None = None
        self._is_shared = conf.sub_type in (SubType.Shared, SubType.Key_Shared)
        self.received = 0
        self.index_acks = conf.batch_index_ack_enabled  # read per acknowledged message

    def __repr__(self) -> str:
        return f"<consumer {self.consumer_name} on {self.topic} / {self.subscription}>"

    # ---- connecting -------------------------------------------------------------------------

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.client.operation_timeout
        backoff = Backoff(0.1, 2.0)
        while True:
            try:
                await self._connect()
                return
            except RETRIABLE as exc:
                delay = backoff.next()
                if loop.time() + delay > deadline:
                    self.state = _State.FAILED
                    raise errors.wrap_error(exc, f"subscribe to {self.topic}") from exc
                log.info("%r: could not subscribe yet (%s); retrying in %.2f s", self, exc,
                         delay)
                await asyncio.sleep(delay)
            except BaseException:
                self.state = _State.FAILED
                raise

    async def _connect(self) -> None:
        client = self.client
        conf = self.conf
        address = await client.lookup.find_broker(self.topic)
        cnx = await client.get_connection(address.logical, address.physical)
        if self.state in (_State.CLOSING, _State.CLOSED):
            raise errors.AlreadyClosed(f"{self!r} was closed")
        key_shared = None
        if conf.sub_type is SubType.Key_Shared:
            key_shared = pb.KeySharedMeta(
                keySharedMode=conf.key_shared_mode,
                hashRanges=[pb.IntRange(start=a, end=b) for a, b in conf.key_shared_ranges]
                or None,
                allowOutOfOrderDelivery=conf.allow_out_of_order_delivery or None)
        start_id = conf.start_message_id.to_proto() if conf.start_message_id else None
        # Messages still queued from the old connection will come again: drop them first.
        self.parent._drop_queued(self)
        cnx.consumers[self.consumer_id] = self
        try:
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
            )
        except BaseException as exc:
            if cnx.consumers.get(self.consumer_id) is self:
                del cnx.consumers[self.consumer_id]
            raise errors.wrap_error(exc, f"subscribe to {self.topic}") from None
        if self.state in (_State.CLOSING, _State.CLOSED):
            cnx.consumers.pop(self.consumer_id, None)
            return
        if not cnx.is_open:  # lost between the answer and now: its close listener missed us
            raise errors.ConnectError(f"{cnx!r} closed while subscribing {self!r}")
        self.cnx = cnx
        self.state = _State.READY
        self.permits = 0
        self._flow(self.queue_size)

    def connection_closed(self, cnx: ClientConnection, exc: BaseException) -> None:
        if cnx is not self.cnx:
            return
        self._disconnected()

    def closed_by_broker(self, cnx: ClientConnection) -> None:
        if cnx is not self.cnx:
            return
        log.info("%r: closed by the broker; subscribing again", self)
        self._disconnected()

    def _disconnected(self) -> None:
        self.cnx = None
        if self.state is _State.READY:
            self.state = _State.CONNECTING
        if self.state is _State.CONNECTING and (
                self._reconnect_task is None or self._reconnect_task.done()):
            self._reconnect_task = asyncio.ensure_future(self._reconnect())

    async def _reconnect(self) -> None:
        backoff = Backoff(0.1, 30.0)
        while self.state is _State.CONNECTING:
            await asyncio.sleep(backoff.next())
            if self.state is not _State.CONNECTING:
                return
            try:
                await self._connect()
                return
            except _FATAL as exc:
                log.warning("%r: cannot subscribe again: %s", self, exc)
                self.state = _State.FAILED
                self.parent._child_failed(self, exc)
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.info("%r: resubscribe failed (%s); retrying", self, exc)

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
        parent = self.parent
        if self.conf.deliver_entries:
            count = meta.num_messages_in_batch if meta.has_num_messages_in_batch() else 0
            self.received += count or 1
            parent._enqueue_entry(ReceivedEntry(
                EntryInfo(ledger, entry, self.partition, count, meta, cmd.redelivery_count,
                          self, self.topic), data))
            return
        if meta.has_num_messages_in_batch():
            count = meta.num_messages_in_batch
            info = EntryInfo(ledger, entry, self.partition, count, meta, cmd.redelivery_count,
                             self, self.topic)
            ack_set = cmd.ack_set
            if not ack_set and not meta.compacted_batch_indexes:
                messages = _plain_batch(data, count, info)
                if messages is not None:
                    self.received += len(messages)
                    parent._enqueue_many(messages)
                    return
            try:
                entries = split_batch(data, count)
            except DecodeError as exc:
                log.warning("%r: bad batch %d:%d: %s", self, ledger, entry, exc)
                self._discard(mid, ValidationError.BatchDeSerializeError, count)
                return
            if ack_set or meta.compacted_batch_indexes:
                messages = self._filter_batch(entries, info, ack_set,
                                              meta.compacted_batch_indexes)
                skipped = count - len(messages)
                if skipped:
                    self.taken(skipped)
            else:
                messages = [Message(d, i, info, s) for i, (d, s) in enumerate(entries)]
            self.received += len(messages)
            parent._enqueue_many(messages)
        else:
            info = EntryInfo(ledger, entry, self.partition, 0, meta, cmd.redelivery_count,
                             self, self.topic)
            self.received += 1
            parent._enqueue(Message(data, -1, info, None))

    def _filter_batch(self, entries: list[tuple[bytes, pb.SingleMessageMetadata | None]],
                      info: EntryInfo, ack_set: list[int], compacted: list[int]
                      ) -> list[Message]:
        mask = -1
        if ack_set:
            mask = 0
            for i, word in enumerate(ack_set):
                mask |= (word & 0xFFFF_FFFF_FFFF_FFFF) << (64 * i)
        keep = set(compacted) if compacted else None
        out: list[Message] = []
        acked = bytearray(info.batch_size)
        for i, (d, s) in enumerate(entries):
            if not (mask >> i) & 1 or (keep is not None and i not in keep) or \
                    (s is not None and s.compacted_out):
                acked[i] = 1
                continue
            out.append(Message(d, i, info, s))
        info.acked = acked
        info.unacked = len(out)
        return out

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
        self.parent._wake()

    def active_changed(self, is_active: bool) -> None:
        self.active = is_active

    # ---- acknowledging ----------------------------------------------------------------------

    def ack_message(self, msg: Message) -> None:
        info = msg._entry
        size = info.batch_size
        if size:
            acked = info.acked
            if acked is None:
                acked = info.acked = bytearray(size)
            index = msg._index
            if acked[index]:
                return
            acked[index] = 1
            info.unacked -= 1
            if info.unacked > 0:
                if self.index_acks:
                    self.tracker.add_partial(info.ledger_id, info.entry_id, acked, size)
                return
        self.tracker.add(info.ledger_id, info.entry_id)

    def ack_id(self, mid: MessageId) -> None:
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
        cnx = self.cnx
        if cnx is None:
            return  # the broker redelivers what was not acknowledged
        try:
            for body in build_ack_commands(self.consumer_id, individual, partial, cumulative):
                cnx.write_command(pb.BaseCommand(type_=T.ACK, ack=body))
        except ConnectionError:
            pass

    def negative_ack(self, ledger: int, entry: int) -> None:
        self.nacks.add(ledger, entry)

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
        dropped = self.parent._drop_queued(self)
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
        dropped = self.parent._drop_queued(self)
        if dropped and self.cnx is cnx:
            self.taken(dropped)

    async def get_last_message_id(self) -> MessageId:
        cnx = self.cnx
        if cnx is None:
            raise errors.NotConnected(f"{self!r} is not connected")
        try:
            answer = await cnx.requests.get_last_message_id(
                self.consumer_id, timeout=self.client.operation_timeout)
        except Exception as exc:
            raise errors.wrap_error(exc, "get_last_message_id") from None
        return MessageId.from_proto(answer.last_message_id, self.partition)

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
        if self.state in (_State.CLOSED, _State.CLOSING):
            return
        self.tracker.flush()
        self.state = _State.CLOSING
        if self._reconnect_task is not None:
            self._reconnect_task.cancel()
        cnx = self.cnx
        if cnx is not None and cnx.is_open:
            try:
                await cnx.requests.close_consumer(self.consumer_id,
                                                  timeout=self.client.operation_timeout)
            except Exception as exc:
                log.debug("%r: CLOSE_CONSUMER failed: %s", self, exc)
        self._closed(cnx)

    def _closed(self, cnx: ClientConnection | None) -> None:
        self.state = _State.CLOSED
        self.tracker.clear()
        self.nacks.clear()
        if cnx is not None:
            cnx.consumers.pop(self.consumer_id, None)
        self.cnx = None

    def is_connected(self) -> bool:
        return self.state is _State.READY and self.cnx is not None and self.cnx.is_open


def _release(taken: Iterable[tuple[_TopicConsumer | None, int]]) -> None:
    """Tell each topic consumer how many of its messages the application took (flow control)."""
    counts: dict[_TopicConsumer, int] = {}
    for owner, n in taken:
        if owner is not None:
            counts[owner] = counts.get(owner, 0) + n
    for owner, n in counts.items():
        owner.taken(n)


class Consumer:
    """A subscription's consumer on a topic (all of its partitions, if it has several)."""

    def __init__(self, client: PulsarClient, topic: str, subscription: str,
                 conf: ConsumerConfig) -> None:
        self._client = client
        self._topic = topic
        self._subscription = subscription
        self._conf = conf
        self._children: list[_TopicConsumer] = []
        self._by_partition: dict[int, _TopicConsumer] = {}
        self._queue: deque[Message] = deque()
        self._entries: deque[ReceivedEntry] = deque()  # with deliver_entries instead
        # One future per waiting receive(): cancelling one wait must not disturb the others.
        self._waiters: list[asyncio.Future[None]] = []
        self._closed = False
        self._error: BaseException | None = None

    def _attach(self, children: list[_TopicConsumer]) -> None:
        self._children = children
        self._by_partition = {c.partition: c for c in children}

    # ---- the queue --------------------------------------------------------------------------

    def _enqueue(self, msg: Message) -> None:
        self._queue.append(msg)
        if self._waiters:
            self._wake()

    def _enqueue_many(self, msgs: list[Message]) -> None:
        self._queue.extend(msgs)
        if self._waiters:
            self._wake()

    def _enqueue_entry(self, entry: ReceivedEntry) -> None:
        self._entries.append(entry)
        if self._waiters:
            self._wake()

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _drop_queued(self, child: _TopicConsumer) -> int:
        """Remove ``child``'s messages from the queue; return how many there were."""
        if self._entries:
            kept_entries = deque(e for e in self._entries if e.info.consumer is not child)
            dropped_messages = sum(e.info.batch_size or 1 for e in self._entries
                                   if e.info.consumer is child)
            self._entries = kept_entries
            return dropped_messages
        queue = self._queue
        if not queue:
            return 0
        if len(self._children) <= 1:
            dropped = len(queue)
            queue.clear()
            return dropped
        kept = deque(m for m in queue if m._entry.consumer is not child)
        dropped = len(queue) - len(kept)
        self._queue = kept
        return dropped

    def _child_failed(self, child: _TopicConsumer, exc: BaseException) -> None:
        self._error = exc
        self._wake()

    async def receive(self, timeout_millis: int | None = None) -> Message:
        """The next message; waits for one (at most ``timeout_millis``, then ``Timeout``)."""
        if self._conf.deliver_entries:
            raise TypeError("this consumer delivers entries: use receive_entries()")
        try:
            msg = self._queue.popleft()
        except IndexError:
            await self._wait(timeout_millis)
            msg = self._queue.popleft()
        child = msg._entry.consumer
        if child is not None:
            permits = child.permits + 1
            if permits >= child.refill:
                child.taken(1)
            else:
                child.permits = permits
        return msg

    async def batch_receive(self, max_messages: int = 1000,
                            timeout_millis: int | None = None) -> list[Message]:
        """The messages already received, ``max_messages`` at most, waiting for at least one.

        For readers that handle messages in bulk: one call instead of one ``receive`` per
        message. Waits as ``receive`` does when nothing is queued.
        """
        if max_messages < 1:
            raise ValueError("max_messages must be at least 1")
        if self._conf.deliver_entries:
            raise TypeError("this consumer delivers entries: use receive_entries()")
        if not self._queue:
            await self._wait(timeout_millis)
        queue = self._queue
        if len(queue) <= max_messages:
            msgs = list(queue)
            queue.clear()
        else:
            msgs = [queue.popleft() for _ in range(max_messages)]
        if len(self._children) == 1:
            self._children[0].taken(len(msgs))
        else:
            _release((m._entry.consumer, 1) for m in msgs)
        return msgs

    async def receive_entries(self, max_entries: int = 100,
                              timeout_millis: int | None = None) -> list[ReceivedEntry]:
        """For a consumer subscribed with ``deliver_entries=True``: the entries received so
        far, whole and not yet split into messages, ``max_entries`` at most, waiting for at
        least one as ``receive`` waits for a message.

        For bulk readers that do not acknowledge (the Spark data source): a batch entry costs
        one object instead of one per message. ``entry_messages`` splits one when needed.
        Entries are delivered as the broker sent them: an ack set on a batch (what a durable
        subscription's partial acknowledgements leave) is not applied.
        """
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        if not self._conf.deliver_entries:
            raise TypeError("this consumer delivers messages: subscribe with "
                            "deliver_entries=True to receive entries")
        if not self._entries:
            await self._wait(timeout_millis)
        entries = self._entries
        taken = [entries.popleft() for _ in range(min(max_entries, len(entries)))]
        _release((e.info.consumer, e.info.batch_size or 1) for e in taken)
        return taken

    async def _wait(self, timeout_millis: int | None) -> None:
        loop = asyncio.get_running_loop()
        deadline = None if timeout_millis is None else loop.time() + timeout_millis / 1000.0
        while not self._queue and not self._entries:
            if self._closed:
                raise errors.AlreadyClosed("the consumer is closed")
            if self._error is not None:
                raise self._error
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                raise errors.Timeout(f"no message within {timeout_millis} ms")
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append(waiter)
            try:
                if remaining is None:
                    await waiter
                else:
                    await asyncio.wait_for(waiter, remaining)
            except TimeoutError:
                raise errors.Timeout(f"no message within {timeout_millis} ms") from None
            finally:
                if not waiter.done() or waiter.cancelled():
                    with contextlib.suppress(ValueError):
                        self._waiters.remove(waiter)

    def __aiter__(self) -> Consumer:
        return self

    async def __anext__(self) -> Message:
        try:
            return await self.receive()
        except errors.AlreadyClosed:
            raise StopAsyncIteration from None

    # ---- acknowledging ----------------------------------------------------------------------

    def _child_of(self, mid: MessageId) -> _TopicConsumer:
        child = self._by_partition.get(mid.partition())
        if child is None:
            if len(self._children) == 1:
                return self._children[0]
            raise errors.InvalidConfiguration(f"{mid} is not from this consumer's partitions")
        return child

    async def acknowledge(self, message: Message | MessageId) -> None:
        """Acknowledge one message (sent grouped: within 100 ms or per 1000)."""
        # ``acknowledge_nowait`` and ``_TopicConsumer.ack_message`` inlined (the hot path): a
        # message of a batch only marks its flag until the last one of its entry.
        if type(message) is Message:
            info = message._entry
            child = info.consumer
            if child is None:
                return
            size = info.batch_size
            if size:
                acked = info.acked
                if acked is None:
                    acked = info.acked = bytearray(size)
                index = message._index
                if acked[index]:
                    return
                acked[index] = 1
                unacked = info.unacked - 1
                info.unacked = unacked
                if unacked > 0:
                    if child.index_acks:
                        child.tracker.add_partial(info.ledger_id, info.entry_id, acked, size)
                    return
            child.tracker.add(info.ledger_id, info.entry_id)
            return
        self.acknowledge_nowait(message)

    def acknowledge_nowait(self, message: Message | MessageId) -> None:
        """``acknowledge`` without the coroutine (for synchronous callers and hot loops)."""
        if type(message) is Message:
            # ``_TopicConsumer.ack_message`` inlined, as in ``acknowledge``.
            info = message._entry
            child = info.consumer
            if child is None:
                return
            size = info.batch_size
            if size:
                acked = info.acked
                if acked is None:
                    acked = info.acked = bytearray(size)
                index = message._index
                if acked[index]:
                    return
                acked[index] = 1
                unacked = info.unacked - 1
                info.unacked = unacked
                if unacked > 0:
                    if child.index_acks:
                        child.tracker.add_partial(info.ledger_id, info.entry_id, acked, size)
                    return
            child.tracker.add(info.ledger_id, info.entry_id)
            return
        if isinstance(message, MessageId):
            self._child_of(message).ack_id(message)
            return
        raise TypeError(f"cannot acknowledge {message!r}")

    async def acknowledge_cumulative(self, message: Message | MessageId) -> None:
        """Acknowledge every message up to and including this one (not on Shared types)."""
        if isinstance(message, Message):
            info = message._entry
            child = info.consumer
            if child is not None:
                child.ack_cumulative(info.ledger_id, info.entry_id, message._index,
                                     info.batch_size, info)
            return
        child = self._child_of(message)
        child.ack_cumulative(message.ledger_id(), message.entry_id(), message.batch_index(),
                             message.batch_size(), None)

    def negative_acknowledge(self, message: Message | MessageId) -> None:
        """Ask for this message again after ``negative_ack_redelivery_delay_ms``."""
        if isinstance(message, Message):
            info = message._entry
            if info.consumer is not None:
                info.consumer.negative_ack(info.ledger_id, info.entry_id)
            return
        self._child_of(message).negative_ack(message.ledger_id(), message.entry_id())

    def redeliver_unacknowledged_messages(self) -> None:
        """Ask the broker to send again every message not acknowledged yet."""
        for child in self._children:
            child.redeliver_all()

    # ---- control ----------------------------------------------------------------------------

    async def seek(self, message_id: MessageId | int) -> None:
        """Move the subscription to a message id, or to a publish time (ms since the epoch)."""
        if isinstance(message_id, MessageId):
            if len(self._children) > 1 and message_id.partition() >= 0:
                await self._child_of(message_id).seek(message_id, None)
            else:
                await asyncio.gather(*(c.seek(message_id, None) for c in self._children))
        elif isinstance(message_id, int):
            await asyncio.gather(*(c.seek(None, message_id) for c in self._children))
        else:
            raise TypeError(f"cannot seek to {message_id!r}")

    async def get_last_message_id(self) -> MessageId:
        """The id of the last message stored in the topic (GET_LAST_MESSAGE_ID).

        Its entry id is -1 while the topic is empty. A partitioned topic has one last
        message per partition: use ``get_last_message_ids``.
        """
        if len(self._children) != 1:
            raise ValueError(f"{self._topic} has {len(self._children)} partitions: "
                             "use get_last_message_ids()")
        return await self._children[0].get_last_message_id()

    async def get_last_message_ids(self) -> list[MessageId]:
        """The last message id of every partition, in partition order."""
        return list(await asyncio.gather(*(c.get_last_message_id() for c in self._children)))

    async def unsubscribe(self) -> None:
        """Delete the subscription (and close this consumer)."""
        await asyncio.gather(*(c.unsubscribe() for c in self._children))
        self._close_queue()

    async def close(self) -> None:
        """Send pending acknowledgements and close; ``receive`` raises ``AlreadyClosed``."""
        await asyncio.gather(*(c.close() for c in self._children))
        self._close_queue()

    def _close_queue(self) -> None:
        self._closed = True
        self._queue.clear()
        self._entries.clear()
        self._wake()
        self._client._forget_consumer(self)

    def topic(self) -> str:
        return self._topic

    def subscription_name(self) -> str:
        return self._subscription

    def consumer_name(self) -> str:
        return self._children[0].consumer_name if self._children else ""

    def is_connected(self) -> bool:
        return all(c.is_connected() for c in self._children)

    def has_reached_end_of_topic(self) -> bool:
        return bool(self._children) and all(c.reached_end for c in self._children)

    def is_active(self) -> bool:
        """For Failover: whether this consumer is the one the broker delivers to."""
        return any(c.active for c in self._children)

    def flush_acknowledgements(self) -> None:
        """Send grouped acknowledgements now instead of at the next 100 ms tick."""
        for child in self._children:
            child.tracker.flush()

    def queued(self) -> int:
        """Messages received and not yet taken by ``receive``."""
        return len(self._queue)

    async def __aenter__(self) -> Consumer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<Consumer {self._topic} / {self._subscription}>"

