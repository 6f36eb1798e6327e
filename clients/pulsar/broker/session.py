"""One client connection: a ``PulsarProtocol(server=True)`` whose hooks answer the commands.

The session is sans-IO apart from its transport: ``feed`` takes received bytes, answers go to
``transport.write`` once per event-loop tick. A frame that does not decode, is too large, or
breaks the protocol's state machines closes this connection only (with a logged reason); a
SEND whose payload fails its CRC32C is answered with SEND_ERROR(ChecksumError) and not stored.
Request ids are echoed, never used as keys: clients (the official C++ one among them) reuse them.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from dataclasses import dataclass

from protoframe.generated.pulsar import frames
from protoframe.generated.pulsar.machines import ProtocolViolation, PulsarProtocol, command_of
from protoframe.generated.pulsar.pulsar_api import (
    BaseCommand,
    CommandAck,
    CommandAckResponse,
    CommandActiveConsumerChange,
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
    CommandGetOrCreateSchema,
    CommandGetOrCreateSchemaResponse,
    CommandGetSchema,
    CommandGetSchemaResponse,
    CommandGetTopicsOfNamespace,
    CommandGetTopicsOfNamespaceResponse,
    CommandLookupTopic,
    CommandLookupTopicResponse,
    CommandMessage,
    CommandPartitionedTopicMetadata,
    CommandPartitionedTopicMetadataResponse,
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
    MessageIdData,
    ServerError,
)
from protoframe.runtime.errors import ChecksumFailure, DecodeError

from .state import BrokerState
from .subscriptions import Consumer, ConsumerBusy, Subscription, SubType
from .topics import UINT64_MASK, Entry, InvalidTopicName, Topic, normalize_topic
from .wire import RawFrame, RawStreamDecoder, frame_with_payload

log = logging.getLogger(__name__)

Type = BaseCommand.Type

MAX_MESSAGE_SIZE = 5 * 1024 * 1024
# Room for the command and metadata around a message of MAX_MESSAGE_SIZE (Pulsar's padding).
FRAME_PADDING = 10 * 1024
MAX_PROTOCOL_VERSION = 21
SERVER_VERSION = "protoframe-broker-0.1"
NO_REQUEST = UINT64_MASK  # request id of broker-initiated closes (-1 as the Java broker sends)
_SCHEMA_VERSION_0 = struct.pack(">q", 0)


@dataclass(eq=False)
class Producer:
    producer_id: int
    topic: Topic
    name: str
    closing: bool = False  # CLOSE_PRODUCER received; SUCCESS follows the pending receipts


class Session(PulsarProtocol):
    """The broker's side of one connection."""

    def __init__(self, state: BrokerState, transport: asyncio.Transport, *,
                 keepalive_interval: float | None = 30.0,
                 service_url: str | None = None) -> None:
        limit = MAX_MESSAGE_SIZE + FRAME_PADDING
        super().__init__(server=True, max_frame_size=limit)
        self.decoder = RawStreamDecoder(limit)
        self.broker = state
        self.transport = transport
        self.loop = asyncio.get_running_loop()
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        local = transport.get_extra_info("sockname")
        host, port = (local[0], local[1]) if isinstance(local, tuple) else ("127.0.0.1", 6650)
        # What LOOKUP answers: the address this connection came to, unless one is advertised.
        self.service_url = service_url or f"pulsar://{f'[{host}]' if ':' in host else host}:{port}"
        self.producers: dict[int, Producer] = {}
        self.consumers: dict[int, Consumer] = {}
        self.closed = False
        self._out: list[bytes] = []
        self._flush_scheduled = False
        self._received_since_check = False
        self._ping_outstanding = False
        self._keepalive_interval = keepalive_interval
        self._keepalive: asyncio.TimerHandle | None = None
        if keepalive_interval:
            self._keepalive = self.loop.call_later(keepalive_interval, self._check_alive)

    # --- I/O -------------------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        """Handle bytes received from the client."""
        if self.closed:
            return
        self._received_since_check = True
        chunk = data
        while True:
            try:
                received = self.receive_data(chunk)
                if received and log.isEnabledFor(logging.DEBUG):
                    self._trace(received)
                return
            except ChecksumFailure as exc:
                if not self._corrupt_frame(exc):
                    return
                chunk = b""  # the decoder skipped the bad frame; go on after it
            except (DecodeError, ProtocolViolation) as exc:
                self.abort(f"{type(exc).__name__}: {exc}")
                return
            except Exception as exc:
                log.exception("connection %s: error handling a command", self.peer)
                self.abort(f"internal error: {exc!r}")
                return

    def _trace(self, received: list[frames.Frame]) -> None:
        for frame in received:
            name, body = command_of(frame)
            log.debug("connection %s: received %s %r", self.peer, name,
                      body if name != "SEND" else (body.producer_id, body.sequence_id))

    def _write(self, data: bytes) -> None:
        if self.closed:
            return
        self._out.append(data)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._out and not self.closed:
            out, self._out = self._out, []
            self.transport.write(b"".join(out) if len(out) > 1 else out[0])

    def _emit(self, command: BaseCommand) -> None:
        """Send a command through the state machines."""
        if not self.closed:
            self._write(self.send(frames.Frame(command=command)))

    def _emit_unchecked(self, command: BaseCommand) -> None:
        """Send a command the generated machines do not model (see on_seek)."""
        if not self.closed:
            self._write(frames.Frame(command=command).encode())

    def _safely(self, what: str, action: BaseCommand) -> None:
        """Emit from outside ``feed`` (callbacks, other sessions' dispatch): a failure here
        closes this connection instead of escaping into someone else's call."""
        try:
            self._emit(action)
        except Exception as exc:
            self.abort(f"cannot send {what}: {exc}")

    def abort(self, reason: str, level: int = logging.WARNING) -> None:
        """Close this connection, logging why."""
        if self.closed:
            return
        log.log(level, "closing connection from %s: %s", self.peer, reason)
        self._flush()
        self.closed = True
        self.transport.close()
        self.cleanup()

    def connection_lost(self) -> None:
        if not self.closed:
            log.debug("connection from %s closed by the client", self.peer)
        self._flush_scheduled = False
        self.closed = True
        self.cleanup()

    def cleanup(self) -> None:
        """Release what this connection held: producer names, consumers (their unacknowledged
        messages go to other consumers), the keepalive timer."""
        if self._keepalive is not None:
            self._keepalive.cancel()
            self._keepalive = None
        producers, self.producers = self.producers, {}
        for producer in producers.values():
            producer.topic.producer_names.discard(producer.name)
        consumers, self.consumers = self.consumers, {}
        for consumer in consumers.values():
            self._detach(consumer)

    def _check_alive(self) -> None:
        self._keepalive = None
        if self.closed or not self._keepalive_interval:
            return
        if self._received_since_check:
            self._ping_outstanding = False
        elif self._ping_outstanding:
            self.abort("keepalive: no answer to PING")
            return
        elif self.state("connection") == "connected":
            self._ping_outstanding = True
            self._safely("PING", BaseCommand(type_=Type.PING, ping=CommandPing()))
        self._received_since_check = False
        self._keepalive = self.loop.call_later(self._keepalive_interval, self._check_alive)

    def _corrupt_frame(self, exc: ChecksumFailure) -> bool:
        """Answer a SEND whose payload fails its checksum; False if the connection closed."""
        frame = exc.value
        if not isinstance(frame, frames.Frame) or frame.command.send is None:
            self.abort(f"checksum failure outside a SEND: {exc}")
            return False
        body = frame.command.send
        try:
            self.machines.received("SEND", body)
            log.warning("connection %s: producer %d sent a corrupt message (sequence id %d): %s",
                        self.peer, body.producer_id, body.sequence_id, exc)
            self._send_error(body.producer_id, body.sequence_id, ServerError.ChecksumError,
                             "Checksum failed on the broker")
        except ProtocolViolation as violation:
            self.abort(f"ProtocolViolation: {violation}")
            return False
        return True

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

    def _topic_name(self, name: str) -> str | None:
        try:
            return normalize_topic(name)
        except InvalidTopicName:
            return None

    # --- connection ------------------------------------------------------------------------

    def on_connect(self, body: CommandConnect, frame: frames.Frame) -> None:
        version = min(body.protocol_version, MAX_PROTOCOL_VERSION)
        log.debug("connection %s: CONNECT from %s, protocol %d", self.peer, body.client_version,
                  body.protocol_version)
        self._emit(BaseCommand(type_=Type.CONNECTED, connected=CommandConnected(
            server_version=SERVER_VERSION, protocol_version=version,
            max_message_size=MAX_MESSAGE_SIZE, feature_flags=FeatureFlags())))

    def on_ping(self, body: CommandPing, frame: frames.Frame) -> None:
        self._emit(BaseCommand(type_=Type.PONG, pong=CommandPong()))

    def on_pong(self, body: CommandPong, frame: frames.Frame) -> None:
        self._ping_outstanding = False

    # --- lookups ---------------------------------------------------------------------------

    def on_partitioned_metadata(self, body: CommandPartitionedTopicMetadata,
                                frame: frames.Frame) -> None:
        LookupType = CommandPartitionedTopicMetadataResponse.LookupType
        name = self._topic_name(body.topic)
        if name is None:
            answer = CommandPartitionedTopicMetadataResponse(
                request_id=body.request_id, response=LookupType.Failed,
                error=ServerError.InvalidTopicName, message=f"invalid topic name {body.topic!r}")
        else:
            answer = CommandPartitionedTopicMetadataResponse(
                request_id=body.request_id, response=LookupType.Success,
                partitions=self.broker.partitions_of(name))
        self._emit(BaseCommand(type_=Type.PARTITIONED_METADATA_RESPONSE,
                               partitionMetadataResponse=answer))

    def on_lookup(self, body: CommandLookupTopic, frame: frames.Frame) -> None:
        LookupType = CommandLookupTopicResponse.LookupType
        if self._topic_name(body.topic) is None:
            answer = CommandLookupTopicResponse(
                request_id=body.request_id, response=LookupType.Failed,
                error=ServerError.InvalidTopicName, message=f"invalid topic name {body.topic!r}")
        else:
            # This broker owns every topic: connect here (at the address the client used).
            answer = CommandLookupTopicResponse(
                request_id=body.request_id, response=LookupType.Connect,
                brokerServiceUrl=self.service_url, authoritative=True)
        self._emit(BaseCommand(type_=Type.LOOKUP_RESPONSE, lookupTopicResponse=answer))

    def on_get_topics_of_namespace(self, body: CommandGetTopicsOfNamespace,
                                   frame: frames.Frame) -> None:
        self._emit(BaseCommand(
            type_=Type.GET_TOPICS_OF_NAMESPACE_RESPONSE,
            getTopicsOfNamespaceResponse=CommandGetTopicsOfNamespaceResponse(
                request_id=body.request_id,
                topics=self.broker.topics_of_namespace(body.namespace))))

    def on_get_schema(self, body: CommandGetSchema, frame: frames.Frame) -> None:
        self._emit(BaseCommand(type_=Type.GET_SCHEMA_RESPONSE, getSchemaResponse=(
            CommandGetSchemaResponse(request_id=body.request_id,
                                     error_code=ServerError.TopicNotFound,
                                     error_message="this broker keeps no schemas"))))

    def on_get_or_create_schema(self, body: CommandGetOrCreateSchema,
                                frame: frames.Frame) -> None:
        self._emit(BaseCommand(
            type_=Type.GET_OR_CREATE_SCHEMA_RESPONSE,
            getOrCreateSchemaResponse=CommandGetOrCreateSchemaResponse(
                request_id=body.request_id, schema_version=_SCHEMA_VERSION_0)))

    # --- producers -------------------------------------------------------------------------

    def on_producer(self, body: CommandProducer, frame: frames.Frame) -> None:
        name = self._topic_name(body.topic)
        if name is None:
            self._error(body.request_id, ServerError.InvalidTopicName,
                        f"invalid topic name {body.topic!r}")
            return
        topic = self.broker.topic(name)
        producer_name = body.producer_name or self.broker.new_producer_name()
        if producer_name in topic.producer_names:
            self._error(body.request_id, ServerError.ProducerBusy,
                        f"producer {producer_name!r} is already connected to {name}")
            return
        topic.producer_names.add(producer_name)
        self.producers[body.producer_id] = Producer(body.producer_id, topic, producer_name)
        answer = CommandProducerSuccess(
            request_id=body.request_id, producer_name=producer_name,
            last_sequence_id=topic.dedup.last_sequence_id(producer_name))
        if body.schema is not None:
            answer.schema_version = _SCHEMA_VERSION_0
        self._emit(BaseCommand(type_=Type.PRODUCER_SUCCESS, producer_success=answer))

    def on_send(self, body: CommandSend, frame: frames.Frame) -> None:
        producer = self.producers.get(body.producer_id)
        payload = frame.payload
        if producer is None or payload is None:
            self._send_error(body.producer_id, body.sequence_id, ServerError.UnknownError,
                             "SEND without a payload" if producer else "unknown producer")
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
                del self.producers[producer.producer_id]
                producer.topic.producer_names.discard(producer.name)
                if not self.closed:
                    self._safely("SUCCESS", BaseCommand(
                        type_=Type.SUCCESS, success=CommandSuccess(request_id=request_id)))

        self.broker.storage.commit(closed)

    # --- consumers -------------------------------------------------------------------------

    def on_subscribe(self, body: CommandSubscribe, frame: frames.Frame) -> None:
        name = self._topic_name(body.topic)
        if name is None:
            self._error(body.request_id, ServerError.InvalidTopicName,
                        f"invalid topic name {body.topic!r}")
            return
        topic = self.broker.topic(name)
        sub = self.broker.subscription(topic, body)
        try:
            sub.check_consumer(body.subType)
        except ConsumerBusy as exc:
            self._error(body.request_id, ServerError.ConsumerBusy, str(exc))
            return
        ranges: list[tuple[int, int]] = []
        meta = body.keySharedMeta
        if body.subType == SubType.Key_Shared and meta is not None and meta.hashRanges:
            ranges = [(r.start, r.end) for r in meta.hashRanges]
        consumer = Consumer(self, body.consumer_id, sub, name=body.consumer_name or "",
                            priority=body.priority_level, hash_ranges=ranges)
        self.consumers[body.consumer_id] = consumer
        self._success(body.request_id)
        sub.add_consumer(consumer, body.subType)

    def on_flow(self, body: CommandFlow, frame: frames.Frame) -> None:
        consumer = self.consumers.get(body.consumer_id)
        if consumer is not None:
            consumer.subscription.flow(consumer, body.messagePermits)

    def on_ack(self, body: CommandAck, frame: frames.Frame) -> None:
        consumer = self.consumers.get(body.consumer_id)
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

    # --- DeliverySink: called by subscriptions, possibly from another session's command ----

    def deliver(self, consumer: Consumer, entry: Entry, redelivery_count: int,
                ack_set: list[int]) -> None:
        if self.closed:
            return
        topic = consumer.subscription.topic
        message_id = MessageIdData(ledgerId=topic.ledger_id, entryId=entry.entry_id)
        if topic.partition >= 0:
            message_id.partition = topic.partition  # clients take it from here, as from Pulsar
        message = CommandMessage(consumer_id=consumer.consumer_id, message_id=message_id,
                                 ack_set=ack_set)
        if redelivery_count:
            message.redelivery_count = redelivery_count
        try:
            self.machines.sent("MESSAGE", message)
        except ProtocolViolation as exc:
            self.abort(f"cannot deliver: {exc}")
            return
        command = BaseCommand(type_=Type.MESSAGE, message=message).encode()
        self._write(frame_with_payload(command, entry.payload))
        self._write(entry.payload)

    def active_consumer_change(self, consumer: Consumer, is_active: bool) -> None:
        if self.consumers.get(consumer.consumer_id) is consumer:
            self._safely("ACTIVE_CONSUMER_CHANGE", BaseCommand(
                type_=Type.ACTIVE_CONSUMER_CHANGE,
                active_consumer_change=CommandActiveConsumerChange(
                    consumer_id=consumer.consumer_id, is_active=is_active)))

    def force_close(self, consumer: Consumer) -> None:
        if self.consumers.get(consumer.consumer_id) is consumer:
            del self.consumers[consumer.consumer_id]
            self._detach(consumer)
            self._safely("CLOSE_CONSUMER", BaseCommand(
                type_=Type.CLOSE_CONSUMER, close_consumer=CommandCloseConsumer(
                    consumer_id=consumer.consumer_id, request_id=NO_REQUEST)))


__all__ = ["MAX_MESSAGE_SIZE", "Producer", "Session", "Subscription"]
