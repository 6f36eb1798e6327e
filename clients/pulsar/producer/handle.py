"""One producer on one topic or partition: sequence ids, batches, receipts, resending.

``TopicProducer`` turns messages into send ops (``future.SendOp``): one per batch (batching
on) or one per message. Ops wait in ``_pending`` in sequence-id order until the broker's
SEND_RECEIPT for them arrives; receipts come in order, so matching is a comparison with the
head of the queue. When the connection drops (or the broker closes the producer), the shared
lifecycle (``handle.TopicHandle``) finds the topic again and ``_ready`` writes every pending op
again, in order, with the same sequence ids: the broker's deduplication drops what it already
has.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque

from protoframe.clients.pulsar import batching, errors
from protoframe.clients.pulsar.batching import BatchBuilder, sequence_field, size_field
from protoframe.clients.pulsar.connection import ClientConnection
from protoframe.clients.pulsar.handle import HandleState, TopicHandle
from protoframe.clients.pulsar.producer.access import wait_for_exclusive_access
from protoframe.clients.pulsar.producer.chunks import ChunkedSendOp, chunk_payloads
from protoframe.clients.pulsar.producer.future import SendFuture, SendOp
from protoframe.clients.pulsar.producer.options import ProducerConfig
from protoframe.clients.pulsar.producer.payloads import batch_payload, compressed_payload
from protoframe.clients.pulsar.session import Session
from protoframe.generated.pulsar import pulsar_api as pb
from protoframe.generated.pulsar.frames import Frame, Payload
from protoframe.runtime.codec.protowire import SMALL_VARINTS as _SMALL_VARINTS

__all__ = ["TopicProducer"]

log = logging.getLogger(__name__)

# Tables of the batch entry fast path (see ``batching.append_entry``, inlined in send_simple).
_SIZE_FIELD = batching.SIZE_FIELD
_SEQ_FIELD = batching.SEQ_FIELD
_SEQ_FIELD_LOW = batching.SEQ_FIELD_LOW
_U32_SMALL = batching.U32_SMALL

T = pb.BaseCommand.Type


class TopicProducer(TopicHandle[pb.CommandProducerSuccess]):
    """A producer on one topic or one partition (see the package docstring)."""

    _fatal = errors.PRODUCER_FATAL
    _creating = "create producer on"

    def __init__(self, session: Session, topic: str, partition: int, conf: ProducerConfig,
                 producer_id: int) -> None:
        super().__init__(session, topic, partition)
        self.conf = conf
        self.producer_id = producer_id
        self.producer_name = conf.producer_name or ""
        self.user_named = conf.producer_name is not None
        self.epoch = 0
        # The topic epoch of an exclusive access mode: given back on reconnecting, so that a
        # producer fenced meanwhile is refused (ProducerFenced) rather than taking over.
        self.topic_epoch: int | None = None
        self.next_sequence_id = 0
        self.last_sequence_id_published = -1
        self._sequence_initialized = False
        self.max_message_size = 5 * 1024 * 1024
        self._pending: deque[SendOp] = deque()
        self._unsent: deque[SendOp] = deque()
        self.pending_messages = 0
        self._max_pending = conf.max_pending_messages if conf.max_pending_messages > 0 else 1 << 62
        self._batching = conf.batching_enabled
        self._batch = BatchBuilder()
        self._batch_op: SendOp | None = None
        self._batch_timer: asyncio.TimerHandle | None = None
        self._batch_max_messages = max(1, conf.batching_max_messages)
        self._batch_max_bytes = max(1, conf.batching_max_bytes)
        self._batch_delay = max(conf.batching_max_publish_delay_ms, 0) / 1000.0
        self._compression = conf.compression_type
        self._send_timeout = conf.send_timeout_millis / 1000.0
        self._timeout_timer: asyncio.TimerHandle | None = None
        self._room_waiters: list[asyncio.Future[None]] = []
        self._close_error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._memory = conf.memory_limit
        self._chunking = conf.chunking_enabled
        self.schema_version: bytes | None = None

    def __repr__(self) -> str:
        return f"<producer {self.producer_name or self.producer_id} on {self.topic}>"

    # ---- the life on the broker (``TopicHandle``) --------------------------------------------

    def _register(self, cnx: ClientConnection) -> None:
        cnx.producers[self.producer_id] = self

    def _unregister(self, cnx: ClientConnection) -> None:
        if cnx.producers.get(self.producer_id) is self:
            del cnx.producers[self.producer_id]

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        await super().start()

    async def _create(self, cnx: ClientConnection) -> pb.CommandProducerSuccess:
        answer = await cnx.requests.producer(
            self.topic, self.producer_id,
            producer_name=self.producer_name or None,
            user_provided_producer_name=self.user_named or None,
            epoch=self.epoch,
            metadata=[pb.KeyValue(key=k, value=v) for k, v in self.conf.properties.items()]
            or None,
            producer_access_mode=self.conf.access_mode,
            topic_epoch=self.topic_epoch,
            schema=self.conf.schema_info,
        )
        if answer.has_producer_ready() and not answer.producer_ready:
            answer = await wait_for_exclusive_access(cnx, answer)
        if answer.has_topic_epoch():
            self.topic_epoch = answer.topic_epoch
        return answer

    def _ready(self, cnx: ClientConnection, answer: pb.CommandProducerSuccess) -> None:
        self.producer_name = answer.producer_name
        # Every message carries the version the broker gave the producer's schema.
        self.schema_version = answer.schema_version or None
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
        # Resend everything not yet acknowledged, in order, with the same sequence ids.
        self._unsent = deque(self._pending)
        cnx.conn.on_writable(self._write_unsent)
        self._write_unsent()

    def _detach(self, cnx: ClientConnection) -> None:
        cnx.conn.remove_writable_listener(self._write_unsent)

    def _lost(self, exc: BaseException) -> None:
        # Later sends raise it too: a fenced producer keeps saying ProducerFenced, as the
        # official clients' do.
        if self._close_error is None:
            self._close_error = exc
        self._fail_all(exc)

    # ---- sending ----------------------------------------------------------------------------

    def _check_can_send(self) -> None:
        state = self.state
        if state is HandleState.READY or state is HandleState.CONNECTING:
            return
        if state is HandleState.FAILED and self._close_error is not None:
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
        """``send_async(data)`` for a message with nothing but data: the hot path (measured by
        bench/bench_client.py, produce phase; see the package docstring).

        Anything unusual (not ready, not batching, queue full, big message, key-based batches)
        goes through ``send_async``.
        """
        if self.state is not HandleState.READY or not self._batching or type(data) is not bytes or \
                self.pending_messages >= self._max_pending or self.conf.key_based_batching or \
                self._memory is not None:
            return self.send_async(data)
        n = len(data)
        batch = self._batch
        if batch.count and batch.nbytes + n > self._batch_max_bytes:
            return self.send_async(data)
        op = self._batch_op
        if op is None:
            if n > self.max_message_size:
                return self.send_async(data)
            op = self._batch_op = SendOp(self.partition, self._loop, time.monotonic())
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
        if self.state is not HandleState.READY:
            self._check_can_send()
        if self.pending_messages >= self._max_pending and not self.conf.block_if_queue_full:
            raise errors.ProducerQueueIsFull(
                f"{self!r}: {self.pending_messages} messages are waiting for receipts")
        if type(data) is not bytes:
            data = bytes(data)
        memory = self._memory
        if memory is not None and not memory.try_reserve(len(data)):
            if not self.conf.block_if_queue_full:
                raise errors.MemoryBufferIsFull(
                    f"{self!r}: {memory.used} of the client's {memory.limit} bytes of memory "
                    "are taken by pending sends")
            memory.force_reserve(len(data))  # told to block, but this call cannot wait
        try:
            return self._send_reserved(data, properties, partition_key, ordering_key,
                                       event_timestamp, sequence_id, deliver_at,
                                       replication_clusters, disable_replication)
        except BaseException:
            if memory is not None:
                memory.release(len(data))
            raise

    def _send_reserved(
        self,
        data: bytes,
        properties: dict[str, str] | None,
        partition_key: str | None,
        ordering_key: bytes | None,
        event_timestamp: int | None,
        sequence_id: int | None,
        deliver_at: int | None,
        replication_clusters: list[str] | None,
        disable_replication: bool,
    ) -> SendFuture:
        """``send_async`` once ``data``'s bytes are reserved in the memory limit (if any)."""
        if len(data) > self.max_message_size and not self._chunking:
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
                op = self._batch_op = SendOp(self.partition, self._loop, time.monotonic())
            index = batch.add(data, seq, properties=properties, partition_key=partition_key,
                              ordering_key=ordering_key, event_timestamp=event_timestamp)
            if self._memory is not None:
                op.memory = self._memory
                op.reserved += len(data)
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
        op = SendOp(self.partition, self._loop, time.monotonic())
        op.sequence_id = op.highest_sequence_id = seq
        op.num_messages = 1
        meta = pb.MessageMetadata(
            producer_name=self.producer_name, sequence_id=seq,
            publish_time=int(time.time() * 1000),
            properties=[pb.KeyValue(key=k, value=v) for k, v in properties.items()]
            if properties else None,
            partition_key=partition_key, ordering_key=ordering_key, event_time=event_timestamp,
            deliver_at_time=deliver_at, replicate_to=replication_clusters,
            schema_version=self.schema_version,
        )
        if disable_replication:
            meta.replicate_to = ["__local__"]
        payload = compressed_payload(meta, data, self._compression)
        if self._chunking:
            limit = self.max_message_size
            if 0 < self.conf.chunk_max_message_size < limit:
                limit = self.conf.chunk_max_message_size
            if len(payload.data) > limit:
                return self._send_chunks(op, payload, limit, len(data))
        if len(payload.data) > self.max_message_size:
            raise errors.MessageTooBig(
                f"{len(payload.data)} bytes is over the broker's limit of "
                f"{self.max_message_size}")
        op.payload = payload
        if self._memory is not None:
            op.memory = self._memory
            op.reserved = len(data)
        self.pending_messages += 1
        self._enqueue(op)
        return SendFuture(op, -1)

    def _send_chunks(self, op: SendOp, payload: Payload, limit: int, size: int) -> SendFuture:
        """Send ``payload`` (``op``'s message) as chunks of at most ``limit`` bytes."""
        chunks = []
        for part in chunk_payloads(payload.metadata, payload.data, limit):
            chunk = SendOp(self.partition, self._loop, op.created)
            chunk.sequence_id = chunk.highest_sequence_id = op.sequence_id
            chunk.num_messages = 1
            chunk.chunk = True
            chunk.payload = part
            chunks.append(chunk)
        whole = ChunkedSendOp(self.partition, self._loop, op.created, chunks)
        if self._memory is not None:
            whole.memory = self._memory
            whole.reserved = size
        for chunk in chunks:
            self.pending_messages += 1
            self._enqueue(chunk)
        return SendFuture(whole, -1)

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
        payload = batch_payload(batch, self.producer_name, self._compression)
        if self.schema_version is not None:
            payload.metadata.schema_version = self.schema_version
        data = payload.data
        op.sequence_id = batch.first_sequence_id
        op.highest_sequence_id = batch.last_sequence_id
        op.num_messages = batch.count
        op.batch_size = batch.count
        op.payload = payload
        if len(data) > self.max_message_size:
            self.pending_messages -= batch.count
            op.finish(-1, -1, errors.MessageTooBig(
                f"batch of {len(data)} bytes is over the broker's limit of "
                f"{self.max_message_size}"))
            return
        self._enqueue(op)

    def _enqueue(self, op: SendOp) -> None:
        self._pending.append(op)
        self._unsent.append(op)
        if self._timeout_timer is None and self._send_timeout > 0:
            self._arm_timeout()
        if self.state is HandleState.READY:
            self._write_unsent()

    def _write_unsent(self) -> None:
        cnx = self.cnx
        if cnx is None or self.state is not HandleState.READY:
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
                if op.chunk:
                    send.is_chunk = True
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
            self.state = HandleState.FAILED
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
        expired: list[SendOp] = []
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
        if self.state in (HandleState.CLOSED, HandleState.CLOSING):
            return
        if self.state is HandleState.READY or self.state is HandleState.CONNECTING:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.flush(), self.session.operation_timeout)
        self.state = HandleState.CLOSING
        self._stop_reconnecting()
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
                                                  timeout=self.session.operation_timeout)
            except Exception as exc:
                log.debug("%r: CLOSE_PRODUCER failed: %s", self, exc)
            cnx.producers.pop(self.producer_id, None)
        self.state = HandleState.CLOSED
        self._fail_all(errors.AlreadyClosed(f"{self!r} was closed"))


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value

