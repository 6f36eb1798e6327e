"""Producers: batching, compression, sequence ids, receipts, resend on reconnect, partitions.

``Producer`` is what applications hold. For a partitioned topic it holds one
``_TopicProducer`` per partition and routes each message (by key hash, else round-robin, see
``routing``); otherwise it holds one.

A ``_TopicProducer`` turns messages into *send ops*: one per batch (batching on) or one per
message. Ops wait in ``_pending`` in sequence-id order until the broker's SEND_RECEIPT for
them arrives; receipts come in order, so matching is a comparison with the head of the queue.
When the connection drops (or the broker closes the producer), the producer looks the topic up
again, re-creates itself under the same name and writes every pending op again, in order, with
the same sequence ids: the broker's deduplication drops what it already has.

Hot path (``send_async`` of plain data with batching, ``_TopicProducer.send_simple``): the
message becomes four byte strings appended to the open batch's list (u32 size, two cached
varint fields, the data; ``batching.append_entry`` inlined, no metadata object), the sequence
id is a counter, and the returned ``SendFuture`` is a three-slot object pointing at the batch's
op, so a million sends make no asyncio futures unless someone awaits them. A full batch
(count, bytes) or the publish-delay timer closes the batch: one ``b"".join``, one compression
call, one ``MessageMetadata``, one SEND frame. Ops are written only while the connection's
write buffer is below its high-water mark; the rest wait in memory, once, until it drains, and
frames written in one event-loop turn leave in one system call.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import enum
import logging
import random
import time
from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from protoframe.clients.pulsar import batching, errors
from protoframe.clients.pulsar.batching import BatchBuilder, sequence_field, size_field
from protoframe.clients.pulsar.connection import ClientConnection
from protoframe.clients.pulsar.message import MessageId
from protoframe.clients.pulsar.routing import HashingScheme, RoundRobinRouter, SinglePartitionRouter
from protoframe.generated.pulsar import pulsar_api as pb
from protoframe.generated.pulsar.frames import Frame, Payload
from protoframe.runtime.codec.compression import compress
from protoframe.runtime.codec.protowire import SMALL_VARINTS as _SMALL_VARINTS
from protoframe.runtime.io.backoff import Backoff

if TYPE_CHECKING:
    from protoframe.clients.pulsar.client import PulsarClient

__all__ = ["CompressionType", "PartitionsRoutingMode", "Producer", "ProducerAccessMode",
           "SendFuture"]

log = logging.getLogger(__name__)

# Tables of the batch entry fast path (see ``batching.append_entry``, inlined in send_simple).
_SIZE_FIELD = batching.SIZE_FIELD
_SEQ_FIELD = batching.SEQ_FIELD
_SEQ_FIELD_LOW = batching.SEQ_FIELD_LOW
_U32_SMALL = batching.U32_SMALL

T = pb.BaseCommand.Type
CompressionType = pb.CompressionType
ProducerAccessMode = pb.ProducerAccessMode
CompressionName = Literal["NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY"]
SendCallback = Callable[[BaseException | None, MessageId | None], None]


class PartitionsRoutingMode(enum.Enum):
    """How messages without a key are spread over partitions (the official names)."""

    RoundRobinDistribution = "round_robin"
    UseSinglePartition = "single"
    CustomPartition = "custom"


# Errors after which a producer cannot recover by reconnecting: pending sends fail.
_FATAL = (errors.TopicTerminated, errors.ProducerFenced, errors.NotAllowedError,
          errors.AuthorizationError, errors.AuthenticationError, errors.IncompatibleSchema,
          errors.ProducerBlockedQuotaExceededError, errors.ProducerBlockedQuotaExceededException,
          errors.InvalidTopicName, errors.TopicNotFound)

# Errors worth another attempt while creating a producer or consumer (after a new lookup).
RETRIABLE = (errors.ConnectError, errors.ServiceUnitNotReady,
             errors.TooManyLookupRequestException, errors.BrokerMetadataError,
             errors.BrokerPersistenceError, errors.NotConnected, ConnectionError)


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


class _State(enum.Enum):
    CONNECTING = 0
    READY = 1
    CLOSING = 2
    CLOSED = 3
    FAILED = 4


class _SendOp:
    """One SEND: a batch or a single message, and what waits for its receipt."""

    __slots__ = ("sequence_id", "highest_sequence_id", "num_messages", "batch_size", "payload",
                 "ledger_id", "entry_id", "error", "done", "callbacks", "created", "producer")

    def __init__(self, producer: _TopicProducer, created: float) -> None:
        self.producer = producer
        self.sequence_id = -1
        self.highest_sequence_id = -1
        self.num_messages = 0
        self.batch_size = 0  # >0: a batch of this many messages
        self.payload: Payload | None = None
        self.ledger_id = -1
        self.entry_id = -1
        self.error: BaseException | None = None
        self.done = False
        # Called once the op is finished; made only when someone waits or asks to be told.
        self.callbacks: list[Callable[[], None]] | None = None
        self.created = created

    def waiter(self) -> asyncio.Future[None]:
        """A new future for one waiter (cancelling it affects no one else)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.add_callback(lambda: self._settle(future))
        return future

    def _settle(self, future: asyncio.Future[None]) -> None:
        if future.done():
            return
        if self.error is not None:
            future.set_exception(self.error)
        else:
            future.set_result(None)

    def finish(self, ledger_id: int, entry_id: int, error: BaseException | None) -> None:
        if self.done:
            return
        self.done = True
        self.ledger_id = ledger_id
        self.entry_id = entry_id
        self.error = error
        self.payload = None  # nothing will be resent; let the bytes go
        if self.callbacks:
            callbacks, self.callbacks = self.callbacks, None
            for callback in callbacks:
                try:
                    callback()
                except Exception:
                    log.exception("send callback failed")

    def message_id(self, index: int) -> MessageId:
        if index >= 0:
            return MessageId(self.producer.partition, self.ledger_id, self.entry_id, index,
                             self.batch_size)
        return MessageId(self.producer.partition, self.ledger_id, self.entry_id, -1)

    def add_callback(self, callback: Callable[[], None]) -> None:
        if self.done:
            callback()
        elif self.callbacks is None:
            self.callbacks = [callback]
        else:
            self.callbacks.append(callback)

    def take_callbacks(self, handle: SendFuture, fn: object = None) -> list[_HandleCallback]:
        """Remove (and return) the done-callbacks ``handle`` registered (only ``fn``, if given)."""
        callbacks = self.callbacks
        if not callbacks:
            return []
        taken = [c for c in callbacks if isinstance(c, _HandleCallback) and c.future is handle
                 and (fn is None or c.fn == fn)]
        if taken:
            self.callbacks = [c for c in callbacks if c not in taken]
        return taken


class _HandleCallback:
    """A done-callback of one ``SendFuture``: scheduled on the loop, as asyncio does."""

    __slots__ = ("future", "fn", "context", "loop")

    def __init__(self, future: SendFuture, fn: Callable[[SendFuture], object],
                 context: contextvars.Context | None, loop: asyncio.AbstractEventLoop) -> None:
        self.future = future
        self.fn = fn
        self.context = context
        self.loop = loop

    def __call__(self) -> None:
        self.loop.call_soon(self.fn, self.future, context=self.context)


class SendFuture:
    """The result of ``send_async``: an ``asyncio.Future`` of the message's ``MessageId``.

    It implements the future protocol (``asyncio.isfuture`` is true, so ``await``, ``gather``,
    ``wait``, ``wait_for``, ``shield`` and ``add_done_callback`` work as with any future) while
    costing three slots per message: what it waits for belongs to the whole batch, and an
    asyncio future is made only for a caller that actually waits. Cancelling it stops the wait,
    not the send: the message may still be stored.
    """

    __slots__ = ("_op", "_index", "_cancelled")

    # Marks this class as a future for asyncio.isfuture(); never set on instances, because
    # __await__ yields a real asyncio future rather than this object.
    _asyncio_future_blocking = False

    def __init__(self, op: _SendOp, index: int) -> None:
        self._op = op
        self._index = index
        self._cancelled = False

    def done(self) -> bool:
        return self._cancelled or self._op.done

    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self, msg: Any = None) -> bool:
        """Stop waiting (the message itself is not withdrawn); False if already done."""
        if self.done():
            return False
        self._cancelled = True
        for callback in self._op.take_callbacks(self):
            callback()
        return True

    def result(self) -> MessageId:
        if self._cancelled:
            raise asyncio.CancelledError()
        op = self._op
        if not op.done:
            raise asyncio.InvalidStateError("the send is not finished")
        if op.error is not None:
            raise op.error
        return op.message_id(self._index)

    def exception(self) -> BaseException | None:
        if self._cancelled:
            raise asyncio.CancelledError()
        op = self._op
        if not op.done:
            raise asyncio.InvalidStateError("the send is not finished")
        return op.error

    def get_loop(self) -> asyncio.AbstractEventLoop:
        loop = self._op.producer._loop
        return loop if loop is not None else asyncio.get_running_loop()

    def add_done_callback(self, fn: Callable[[SendFuture], object], *,
                          context: contextvars.Context | None = None) -> None:
        """Call ``fn(self)`` (soon, on the loop) once the send is finished or cancelled."""
        callback = _HandleCallback(self, fn, context, self.get_loop())
        if self.done():
            callback()
        else:
            self._op.add_callback(callback)

    def remove_done_callback(self, fn: Callable[[SendFuture], object]) -> int:
        return len(self._op.take_callbacks(self, fn))

    def __await__(self) -> Generator[Any, None, MessageId]:
        if not self.done():
            waiter = self._op.waiter()
            try:
                yield from waiter.__await__()
            except asyncio.CancelledError:
                # A task cancels the future it waits on, which here is the waiter standing in
                # for this one: cancel this one too, as it would an asyncio future.
                # asyncio.wait_for() relies on that from 3.12 on (it cancels the awaiting task
                # where 3.11 called cancel() on the awaitable itself).
                if waiter.cancelled():
                    self.cancel()
                raise
        return self.result()

    __iter__ = __await__

    def __repr__(self) -> str:
        if self._cancelled:
            state = "cancelled"
        else:
            state = "pending" if not self._op.done else ("failed" if self._op.error else "done")
        return f"<SendFuture {state}>"


class _TopicProducer:
    """A producer on one topic or one partition (see the module docstring)."""

    def __init__(self, client: PulsarClient, topic: str, partition: int, conf: ProducerConfig,
                 producer_id: int) -> None:
        self.client = client
        self.topic = topic
        self.partition = partition
        self.conf = conf
        self.producer_id = producer_id
        self.producer_name = conf.producer_name or ""
        self.user_named = conf.producer_name is not None
        self.cnx: ClientConnection | None = None
        self.state = _State.CONNECTING
        self.epoch = 0
        self.next_sequence_id = 0
        self.last_sequence_id_published = -1
        self._sequence_initialized = False
        self.max_message_size = 5 * 1024 * 1024
        self._pending: deque[_SendOp] = deque()
        self._unsent: deque[_SendOp] = deque()
        self.pending_messages = 0
        self._max_pending = conf.max_pending_messages if conf.max_pending_messages > 0 else 1 << 62
        self._batching = conf.batching_enabled
        self._batch = BatchBuilder()
        self._batch_op: _SendOp | None = None
        self._batch_timer: asyncio.TimerHandle | None = None
        self._batch_max_messages = max(1, conf.batching_max_messages)
        self._batch_max_bytes = max(1, conf.batching_max_bytes)
        self._batch_delay = max(conf.batching_max_publish_delay_ms, 0) / 1000.0
        self._codec = conf.compression_type.name
        self._compression = conf.compression_type
        self._send_timeout = conf.send_timeout_millis / 1000.0
        self._timeout_timer: asyncio.TimerHandle | None = None
        self._room_waiters: list[asyncio.Future[None]] = []
        self._reconnect_task: asyncio.Task[None] | None = None
        self._close_error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"<producer {self.producer_name or self.producer_id} on {self.topic}>"

    # ---- connecting -------------------------------------------------------------------------

    async def start(self) -> None:
        """Create the producer on the broker; retries transient failures until the timeout."""
        self._loop = asyncio.get_running_loop()
        deadline = self._loop.time() + self.client.operation_timeout
        backoff = Backoff(0.1, 2.0)
        while True:
            try:
                await self._connect()
                return
            except RETRIABLE as exc:
                delay = backoff.next()
                if self._loop.time() + delay > deadline:
                    self.state = _State.FAILED
                    raise errors.wrap_error(exc, f"create producer on {self.topic}") from exc
                log.info("%r: could not create yet (%s); retrying in %.2f s", self, exc, delay)
                await asyncio.sleep(delay)
            except BaseException:
                self.state = _State.FAILED
                raise

    async def _connect(self) -> None:
        client = self.client
        address = await client.lookup.find_broker(self.topic)
        cnx = await client.get_connection(address.logical, address.physical)
        if self.state in (_State.CLOSING, _State.CLOSED):
            raise errors.AlreadyClosed(f"{self!r} was closed")
        cnx.producers[self.producer_id] = self
        try:
            answer = await cnx.requests.producer(
                self.topic, self.producer_id,
                producer_name=self.producer_name or None,
                user_provided_producer_name=self.user_named or None,
                epoch=self.epoch,
                metadata=[pb.KeyValue(key=k, value=v) for k, v in self.conf.properties.items()]
                or None,
                producer_access_mode=self.conf.access_mode,
            )
        except BaseException as exc:
            if cnx.producers.get(self.producer_id) is self:
                del cnx.producers[self.producer_id]
            raise errors.wrap_error(exc, f"create producer on {self.topic}") from None
        if self.state in (_State.CLOSING, _State.CLOSED):
            cnx.producers.pop(self.producer_id, None)
            return
        if not cnx.is_open:  # lost between the answer and now: its close listener missed us
            raise errors.ConnectError(f"{cnx!r} closed while creating {self!r}")
        self.producer_name = answer.producer_name
        if not self._sequence_initialized:
            self._sequence_initialized = True
            initial = self.conf.initial_sequence_id
            if initial is not None:
                self.next_sequence_id = initial + 1
                self.last_sequence_id_published = initial
            elif answer.last_sequence_id >= 0:
                self.next_sequence_id = answer.last_sequence_id + 1
                self.last_sequence_id_published = answer.last_sequence_id
        self.epoch += 1
        self.max_message_size = cnx.max_message_size
        self.cnx = cnx
        self.state = _State.READY
        # Resend everything not yet acknowledged, in order, with the same sequence ids.
        self._unsent = deque(self._pending)
        cnx.conn.on_writable(self._write_unsent)
        self._write_unsent()

    def connection_closed(self, cnx: ClientConnection, exc: BaseException) -> None:
        """The connection this producer used has ended."""
        if cnx is not self.cnx:
            return
        self._disconnected(cnx)

    def closed_by_broker(self, cnx: ClientConnection) -> None:
        """The broker sent CLOSE_PRODUCER (topic moved or unloaded): find it again."""
        if cnx is not self.cnx:
            return
        log.info("%r: closed by the broker; reconnecting", self)
        self._disconnected(cnx)

    def _disconnected(self, cnx: ClientConnection) -> None:
        cnx.conn.remove_writable_listener(self._write_unsent)
        self.cnx = None
        if self.state is _State.READY:
            self.state = _State.CONNECTING
        if self.state is _State.CONNECTING:
            self._schedule_reconnect()

    def _schedule_reconnect(self) -> None:
        if self._reconnect_task is not None and not self._reconnect_task.done():
            return
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
                log.warning("%r: cannot reconnect: %s", self, exc)
                self._fail_all(exc)
                self.state = _State.FAILED
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.info("%r: reconnect failed (%s); retrying", self, exc)

    # ---- sending ----------------------------------------------------------------------------

    def _check_can_send(self) -> None:
        state = self.state
        if state is _State.READY or state is _State.CONNECTING:
            return
        if state is _State.FAILED and self._close_error is not None:
            raise self._close_error
        raise errors.AlreadyClosed(f"{self!r} is closed")

    def has_room(self) -> bool:
        return self.pending_messages < self._max_pending

    async def wait_for_room(self) -> None:
        while self.pending_messages >= self._max_pending:
            self._check_can_send()
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._room_waiters.append(waiter)
            await waiter

    def _wake_room(self) -> None:
        if self._room_waiters and self.pending_messages < self._max_pending:
            waiters, self._room_waiters = self._room_waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    def send_simple(self, data: bytes) -> SendFuture:
        """``send_async(data)`` for a message with nothing but data: the hot path.

        Anything unusual (not ready, not batching, queue full, big message, key-based batches)
        goes through ``send_async``.
        """
        if self.state is not _State.READY or not self._batching or type(data) is not bytes or \
                self.pending_messages >= self._max_pending or self.conf.key_based_batching:
            return self.send_async(data)
        n = len(data)
        batch = self._batch
        if batch.count and batch.nbytes + n > self._batch_max_bytes:
            return self.send_async(data)
        op = self._batch_op
        if op is None:
            if n > self.max_message_size:
                return self.send_async(data)
            op = self._batch_op = _SendOp(self, time.monotonic())
        seq = self.next_sequence_id
        self.next_sequence_id = seq + 1
        index = batch.count
        # batching.append_entry, inlined.
        head = _SIZE_FIELD.get(n) or size_field(n)
        if seq < 0x4000:
            tail = _SEQ_FIELD[seq]
        elif seq < 0x1000_0000:
            tail = _SEQ_FIELD_LOW[seq & 0x3FFF] + _SMALL_VARINTS[seq >> 14]
        else:
            tail = sequence_field(seq)
        size = len(head) + len(tail)
        batch.parts += (_U32_SMALL[size], head, tail, data)
        batch.nbytes += size + 4 + n
        if index:
            if batch.key is not None:
                batch.mixed_keys = True
        else:
            batch.first_sequence_id = seq
            batch.key = None
        batch.last_sequence_id = seq
        batch.count = index + 1
        self.pending_messages += 1
        if index + 1 >= self._batch_max_messages or batch.nbytes >= self._batch_max_bytes:
            self._close_batch()
        elif self._batch_timer is None:
            loop = self._loop or asyncio.get_running_loop()
            self._batch_timer = loop.call_later(self._batch_delay, self._batch_timer_fired)
        return SendFuture(op, index)

    def send_async(
        self,
        data: bytes,
        properties: dict[str, str] | None = None,
        partition_key: str | None = None,
        ordering_key: bytes | None = None,
        event_timestamp: int | None = None,
        sequence_id: int | None = None,
        deliver_at: int | None = None,
        replication_clusters: list[str] | None = None,
        disable_replication: bool = False,
    ) -> SendFuture:
        if self.state is not _State.READY:
            self._check_can_send()
        if self.pending_messages >= self._max_pending and not self.conf.block_if_queue_full:
            raise errors.ProducerQueueIsFull(
                f"{self!r}: {self.pending_messages} messages are waiting for receipts")
        if type(data) is not bytes:
            data = bytes(data)
        if len(data) > self.max_message_size:
            raise errors.MessageTooBig(
                f"{len(data)} bytes is over the broker's limit of {self.max_message_size}")
        if sequence_id is None:
            seq = self.next_sequence_id
            self.next_sequence_id = seq + 1
        else:
            seq = sequence_id
            if seq >= self.next_sequence_id:
                self.next_sequence_id = seq + 1
        if self._batching and deliver_at is None and replication_clusters is None and \
                not disable_replication:
            batch = self._batch
            if batch.count and (batch.nbytes + len(data) > self._batch_max_bytes or (
                    self.conf.key_based_batching and partition_key != batch.key)):
                self._close_batch()
                batch = self._batch
            op = self._batch_op
            if op is None:
                op = self._batch_op = _SendOp(self, time.monotonic())
            index = batch.add(data, seq, properties=properties, partition_key=partition_key,
                              ordering_key=ordering_key, event_timestamp=event_timestamp)
            self.pending_messages += 1
            if batch.count >= self._batch_max_messages or batch.nbytes >= self._batch_max_bytes:
                self._close_batch()
            elif self._batch_timer is None:
                loop = self._loop or asyncio.get_running_loop()
                self._batch_timer = loop.call_later(self._batch_delay, self._batch_timer_fired)
            return SendFuture(op, index)
        # One SEND per message.
        if self._batch.count:
            self._close_batch()  # keep the order of messages sent before this one
        op = _SendOp(self, time.monotonic())
        op.sequence_id = op.highest_sequence_id = seq
        op.num_messages = 1
        payload_data = data
        meta = pb.MessageMetadata(
            producer_name=self.producer_name, sequence_id=seq,
            publish_time=int(time.time() * 1000),
            properties=[pb.KeyValue(key=k, value=v) for k, v in properties.items()]
            if properties else None,
            partition_key=partition_key, ordering_key=ordering_key, event_time=event_timestamp,
            deliver_at_time=deliver_at, replicate_to=replication_clusters,
        )
        if disable_replication:
            meta.replicate_to = ["__local__"]
        if self._compression is not pb.CompressionType.NONE:
            payload_data = compress(self._codec, data)
            meta.compression = self._compression
            meta.uncompressed_size = len(data)
        if len(payload_data) > self.max_message_size:
            raise errors.MessageTooBig(
                f"{len(payload_data)} bytes is over the broker's limit of "
                f"{self.max_message_size}")
        op.payload = Payload(metadata=meta, data=payload_data)
        self.pending_messages += 1
        self._enqueue(op)
        return SendFuture(op, -1)

    def _batch_timer_fired(self) -> None:
        self._batch_timer = None
        if self._batch.count:
            self._close_batch()

    def _close_batch(self) -> None:
        """Turn the open batch into a send op and queue it."""
        if self._batch_timer is not None:
            self._batch_timer.cancel()
            self._batch_timer = None
        batch, op = self._batch, self._batch_op
        self._batch = BatchBuilder()
        self._batch_op = None
        if op is None or not batch.count:
            return
        raw = batch.payload()
        meta = pb.MessageMetadata(
            producer_name=self.producer_name, sequence_id=batch.first_sequence_id,
            publish_time=int(time.time() * 1000), num_messages_in_batch=batch.count,
            partition_key=batch.common_key(),
        )
        if batch.last_sequence_id != batch.first_sequence_id:
            meta.highest_sequence_id = batch.last_sequence_id
        data = raw
        if self._compression is not pb.CompressionType.NONE:
            data = compress(self._codec, raw)
            meta.compression = self._compression
            meta.uncompressed_size = len(raw)
        op.sequence_id = batch.first_sequence_id
        op.highest_sequence_id = batch.last_sequence_id
        op.num_messages = batch.count
        op.batch_size = batch.count
        op.payload = Payload(metadata=meta, data=data)
        if len(data) > self.max_message_size:
            self.pending_messages -= batch.count
            op.finish(-1, -1, errors.MessageTooBig(
                f"batch of {len(data)} bytes is over the broker's limit of "
                f"{self.max_message_size}"))
            return
        self._enqueue(op)

    def _enqueue(self, op: _SendOp) -> None:
        self._pending.append(op)
        self._unsent.append(op)
        if self._timeout_timer is None and self._send_timeout > 0:
            self._arm_timeout()
        if self.state is _State.READY:
            self._write_unsent()

    def _write_unsent(self) -> None:
        cnx = self.cnx
        if cnx is None or self.state is not _State.READY:
            return
        unsent = self._unsent
        conn = cnx.conn
        producer_id = self.producer_id
        try:
            while unsent and conn.writable:
                op = unsent.popleft()
                if op.done or op.payload is None:
                    continue
                send = pb.CommandSend(producer_id=producer_id, sequence_id=op.sequence_id,
                                      num_messages=op.num_messages)
                if op.highest_sequence_id != op.sequence_id:
                    send.highest_sequence_id = op.highest_sequence_id
                conn.write(Frame(command=pb.BaseCommand(type_=T.SEND, send=send),
                                 payload=op.payload))
        except ConnectionError:
            return  # the close listener reschedules everything

    def flush_batch(self) -> None:
        if self._batch.count:
            self._close_batch()

    async def flush(self) -> None:
        """Close the open batch and wait until every message sent so far has its receipt."""
        self.flush_batch()
        if not self._pending:
            return
        last = self._pending[-1]
        await last.waiter()

    # ---- receipts ---------------------------------------------------------------------------

    def receipt_received(self, body: pb.CommandSendReceipt, cnx: ClientConnection) -> None:
        if cnx is not self.cnx:
            return
        pending = self._pending
        seq = body.sequence_id
        while pending:
            op = pending[0]
            if op.done:
                pending.popleft()
                continue
            if seq < op.sequence_id:
                return  # a receipt for something already failed or resent: ignore
            if seq > op.sequence_id:
                log.warning("%r: receipt for sequence id %d while %d is the oldest pending; "
                            "reconnecting to resend", self, seq, op.sequence_id)
                cnx.close()
                return
            pending.popleft()
            self.pending_messages -= op.num_messages
            if op.highest_sequence_id > self.last_sequence_id_published:
                self.last_sequence_id_published = op.highest_sequence_id
            mid = body.message_id
            if mid is not None:
                op.finish(_signed(mid.ledgerId), _signed(mid.entryId), None)
            else:
                op.finish(-1, -1, None)
            if self._room_waiters:
                self._wake_room()
            return

    def send_error_received(self, body: pb.CommandSendError, cnx: ClientConnection) -> None:
        if cnx is not self.cnx:
            return
        error = errors.from_server_error(body.error, body.message)
        if body.error in (pb.ServerError.ChecksumError, pb.ServerError.NotAllowedError):
            for op in list(self._pending):
                if op.sequence_id == body.sequence_id and not op.done:
                    self._pending.remove(op)
                    self.pending_messages -= op.num_messages
                    op.finish(-1, -1, error)
                    self._wake_room()
                    return
        elif body.error is pb.ServerError.TopicTerminatedError:
            self._fail_all(error)
            self.state = _State.FAILED
            self._close_error = error
        else:
            log.warning("%r: send error %s; reconnecting to resend", self, error)
            cnx.close()

    def _fail_all(self, error: BaseException) -> None:
        if self._batch.count:
            self._close_batch()
        pending, self._pending = self._pending, deque()
        self._unsent = deque()
        self.pending_messages = 0
        for op in pending:
            op.finish(-1, -1, error)
        self._wake_room_all(error)

    def _wake_room_all(self, error: BaseException) -> None:
        waiters, self._room_waiters = self._room_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_exception(error)

    # ---- send timeout -----------------------------------------------------------------------

    def _arm_timeout(self) -> None:
        loop = self._loop or asyncio.get_running_loop()
        head = self._pending[0] if self._pending else None
        if head is None:
            return
        delay = head.created + self._send_timeout - time.monotonic()
        self._timeout_timer = loop.call_later(max(delay, 0.001), self._timeout_fired)

    def _timeout_fired(self) -> None:
        self._timeout_timer = None
        now = time.monotonic()
        pending = self._pending
        expired: list[_SendOp] = []
        while pending and (pending[0].done or pending[0].created + self._send_timeout <= now):
            op = pending.popleft()
            if not op.done:
                expired.append(op)
        if expired:
            dropped = set(map(id, expired))
            self._unsent = deque(op for op in self._unsent if id(op) not in dropped)
            for op in expired:
                self.pending_messages -= op.num_messages
                op.finish(-1, -1, errors.Timeout(
                    f"{self!r}: no receipt within {self._send_timeout} s"))
            self._wake_room()
        if pending:
            self._arm_timeout()

    # ---- closing ----------------------------------------------------------------------------

    async def close(self) -> None:
        if self.state in (_State.CLOSED, _State.CLOSING):
            return
        if self.state is _State.READY or self.state is _State.CONNECTING:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.flush(), self.client.operation_timeout)
        self.state = _State.CLOSING
        if self._reconnect_task is not None:
            self._reconnect_task.cancel()
        if self._batch_timer is not None:
            self._batch_timer.cancel()
            self._batch_timer = None
        if self._timeout_timer is not None:
            self._timeout_timer.cancel()
            self._timeout_timer = None
        cnx = self.cnx
        self.cnx = None
        if cnx is not None and cnx.is_open:
            cnx.conn.remove_writable_listener(self._write_unsent)
            try:
                await cnx.requests.close_producer(self.producer_id,
                                                  timeout=self.client.operation_timeout)
            except Exception as exc:
                log.debug("%r: CLOSE_PRODUCER failed: %s", self, exc)
            cnx.producers.pop(self.producer_id, None)
        self.state = _State.CLOSED
        self._fail_all(errors.AlreadyClosed(f"{self!r} was closed"))

    def is_connected(self) -> bool:
        return self.state is _State.READY and self.cnx is not None and self.cnx.is_open


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


class Producer:
    """A producer on a topic (all of its partitions, if it has several)."""

    def __init__(self, client: PulsarClient, topic: str, producers: list[_TopicProducer],
                 conf: ProducerConfig) -> None:
        self._client = client
        self._topic = topic
        self._producers = producers
        self._single = producers[0] if len(producers) == 1 and producers[0].partition < 0 \
            else None
        self._partitions = len(producers)
        self._conf = conf
        router: RoundRobinRouter | SinglePartitionRouter
        if conf.routing_mode is PartitionsRoutingMode.UseSinglePartition:
            router = SinglePartitionRouter(random.randrange(max(self._partitions, 1)),
                                           conf.hashing_scheme)
        else:
            router = RoundRobinRouter(conf.hashing_scheme)
        self._router = router
        self._custom = conf.message_router

    def _choose(self, partition_key: str | None) -> _TopicProducer:
        single = self._single
        if single is not None:
            return single
        n = self._partitions
        if self._custom is not None:
            index = self._custom(partition_key, n)
        else:
            index = self._router.choose(partition_key, n)
        return self._producers[index % n]

    def topic(self) -> str:
        return self._topic

    def producer_name(self) -> str:
        return self._producers[0].producer_name

    def last_sequence_id(self) -> int:
        return max(p.last_sequence_id_published for p in self._producers)

    def is_connected(self) -> bool:
        return all(p.is_connected() for p in self._producers)

    def send_async(
        self,
        content: bytes,
        callback: SendCallback | None = None,
        properties: dict[str, str] | None = None,
        partition_key: str | None = None,
        ordering_key: bytes | str | None = None,
        event_timestamp: int | None = None,
        sequence_id: int | None = None,
        deliver_at: int | None = None,
        deliver_after_ms: int | None = None,
        replication_clusters: list[str] | None = None,
        disable_replication: bool = False,
    ) -> SendFuture:
        """Queue a message; return at once with a ``SendFuture`` for its ``MessageId``.

        Raises ``ProducerQueueIsFull`` when ``max_pending_messages`` are waiting and the
        producer does not block. With ``block_if_queue_full`` the message is queued anyway
        (this method cannot wait); ``send`` is the call that waits for room.
        ``callback(error, message_id)`` runs when the broker has answered.
        """
        single = self._single
        if single is not None and callback is None and properties is None and \
                partition_key is None and ordering_key is None and event_timestamp is None and \
                sequence_id is None and deliver_at is None and deliver_after_ms is None and \
                replication_clusters is None and not disable_replication:
            return single.send_simple(content)
        producer = single if single is not None else self._choose(partition_key)
        if deliver_after_ms is not None:
            deliver_at = int(time.time() * 1000) + deliver_after_ms
        if isinstance(ordering_key, str):
            ordering_key = ordering_key.encode()
        future = producer.send_async(content, properties, partition_key, ordering_key,
                                     event_timestamp, sequence_id, deliver_at,
                                     replication_clusters, disable_replication)
        if callback is not None:
            def done(f: SendFuture) -> None:
                error = f.exception()
                callback(error, None if error is not None else f.result())
            future.add_done_callback(done)
        return future

    async def send(
        self,
        content: bytes,
        properties: dict[str, str] | None = None,
        partition_key: str | None = None,
        ordering_key: bytes | str | None = None,
        event_timestamp: int | None = None,
        sequence_id: int | None = None,
        deliver_at: int | None = None,
        deliver_after_ms: int | None = None,
        replication_clusters: list[str] | None = None,
        disable_replication: bool = False,
    ) -> MessageId:
        """Send a message and return its ``MessageId`` once the broker has stored it."""
        producer = self._single if self._single is not None else self._choose(partition_key)
        if producer.pending_messages >= producer._max_pending and \
                self._conf.block_if_queue_full:
            await producer.wait_for_room()
        if deliver_after_ms is not None:
            deliver_at = int(time.time() * 1000) + deliver_after_ms
        if isinstance(ordering_key, str):
            ordering_key = ordering_key.encode()
        future = producer.send_async(content, properties, partition_key, ordering_key,
                                     event_timestamp, sequence_id, deliver_at,
                                     replication_clusters, disable_replication)
        return await future

    async def flush(self) -> None:
        """Send every open batch and wait for the receipts of everything sent so far."""
        await asyncio.gather(*(p.flush() for p in self._producers))

    async def close(self) -> None:
        """Flush, then close on the broker. Later sends raise ``AlreadyClosed``."""
        await asyncio.gather(*(p.close() for p in self._producers))
        self._client._forget_producer(self)

    async def __aenter__(self) -> Producer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<Producer {self._topic} ({self._partitions} partition(s))>"
