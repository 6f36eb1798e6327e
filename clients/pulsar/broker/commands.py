"""The broker's answers to each client command: the ``on_*`` methods of ``PulsarHooks``.

``Commands`` is the protocol side of a session, without I/O: each hook reads the broker state
and answers with ``_emit``, which the session (``session.Session``) sends through the
connection. Request ids are echoed, never used as keys: clients (the official C++ one among
them) reuse them.
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from dataclasses import dataclass
from functools import partial

from protoframe.generated.pulsar import frames
from protoframe.generated.pulsar.commands import PROTOCOL_VERSION
from protoframe.generated.pulsar.machines import PulsarHooks
from protoframe.generated.pulsar.pulsar_api import (
    BaseCommand,
    CommandAck,
    CommandAckResponse,
    CommandCloseConsumer,
    CommandCloseProducer,
    CommandConnect,
    CommandConnected,
    CommandConsumerStats,
    CommandConsumerStatsResponse,
    CommandError,
    CommandFlow,
    CommandGetLastMessageId,
    CommandGetLastMessageIdResponse,
    CommandPing,
    CommandPong,
    CommandProducer,
    CommandProducerSuccess,
    CommandRedeliverUnacknowledgedMessages,
    CommandSeek,
    CommandSend,
    CommandSendError,
    CommandSendReceipt,
    CommandSubscribe,
    CommandSuccess,
    CommandUnsubscribe,
    FeatureFlags,
    KeySharedMode,
    MessageIdData,
    MessageMetadata,
    ServerError,
)

from .access_modes import AccessRefused, Waiting
from .entries import KEY_HASH_RANGE, Entry
from .key_shared import AssignError
from .limits import MAX_MESSAGE_SIZE, LimitExceeded, check_int64
from .lookups import LookupAnswers
from .schema_answers import SchemaAnswers, SchemaRefused
from .state import BrokerState
from .subscriptions import Consumer, ConsumerBusy, SubType, words_for
from .topic_watchers import TopicWatchers
from .topics import UINT64_MASK, Topic
from .unsupported import UnsupportedRequests
from .wire import RawFrame

__all__ = ["MAX_MESSAGE_SIZE", "MAX_PROTOCOL_VERSION", "NO_REQUEST", "SERVER_VERSION",
           "FRAME_PADDING", "Commands", "Producer"]

log = logging.getLogger(__name__)

Type = BaseCommand.Type

# Room for the command and metadata around a message of MAX_MESSAGE_SIZE (Pulsar's padding).
FRAME_PADDING = 10 * 1024
MAX_PROTOCOL_VERSION = PROTOCOL_VERSION  # the newest of the spec's ProtocolVersion
SERVER_VERSION = "protoframe-broker-0.1"
NO_REQUEST = UINT64_MASK  # request id of broker-initiated closes (-1 as the Java broker sends)


@dataclass(eq=False)
class Producer:
    producer_id: int
    topic: Topic
    name: str
    closing: bool = False  # CLOSE_PRODUCER received; SUCCESS follows the pending receipts
    ready: bool = True  # False while WaitForExclusive queues it


class Commands(SchemaAnswers, LookupAnswers, TopicWatchers, UnsupportedRequests, PulsarHooks):
    """The command hooks of one connection's session, given to its ``PulsarProtocol``; the I/O
    is the subclass's. Every request gets an answer: the ones this broker does not serve get an
    error from ``UnsupportedRequests``."""

    broker: BrokerState
    peer: str
    service_url: str
    producers: dict[int, Producer]
    consumers: dict[int, Consumer]

    @property
    @abstractmethod
    def closed(self) -> bool:
        """The connection is closed or closing: nothing more is sent."""

    @abstractmethod
    def _emit(self, command: BaseCommand) -> None:
        """Send a command through the state machines."""

    @abstractmethod
    def _emit_unchecked(self, command: BaseCommand) -> None:
        """Send a command the generated machines do not model (see on_seek)."""

    @abstractmethod
    def _safely(self, what: str, action: BaseCommand) -> None:
        """Emit from outside the connection's read (callbacks, other sessions' dispatch)."""

    # The session is its consumers' DeliverySink (``subscriptions``).

    @abstractmethod
    def deliver(self, consumer: Consumer, entry: Entry, redelivery_count: int,
                ack_set: list[int]) -> None: ...

    @abstractmethod
    def active_consumer_change(self, consumer: Consumer, is_active: bool) -> None: ...

    @abstractmethod
    def force_close(self, consumer: Consumer) -> None: ...

    # --- answers ---------------------------------------------------------------------------

    def _error(self, request_id: int, error: ServerError, message: str) -> None:
        self._emit(BaseCommand(type_=Type.ERROR, error=CommandError(
            request_id=request_id, error=error, message=message)))

    def _success(self, request_id: int) -> None:
        self._emit(BaseCommand(type_=Type.SUCCESS, success=CommandSuccess(request_id=request_id)))

    def _send_error(self, producer_id: int, sequence_id: int, error: ServerError,
                    message: str) -> None:
        self._emit(BaseCommand(type_=Type.SEND_ERROR, send_error=CommandSendError(
            producer_id=producer_id, sequence_id=sequence_id, error=error, message=message)))

    # --- connection ------------------------------------------------------------------------

    def on_connect(self, body: CommandConnect, frame: frames.Frame) -> None:
        version = min(body.protocol_version, MAX_PROTOCOL_VERSION)
        log.debug("connection %s: CONNECT from %s, protocol %d", self.peer, body.client_version,
                  body.protocol_version)
        self._emit(BaseCommand(type_=Type.CONNECTED, connected=CommandConnected(
            server_version=SERVER_VERSION, protocol_version=version,
            max_message_size=self.broker.limits.max_message_size,
            feature_flags=FeatureFlags(supports_topic_watchers=True))))

    def on_ping(self, body: CommandPing, frame: frames.Frame) -> None:
        self._emit(BaseCommand(type_=Type.PONG, pong=CommandPong()))

    # --- producers -------------------------------------------------------------------------

    def on_producer(self, body: CommandProducer, frame: frames.Frame) -> None:
        name, refusal = self._topic_name(body.topic)
        if name is None:
            self._error(body.request_id, ServerError.InvalidTopicName, refusal)
            return
        limits = self.broker.limits
        try:
            if body.producer_name:
                limits.check_name("producer name", body.producer_name)
            limits.check_metadata("producer metadata", body.metadata)
        except LimitExceeded as exc:
            self._error(body.request_id, ServerError.NotAllowedError, str(exc))
            return
        topic = self.broker.topic(name)
        if body.initial_subscription_name:
            # As Pulsar: a subscription from the earliest message, made with the producer
            # (the official clients' dead-letter producers ask for one).
            self.broker.subscription(topic, CommandSubscribe(
                topic=name, subscription=body.initial_subscription_name,
                subType=SubType.Shared, consumer_id=0, request_id=0,
                initialPosition=CommandSubscribe.InitialPosition.Earliest))
        producer_name = body.producer_name or self.broker.new_producer_name()
        if producer_name in topic.producer_names:
            self._error(body.request_id, ServerError.ProducerBusy,
                        f"producer {producer_name!r} is already connected to {name}")
            return
        try:
            schema_version = self._producer_schema(topic, body.schema)
        except SchemaRefused as exc:
            self._error(body.request_id, exc.error, str(exc))
            return
        producer = Producer(body.producer_id, topic, producer_name)
        request_id = body.request_id

        def granted(epoch: int) -> None:
            if self.producers.get(producer.producer_id) is producer:
                producer.ready = True
                self._producer_success(producer, request_id, schema_version, epoch,
                                       unchecked=True)

        def refused(exc: AccessRefused) -> None:
            if self.producers.get(producer.producer_id) is producer:
                self._drop_producer(producer)
                self._safely("ERROR", BaseCommand(type_=Type.ERROR, error=CommandError(
                    request_id=request_id, error=exc.code, message=str(exc))))

        fence = partial(self._fence_producer, producer)
        try:
            grant = topic.access.admit(
                producer, producer_name, body.producer_access_mode,
                body.topic_epoch if body.has_topic_epoch() else None, fence,
                Waiting(producer_name, granted, refused, fence))
        except AccessRefused as exc:
            self._error(body.request_id, exc.code, str(exc))
            return
        topic.producer_names.add(producer_name)
        topic.dedup.producer_connected(producer_name)
        self.producers[body.producer_id] = producer
        if grant is None:
            # WaitForExclusive behind another producer: Pulsar answers at once that the
            # producer is not ready, and again once it has the topic.
            producer.ready = False
            self._emit(BaseCommand(type_=Type.PRODUCER_SUCCESS, producer_success=(
                CommandProducerSuccess(request_id=request_id, producer_name=producer_name,
                                       producer_ready=False))))
            return
        self._producer_success(producer, request_id, schema_version, grant.epoch)

    def _producer_success(self, producer: Producer, request_id: int, schema_version: bytes,
                          epoch: int | None, *, unchecked: bool = False) -> None:
        answer = CommandProducerSuccess(
            request_id=request_id, producer_name=producer.name,
            last_sequence_id=producer.topic.dedup.last_sequence_id(producer.name),
            schema_version=schema_version)
        if epoch is not None:
            answer.topic_epoch = epoch
        command = BaseCommand(type_=Type.PRODUCER_SUCCESS, producer_success=answer)
        if unchecked:
            # The second PRODUCER_SUCCESS of a waiting producer, which the generated machines
            # do not model (and which comes from another session's release).
            try:
                self._emit_unchecked(command)
            except Exception as exc:  # noqa: BLE001 - as _safely: not into the releaser's call
                log.warning("connection %s: cannot send PRODUCER_SUCCESS: %s", self.peer, exc)
        else:
            self._emit(command)

    def _drop_producer(self, producer: Producer) -> None:
        """Forget a producer this connection had (closed, fenced or refused)."""
        if self.producers.get(producer.producer_id) is producer:
            del self.producers[producer.producer_id]
            producer.topic.producer_names.discard(producer.name)
            producer.topic.dedup.producer_disconnected(producer.name)
            producer.topic.access.release(producer)

    def _fence_producer(self, producer: Producer) -> None:
        """ExclusiveWithFencing took the topic: close this producer from the broker's side;
        the client reconnects with its old topic epoch and is refused as fenced."""
        if self.producers.get(producer.producer_id) is not producer:
            return
        self._drop_producer(producer)
        self._safely("CLOSE_PRODUCER", BaseCommand(
            type_=Type.CLOSE_PRODUCER, close_producer=CommandCloseProducer(
                producer_id=producer.producer_id, request_id=NO_REQUEST)))

    def on_send(self, body: CommandSend, frame: frames.Frame) -> None:
        producer = self.producers.get(body.producer_id)
        payload = frame.payload
        if producer is not None and not producer.ready:
            self._send_error(body.producer_id, body.sequence_id, ServerError.ProducerBusy,
                             "the producer is waiting for exclusive access")
            return
        if producer is None or payload is None:
            self._send_error(body.producer_id, body.sequence_id, ServerError.UnknownError,
                             "SEND without a payload" if producer else "unknown producer")
            return
        try:
            self._check_send(body, payload.metadata)
        except LimitExceeded as exc:
            self._send_error(body.producer_id, body.sequence_id, ServerError.MetadataError,
                             str(exc))
            return
        raw = frame.raw_payload if isinstance(frame, RawFrame) else payload.encode()
        producer_id, sequence_id = body.producer_id, body.sequence_id
        ledger_id = producer.topic.ledger_id
        highest = body.highest_sequence_id if body.has_highest_sequence_id() else None

        def done(entry_id: int, error: Exception | None) -> None:
            if self.closed or self.producers.get(producer_id) is not producer:
                return
            if error is not None:
                self._send_error(producer_id, sequence_id, ServerError.PersistenceError,
                                 str(error))
                return
            ledger = ledger_id if entry_id >= 0 else UINT64_MASK
            receipt = CommandSendReceipt(
                producer_id=producer_id, sequence_id=sequence_id,
                message_id=MessageIdData(ledgerId=ledger, entryId=entry_id & UINT64_MASK))
            if highest is not None:
                receipt.highest_sequence_id = highest
            self._safely("SEND_RECEIPT", BaseCommand(type_=Type.SEND_RECEIPT,
                                                     send_receipt=receipt))

        self.broker.publish(producer.topic, producer.name, body, payload.metadata, raw, done)

    def _check_send(self, body: CommandSend, metadata: MessageMetadata) -> None:
        """What the log stores of a SEND must fit it: integers in int64, a batch's size in the
        range its ack sets are tracked in."""
        check_int64("sequence_id", body.sequence_id)
        if body.has_highest_sequence_id():
            check_int64("highest_sequence_id", body.highest_sequence_id)
        if metadata.has_highest_sequence_id():
            check_int64("metadata highest_sequence_id", metadata.highest_sequence_id)
        check_int64("publish_time", metadata.publish_time)
        if metadata.has_num_messages_in_batch():
            self.broker.limits.check_batch_size(metadata.num_messages_in_batch)

    def on_close_producer(self, body: CommandCloseProducer, frame: frames.Frame) -> None:
        producer = self.producers.get(body.producer_id)
        request_id = body.request_id
        if producer is None:
            self._success(request_id)
            return
        producer.closing = True

        def closed(error: Exception | None) -> None:
            # After the receipts of everything this producer sent before closing.
            if self.producers.get(producer.producer_id) is producer:
                self._drop_producer(producer)
                if not self.closed:
                    self._safely("SUCCESS", BaseCommand(
                        type_=Type.SUCCESS, success=CommandSuccess(request_id=request_id)))

        self.broker.storage.commit(closed)

    # --- consumers -------------------------------------------------------------------------

    def on_subscribe(self, body: CommandSubscribe, frame: frames.Frame) -> None:
        name, refusal = self._topic_name(body.topic)
        if name is None:
            self._error(body.request_id, ServerError.InvalidTopicName, refusal)
            return
        ranges: list[tuple[int, int]] = []
        meta = body.keySharedMeta
        sticky = (body.subType == SubType.Key_Shared and meta is not None
                  and meta.keySharedMode == KeySharedMode.STICKY)
        if sticky and meta is not None:
            ranges = [(r.start, r.end) for r in meta.hashRanges]
        limits = self.broker.limits
        try:
            limits.check_name("subscription name", body.subscription)
            if body.consumer_name:
                limits.check_name("consumer name", body.consumer_name)
            limits.check_metadata("consumer metadata", body.metadata)
            limits.check_metadata("subscription properties", body.subscription_properties)
            limits.check_hash_ranges(ranges, KEY_HASH_RANGE)
        except LimitExceeded as exc:
            self._error(body.request_id, ServerError.NotAllowedError, str(exc))
            return
        topic = self.broker.topic(name)
        try:
            self._consumer_schema(topic, body.schema)
        except SchemaRefused as exc:
            self._error(body.request_id, exc.error, str(exc))
            return
        sub = self.broker.subscription(topic, body)
        try:
            sub.check_consumer(body.subType)
            if body.subType == SubType.Key_Shared:
                sub.check_key_shared(sticky, ranges)
        except ConsumerBusy as exc:
            self._error(body.request_id, ServerError.ConsumerBusy, str(exc))
            return
        except AssignError as exc:
            self._error(body.request_id, ServerError.ConsumerAssignError, str(exc))
            return
        consumer = Consumer(self, body.consumer_id, sub, name=body.consumer_name or "",
                            priority=body.priority_level, hash_ranges=ranges, sticky=sticky)
        self.consumers[body.consumer_id] = consumer
        self._success(body.request_id)
        sub.add_consumer(consumer, body.subType)

    def on_flow(self, body: CommandFlow, frame: frames.Frame) -> None:
        consumer = self.consumers.get(body.consumer_id)
        if consumer is not None:
            consumer.subscription.flow(consumer, body.messagePermits)

    def _ack_set_refusal(self, consumer: Consumer, body: CommandAck) -> str:
        """Why an ACK's ack sets cannot be applied ("" if they can): an ack set has one bit
        per message of its entry, so one longer than the entry's batch is refused before any
        work is done on it."""
        topic = consumer.subscription.topic
        for mid in body.message_id:
            if not mid.ack_set:
                continue
            entry = topic.entry(mid.entryId) if mid.ledgerId == topic.ledger_id else None
            count = entry.num_messages if entry is not None \
                else self.broker.limits.max_messages_per_batch
            if len(mid.ack_set) > words_for(count):
                return (f"ack set of {len(mid.ack_set)} words for entry {mid.entryId}, which "
                        f"holds {count} messages (at most {words_for(count)} words)")
        return ""

    def on_ack(self, body: CommandAck, frame: frames.Frame) -> None:
        consumer = self.consumers.get(body.consumer_id)
        refusal = self._ack_set_refusal(consumer, body) if consumer is not None else ""
        if refusal:
            log.warning("connection %s: consumer %d: ACK refused: %s", self.peer,
                        body.consumer_id, refusal)
            if body.has_request_id():
                self._safely("ACK_RESPONSE", BaseCommand(
                    type_=Type.ACK_RESPONSE, ackResponse=CommandAckResponse(
                        consumer_id=body.consumer_id, request_id=body.request_id,
                        error=ServerError.NotAllowedError, message=refusal)))
            return
        if consumer is not None:
            sub = consumer.subscription
            ledger = sub.topic.ledger_id
            changed = False
            if body.ack_type == CommandAck.AckType.Cumulative:
                if sub.sub_type not in (SubType.Shared, SubType.Key_Shared):
                    for mid in body.message_id[:1]:
                        if mid.ledgerId == ledger:
                            changed = sub.ack_cumulative(mid.entryId, mid.ack_set)
            else:
                for mid in body.message_id:
                    if mid.ledgerId == ledger:
                        changed = sub.ack(consumer, mid.entryId, mid.ack_set) or changed
            if changed:
                self.broker.cursor_changed(sub)
        if body.has_request_id():
            consumer_id, request_id = body.consumer_id, body.request_id

            def acked(error: Exception | None) -> None:
                answer = CommandAckResponse(consumer_id=consumer_id, request_id=request_id)
                if error is not None:
                    answer.error = ServerError.PersistenceError
                    answer.message = str(error)
                self._safely("ACK_RESPONSE", BaseCommand(type_=Type.ACK_RESPONSE,
                                                         ackResponse=answer))

            self.broker.storage.commit(acked)

    def on_redeliver_unacknowledged_messages(self, body: CommandRedeliverUnacknowledgedMessages,
                                             frame: frames.Frame) -> None:
        consumer = self.consumers.get(body.consumer_id)
        if consumer is None:
            return
        sub = consumer.subscription
        ids = [m.entryId for m in body.message_ids if m.ledgerId == sub.topic.ledger_id]
        sub.redeliver(consumer, ids if body.message_ids else None)

    def on_seek(self, body: CommandSeek, frame: frames.Frame) -> None:
        consumer = self.consumers.get(body.consumer_id)
        if consumer is None:
            self._error(body.request_id, ServerError.ConsumerNotFound, "unknown consumer")
            return
        sub = consumer.subscription
        topic = sub.topic
        if body.message_id is not None:
            position = self.broker.seek_position(topic, body.message_id.ledgerId,
                                                 body.message_id.entryId)
        elif body.has_message_publish_time():
            position = topic.find_by_publish_time(body.message_publish_time)
        else:
            self._error(body.request_id, ServerError.MetadataError,
                        "SEEK needs a message id or a publish time")
            return
        sub.reset(position)
        self.broker.cursor_changed(sub)
        # As Pulsar does: every consumer of the subscription is closed and reconnects, which
        # gives it fresh permits and an empty queue.
        for other in list(sub.consumers):
            other.sink.force_close(other)
        if not sub.durable:
            # Closing its last consumer removed the non-durable subscription, and its reader
            # would come back to a new one at its original start: Pulsar keeps a subscription
            # whose consumers a seek closed, so the reset position is what they resume from.
            self.broker.keep_subscription(sub)
        # The generated consumer machine has no transition for SEEK's SUCCESS (and the consumer
        # has just been closed), so this answer bypasses the machines.
        self._emit_unchecked(BaseCommand(type_=Type.SUCCESS,
                                         success=CommandSuccess(request_id=body.request_id)))

    def on_unsubscribe(self, body: CommandUnsubscribe, frame: frames.Frame) -> None:
        consumer = self.consumers.get(body.consumer_id)
        if consumer is None:
            self._error(body.request_id, ServerError.ConsumerNotFound, "unknown consumer")
            return
        sub = consumer.subscription
        others = [c for c in sub.consumers if c is not consumer]
        if others and not body.force:
            self._error(body.request_id, ServerError.ConsumerBusy,
                        f"subscription {sub.name!r} has other connected consumers")
            return
        for other in others:
            other.sink.force_close(other)
        del self.consumers[body.consumer_id]
        sub.remove_consumer(consumer)
        self.broker.delete_subscription(sub)
        self._success_when_durable(body.request_id)

    def on_close_consumer(self, body: CommandCloseConsumer, frame: frames.Frame) -> None:
        consumer = self.consumers.pop(body.consumer_id, None)
        if consumer is not None:
            self._detach(consumer)
        self._success_when_durable(body.request_id)

    def _success_when_durable(self, request_id: int) -> None:
        """SUCCESS once the cursor changes made so far are on disk: a consumer whose close (or
        unsubscribe) returned has its acknowledgements persisted."""
        self.broker.storage.commit(lambda error: self._safely("SUCCESS", BaseCommand(
            type_=Type.SUCCESS, success=CommandSuccess(request_id=request_id))))

    def _detach(self, consumer: Consumer) -> None:
        sub = consumer.subscription
        sub.remove_consumer(consumer)
        if not sub.durable and not sub.consumers:
            self.broker.delete_subscription(sub)

    def on_get_last_message_id(self, body: CommandGetLastMessageId,
                               frame: frames.Frame) -> None:
        consumer = self.consumers.get(body.consumer_id)
        if consumer is None:
            self._error(body.request_id, ServerError.ConsumerNotFound, "unknown consumer")
            return
        sub = consumer.subscription
        topic = sub.topic
        last = MessageIdData(ledgerId=topic.ledger_id, entryId=topic.durable_id & UINT64_MASK)
        entry = topic.entry(topic.durable_id)
        if entry is not None and entry.is_batch:
            last.batch_index = entry.num_messages - 1
        if topic.partition >= 0:
            last.partition = topic.partition
        mark = MessageIdData(ledgerId=topic.ledger_id, entryId=sub.mark_delete & UINT64_MASK)
        self._emit(BaseCommand(
            type_=Type.GET_LAST_MESSAGE_ID_RESPONSE,
            getLastMessageIdResponse=CommandGetLastMessageIdResponse(
                last_message_id=last, request_id=body.request_id,
                consumer_mark_delete_position=mark)))

    def on_consumer_stats(self, body: CommandConsumerStats, frame: frames.Frame) -> None:
        consumer = self.consumers.get(body.consumer_id)
        answer = CommandConsumerStatsResponse(request_id=body.request_id)
        if consumer is None:
            answer.error_code = ServerError.ConsumerNotFound
            answer.error_message = "unknown consumer"
        else:
            sub = consumer.subscription
            answer.consumerName = consumer.name
            answer.availablePermits = max(consumer.permits, 0)
            answer.unackedMessages = len(consumer.pending)
            answer.type_ = sub.sub_type.name
            answer.msgBacklog = sub.backlog
            answer.address = self.peer
        self._emit(BaseCommand(type_=Type.CONSUMER_STATS_RESPONSE, consumerStatsResponse=answer))
