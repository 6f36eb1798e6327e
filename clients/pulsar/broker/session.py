"""One client connection of the broker: the command hooks (``commands.Commands``) driven by
the runtime's shared connection (``runtime.io.server``).

The connection does the I/O: received bytes go to the session's ``PulsarProtocol``, which calls
the session's hooks to answer them; answers are coalesced into one write per event-loop tick,
keepalive pings a quiet client (``PingWhenQuiet``) and drops one that stays silent. A frame that
does not decode, is too large, or breaks the protocol's state machines closes this connection
only (with a logged reason); a SEND whose payload fails its CRC32C is answered with
SEND_ERROR(ChecksumError) and not stored. Until CONNECTED has gone out, anything but CONNECT is
answered with ERROR and closes the connection (``HandshakeProtocol``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from protoframe.generated.pulsar import frames
from protoframe.generated.pulsar.machines import ProtocolViolation, PulsarProtocol, command_of
from protoframe.generated.pulsar.pulsar_api import (
    BaseCommand,
    CommandActiveConsumerChange,
    CommandCloseConsumer,
    CommandError,
    CommandMessage,
    CommandPing,
    MessageIdData,
    ServerError,
)
from protoframe.runtime.errors import ChecksumFailure, ConnectionClosed, DecodeError
from protoframe.runtime.io.keepalive import PingWhenQuiet
from protoframe.runtime.io.server import Session as ServedSession

from .commands import (
    FRAME_PADDING,
    MAX_MESSAGE_SIZE,
    NO_REQUEST,
    Commands,
    Producer,
)
from .entries import Entry
from .state import BrokerState
from .storage import StorageError
from .subscriptions import Consumer, Subscription
from .topic_watchers import TopicListWatch
from .wire import RawStreamDecoder, frame_with_payload

log = logging.getLogger(__name__)

Type = BaseCommand.Type

__all__ = ["MAX_MESSAGE_SIZE", "Producer", "Session", "Subscription"]


class HandshakeProtocol(PulsarProtocol):
    """``PulsarProtocol`` that lets nothing but CONNECT through before the connection is
    connected: the generated machines check each entity (producer, consumer) on its own, so
    without this a PRODUCER and a SEND with no CONNECT would store a message."""

    def __init__(self, session: Session) -> None:
        super().__init__(server=True, hooks=session)
        self.session = session

    def _handle(self, frame: frames.Frame) -> bool:
        if self.machines.state("connection") != "connected":
            name, body = command_of(frame)
            if name != "CONNECT":
                self.session.refuse_before_connect(name, body)
                return False
        return super()._handle(frame)


class Session(Commands, ServedSession[frames.Frame]):
    """The broker's side of one connection."""

    def __init__(self, state: BrokerState, *, service_url: str | None = None) -> None:
        limit = state.limits.max_message_size + FRAME_PADDING
        # The session uses the protocol (its hooks answer what arrives) rather than being one.
        self.protocol: PulsarProtocol
        ServedSession.__init__(self, HandshakeProtocol(self))
        self.protocol.decoder = RawStreamDecoder(limit)
        self.broker = state
        self.advertised_url = service_url
        self.peer = "?"
        self.service_url = service_url or ""
        self.producers: dict[int, Producer] = {}
        self.consumers: dict[int, Consumer] = {}
        self.watches: dict[int, TopicListWatch] = {}
        self._closing_logged = False

    def keepalive(self, interval: float) -> PingWhenQuiet[frames.Frame]:
        """This connection's keepalive: PING a client quiet for ``interval`` (once it has
        connected), drop it when the next ``interval`` is quiet too."""
        return PingWhenQuiet(
            lambda: frames.Frame(command=BaseCommand(type_=Type.PING, ping=CommandPing())),
            interval, may_ping=lambda: self.protocol.state("connection") == "connected",
            on_expired=lambda reason: self.abort("keepalive: no answer to PING"))

    # --- I/O -------------------------------------------------------------------------------

    def connection_made(self) -> None:
        transport = self.connection.transport
        assert transport is not None
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        local = transport.get_extra_info("sockname")
        host, port = (local[0], local[1]) if isinstance(local, tuple) else ("127.0.0.1", 6650)
        # What LOOKUP answers: the address this connection came to, unless one is advertised.
        self.service_url = self.advertised_url or \
            f"pulsar://{f'[{host}]' if ':' in host else host}:{port}"
        self.connection.on_writable(self._resume_delivery)
        log.debug("connection from %s", self.peer)

    @property
    def established(self) -> bool:
        return self.protocol.state("connection") == "connected"

    def frame_received(self, frame: frames.Frame) -> None:
        # The hooks answered it inside receive_data; what is left is tracing.
        if log.isEnabledFor(logging.DEBUG):
            name, body = command_of(frame)
            log.debug("connection %s: received %s %r", self.peer, name,
                      body if name != "SEND" else (body.producer_id, body.sequence_id))

    @property
    def transport(self) -> asyncio.Transport:
        """The connection's transport (tests cut connections with it)."""
        transport = self.connection.transport
        assert transport is not None
        return transport

    @property
    def closed(self) -> bool:
        return not self.connection.is_open

    def _emit(self, command: BaseCommand) -> None:
        if not self.closed:
            self.connection.write(frames.Frame(command=command))

    def _emit_unchecked(self, command: BaseCommand) -> None:
        if not self.closed:
            self.connection.write_raw(frames.Frame(command=command).encode())

    def _safely(self, what: str, action: BaseCommand) -> None:
        """Emit from outside the connection's read (callbacks, other sessions' dispatch): a
        failure here closes this connection instead of escaping into someone else's call."""
        try:
            self._emit(action)
        except Exception as exc:
            self.abort(f"cannot send {what}: {exc}")

    def abort(self, reason: str, level: int = logging.WARNING) -> None:
        """Close this connection, logging why; what is queued is written first."""
        if self.closed:
            return
        log.log(level, "closing connection from %s: %s", self.peer, reason)
        self._closing_logged = True
        self.connection.close(ConnectionClosed(f"connection from {self.peer}: {reason}"))
        # Now, not once the transport has written what is queued (a dead client may never
        # read it): its producer names and messages are free for the next connection.
        self.cleanup()

    def connection_lost(self, reason: ConnectionClosed) -> None:
        cause = reason.__cause__
        if self._closing_logged:
            pass
        elif isinstance(cause, DecodeError | ProtocolViolation):
            log.warning("closing connection from %s: %s: %s", self.peer, type(cause).__name__,
                        cause)
        elif cause is not None and not isinstance(cause, OSError | ConnectionClosed):
            log.warning("closing connection from %s: internal error: %r", self.peer, cause,
                        exc_info=cause)
        else:
            log.debug("connection from %s closed: %s", self.peer, reason)
        self.cleanup()

    def cleanup(self) -> None:
        """Release what this connection held: producer names, consumers (their unacknowledged
        messages go to other consumers)."""
        producers, self.producers = self.producers, {}
        for producer in producers.values():
            producer.topic.producer_names.discard(producer.name)
            producer.topic.dedup.producer_disconnected(producer.name)
            producer.topic.access.release(producer)
        consumers, self.consumers = self.consumers, {}
        for consumer in consumers.values():
            self._detach(consumer)
        self.close_watches()

    def refuse_before_connect(self, name: str, body: Any) -> None:
        """Answer a command that came before CONNECT with ERROR, then close the connection."""
        request_id = getattr(body, "request_id", None)
        self._emit_unchecked(BaseCommand(type_=Type.ERROR, error=CommandError(
            request_id=request_id if isinstance(request_id, int) else NO_REQUEST,
            error=ServerError.NotAllowedError,
            message=f"{name} before CONNECT: a connection must start with CONNECT")))
        self.abort(f"{name} before CONNECT")

    def corrupt_frame(self, frame: frames.Frame, exc: ChecksumFailure) -> None:
        """Answer a SEND whose payload fails its checksum (the connection goes on); anything
        else corrupt closes the connection."""
        if not isinstance(frame, frames.Frame) or frame.command.send is None:
            self.abort(f"checksum failure outside a SEND: {exc}")
            return
        body = frame.command.send
        try:
            self.protocol.machines.received("SEND", body)
            log.warning("connection %s: producer %d sent a corrupt message (sequence id %d): %s",
                        self.peer, body.producer_id, body.sequence_id, exc)
            self._send_error(body.producer_id, body.sequence_id, ServerError.ChecksumError,
                             "Checksum failed on the broker")
        except ProtocolViolation as violation:
            self.abort(f"ProtocolViolation: {violation}")

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
            self.protocol.machines.sent("MESSAGE", message)
        except ProtocolViolation as exc:
            self.abort(f"cannot deliver: {exc}")
            return
        try:
            payload = entry.payload
        except StorageError as exc:
            # Never serve what the log cannot give back intact: this consumer's connection is
            # closed (its client reconnects); the others go on.
            log.error("%s: cannot deliver %s entry %d: %s", self.peer, topic.name,
                      entry.entry_id, exc)
            self.abort(f"cannot read entry {entry.entry_id} of {topic.name}: {exc}")
            return
        command = BaseCommand(type_=Type.MESSAGE, message=message).encode()
        self.connection.write_raw(frame_with_payload(command, payload))
        self.connection.write_raw(payload)
        if not self.connection.writable:
            # Output backpressure: a client that does not read must not make the broker hold
            # its whole backlog in the transport's buffer (permits are no limit: 10^9 is legal).
            for held in self.consumers.values():
                held.paused = True

    def _resume_delivery(self) -> None:
        """The transport's buffer drained below its low-water mark: dispatch again."""
        subscriptions = []
        for consumer in self.consumers.values():
            if consumer.paused:
                consumer.paused = False
                subscriptions.append(consumer.subscription)
        for subscription in subscriptions:
            subscription.dispatch()

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

