"""One client connection to a Pulsar broker: handshake, dispatch and shared use.

``ClientConnection`` owns a ``runtime.io.endpoint.Endpoint``: the connection driving the
generated ``PulsarProtocol`` (``client_protocol()``: it checks every frame against the spec's
state machines, and drops the frames they refuse), the generated ``PulsarRequests`` for
request/response commands on it, and the requests failing when it ends. On top it keeps the
producers and consumers that use the connection; any number of them share one connection, their
commands interleave.

Received frames that are not answers are dispatched on their command type before any request is
looked up (the endpoint's ``route``): MESSAGE to its consumer, SEND_RECEIPT/SEND_ERROR to its
producer, CLOSE_PRODUCER/CLOSE_CONSUMER to the producer/consumer the broker closes; everything
else goes on to the endpoint's ``dispatch`` and the requests. A MESSAGE whose checksum fails
goes to its consumer too (the endpoint's ``on_corrupt_frame``).

A command type the generated code does not know (one a newer broker added) closes the
connection: the reason's cause is an ``UnknownCommandTypeError`` carrying the number. Pulsar's
Java client does the same (its decoder cannot parse the command, and ``exceptionCaught`` closes
the channel); ignoring it instead could leave a request waiting for an answer that came in it.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable
from typing import Protocol

from protoframe.generated.pulsar import pulsar_api as pb
from protoframe.generated.pulsar.client import PulsarRequests
from protoframe.generated.pulsar.commands import PROTOCOL_VERSION
from protoframe.generated.pulsar.frames import Frame, Payload
from protoframe.generated.pulsar.machines import ProtocolViolation, PulsarProtocol
from protoframe.runtime.errors import ChecksumFailure, ConnectionClosed, UnknownCommandError
from protoframe.runtime.io.auth import Authentication
from protoframe.runtime.io.connection import Connection
from protoframe.runtime.io.endpoint import Endpoint
from protoframe.runtime.io.keepalive import PingPong

__all__ = ["ClientConnection", "ConsumerEvents", "ProducerEvents", "PulsarKeepalive",
           "CLIENT_VERSION", "PROTOCOL_VERSION", "client_protocol", "drop_refused"]

log = logging.getLogger(__name__)

T = pb.BaseCommand.Type
CLIENT_VERSION = "protoframe-pulsar-0.1"
# Room for the command and metadata around a payload of max_message_size (as the Java client).
FRAME_PADDING = 10 * 1024


def client_protocol() -> PulsarProtocol:
    """The client's ``PulsarProtocol``: a received frame the state machines refuse is dropped
    (and logged) by ``drop_refused`` instead of failing the whole read, which would lose the
    frames after it."""
    return PulsarProtocol(on_violation=drop_refused)


def drop_refused(error: ProtocolViolation | UnknownCommandError, frame: Frame) -> bool:
    """The client's violation policy: drop a refused frame, but keep an answer."""
    if not isinstance(error, ProtocolViolation):
        raise error
    if error.command in _ANSWERS:
        # An answer still goes to the request waiting for it: the spec's consumer machine has
        # no transition for SEEK's SUCCESS (nor for it arriving after the broker closed the
        # consumer, as brokers do on seek).
        log.debug("answer outside the state machines: %s", error)
        return True
    log.warning("dropping a frame the protocol does not allow here: %s", error)
    return False


# PRODUCER_SUCCESS: a WaitForExclusive producer's second answer, once it has the topic.
_ANSWERS = frozenset({"SUCCESS", "ERROR", "PRODUCER_SUCCESS"})


class PulsarKeepalive:
    """PING and PONG, for the runtime's keepalive."""

    _PING = Frame(command=pb.BaseCommand(type_=T.PING, ping=pb.CommandPing()))
    _PONG = Frame(command=pb.BaseCommand(type_=T.PONG, pong=pb.CommandPong()))

    def ping(self) -> Frame:
        return self._PING

    def pong(self) -> Frame:
        return self._PONG

    def is_ping(self, frame: Frame) -> bool:
        return frame.command.type_ is T.PING


class _HandleEvents(Protocol):
    """What a connection tells every producer and consumer registered on it."""

    def connection_closed(self, cnx: ClientConnection, exc: BaseException) -> None: ...

    def closed_by_broker(self, cnx: ClientConnection) -> None: ...


class ProducerEvents(_HandleEvents, Protocol):
    """What a connection calls on a producer registered in ``ClientConnection.producers``."""

    def receipt_received(self, body: pb.CommandSendReceipt, cnx: ClientConnection) -> None: ...

    def send_error_received(self, body: pb.CommandSendError, cnx: ClientConnection
                            ) -> None: ...


class ConsumerEvents(_HandleEvents, Protocol):
    """What a connection calls on a consumer registered in ``ClientConnection.consumers``."""

    def message_received(self, cmd: pb.CommandMessage, payload: Payload,
                         cnx: ClientConnection) -> None: ...

    def corrupt_message_received(self, cmd: pb.CommandMessage, payload: Payload | None,
                                 cnx: ClientConnection) -> None: ...

    def reached_end_of_topic(self) -> None: ...

    def active_changed(self, is_active: bool) -> None: ...


class TopicListEvents(Protocol):
    """What a connection needs of a topic-list watcher (``topic_discovery``)."""

    def listed(self, body: pb.CommandWatchTopicListSuccess) -> None: ...

    def updated(self, body: pb.CommandWatchTopicUpdate) -> None: ...


class _ConnectOptions(Protocol):
    """What a connection needs from the client that makes it."""

    authentication: Authentication
    operation_timeout: float
    connection_timeout: float
    keepalive_interval: float

    def ssl_context(self) -> ssl.SSLContext | None: ...


class ClientConnection:
    """A handshaken connection to one broker (``logical`` address, reached via ``physical``)."""

    def __init__(self, options: _ConnectOptions, logical: str, physical: str) -> None:
        self.options = options
        self.logical = logical
        self.physical = physical
        self.protocol = client_protocol()
        interval = options.keepalive_interval
        self.endpoint = Endpoint(
            self.protocol, lambda c: PulsarRequests(c, timeout=options.operation_timeout),
            keepalive=PingPong(PulsarKeepalive(), interval) if interval else None,
            name=physical if logical == physical else f"{logical} via {physical}",
            route=self._on_frame, on_corrupt_frame=self._on_corrupt_frame)
        self.conn: Connection[Frame] = self.endpoint.connection
        self.requests = self.endpoint.requests
        self.producers: dict[int, ProducerEvents] = {}
        self.consumers: dict[int, ConsumerEvents] = {}
        self._challenges: set[asyncio.Task[None]] = set()
        self.topic_watchers: dict[int, TopicListEvents] = {}
        self.supports_topic_watchers = False
        self.max_message_size = 5 * 1024 * 1024
        self.server_version = ""
        self.protocol_version = 0
        self.endpoint.on_close(self._closed)
        self._close_listeners: list[Callable[[ClientConnection, ConnectionClosed], None]] = []
        self._dispatch: dict[pb.BaseCommand.Type, Callable[[Frame], None]] = {
            T.MESSAGE: self._on_message,
            T.SEND_RECEIPT: self._on_send_receipt,
            T.SEND_ERROR: self._on_send_error,
            T.CLOSE_PRODUCER: self._on_close_producer,
            T.CLOSE_CONSUMER: self._on_close_consumer,
            T.REACHED_END_OF_TOPIC: self._on_reached_end_of_topic,
            T.ACTIVE_CONSUMER_CHANGE: self._on_active_consumer_change,
            T.AUTH_CHALLENGE: self._on_auth_challenge,
            T.WATCH_TOPIC_LIST_SUCCESS: self._on_watch_topic_list_success,
            T.WATCH_TOPIC_UPDATE: self._on_watch_topic_update,
            T.PONG: _ignore_frame,
        }
        self._by_number: list[Callable[[Frame], None] | None] = [None] * (max(T) + 1)
        for kind, handler in self._dispatch.items():
            self._by_number[kind] = handler

    def __repr__(self) -> str:
        return f"<ClientConnection {self.conn.name}>"

    @property
    def is_open(self) -> bool:
        return self.conn.is_open

    # ---- setup -------------------------------------------------------------------------------

    async def open(self) -> None:
        """Connect and handshake (CONNECT / CONNECTED)."""
        host, port, tls = split_url(self.physical)
        context = self.options.ssl_context() if tls else None
        if tls and context is None:
            raise ConnectionClosed(f"{self.physical}: TLS address but no TLS configuration")
        # Before connecting: a plug-in that fetches credentials (OAuth2) must not hold an
        # open, silent connection past the broker's handshake timeout.
        await self.options.authentication.prepare()
        await self.endpoint.connect(host, port, ssl_context=context,
                                    timeout=self.options.connection_timeout)
        auth = self.options.authentication
        proxy_to = None
        if self.logical != self.physical:
            proxy_to = strip_scheme(self.logical)
        try:
            connected = await self.requests.connect(
                CLIENT_VERSION,
                protocol_version=PROTOCOL_VERSION,
                auth_method_name=auth.method_name,
                auth_data=auth.auth_data(),
                feature_flags=pb.FeatureFlags(supports_auth_refresh=True,
                                              supports_broker_entry_metadata=True),
                proxy_to_broker_url=proxy_to,
                timeout=self.options.operation_timeout,
            )
        except BaseException:
            self.endpoint.abort()
            raise
        self.server_version = connected.server_version
        self.protocol_version = connected.protocol_version
        flags = connected.feature_flags
        self.supports_topic_watchers = flags is not None and bool(flags.supports_topic_watchers)
        if connected.has_max_message_size():
            self.max_message_size = connected.max_message_size
            self.protocol.decoder.max_frame_size = connected.max_message_size + FRAME_PADDING

    def on_close(self, listener: Callable[[ClientConnection, ConnectionClosed], None]) -> None:
        self._close_listeners.append(listener)

    def close(self) -> None:
        self.endpoint.close()

    def _closed(self, exc: ConnectionClosed) -> None:
        # The endpoint has failed the waiting requests already (its close listener is first).
        producers, self.producers = list(self.producers.values()), {}
        consumers, self.consumers = list(self.consumers.values()), {}
        for producer in producers:
            producer.connection_closed(self, exc)
        for consumer in consumers:
            consumer.connection_closed(self, exc)
        for listener in self._close_listeners:
            listener(self, exc)

    # ---- writing -----------------------------------------------------------------------------

    def write(self, frame: Frame) -> None:
        self.conn.write(frame)

    def write_command(self, command: pb.BaseCommand) -> None:
        self.conn.write(Frame(command=command))

    # ---- dispatch ----------------------------------------------------------------------------

    def _on_frame(self, frame: Frame) -> None:
        # A list indexed by the type's number: hashing an enum member costs a Python call.
        kind = frame.command.type_
        handler = self._by_number[kind] if kind < len(self._by_number) else None
        if handler is not None:
            handler(frame)
        else:
            self.endpoint.dispatch(frame)

    def _on_message(self, frame: Frame) -> None:
        body = frame.command.message
        assert body is not None
        consumer = self.consumers.get(body.consumer_id)
        if consumer is not None and frame.payload is not None:
            consumer.message_received(body, frame.payload, self)

    def _on_corrupt_frame(self, frame: Frame, exc: ChecksumFailure) -> None:
        body = frame.command.message
        if frame.command.type_ is T.MESSAGE and body is not None:
            consumer = self.consumers.get(body.consumer_id)
            if consumer is not None:
                consumer.corrupt_message_received(body, frame.payload, self)
                return
        log.warning("%r: dropped a corrupt %s frame: %s", self, frame.command.type_.name, exc)

    def _on_send_receipt(self, frame: Frame) -> None:
        body = frame.command.send_receipt
        assert body is not None
        producer = self.producers.get(body.producer_id)
        if producer is not None:
            producer.receipt_received(body, self)

    def _on_send_error(self, frame: Frame) -> None:
        body = frame.command.send_error
        assert body is not None
        producer = self.producers.get(body.producer_id)
        if producer is not None:
            producer.send_error_received(body, self)

    def _on_close_producer(self, frame: Frame) -> None:
        body = frame.command.close_producer
        assert body is not None
        producer = self.producers.pop(body.producer_id, None)
        if producer is not None:
            producer.closed_by_broker(self)

    def _on_close_consumer(self, frame: Frame) -> None:
        body = frame.command.close_consumer
        assert body is not None
        consumer = self.consumers.pop(body.consumer_id, None)
        if consumer is not None:
            consumer.closed_by_broker(self)

    def _on_reached_end_of_topic(self, frame: Frame) -> None:
        body = frame.command.reachedEndOfTopic
        assert body is not None
        consumer = self.consumers.get(body.consumer_id)
        if consumer is not None:
            consumer.reached_end_of_topic()

    def _on_active_consumer_change(self, frame: Frame) -> None:
        body = frame.command.active_consumer_change
        assert body is not None
        consumer = self.consumers.get(body.consumer_id)
        if consumer is not None:
            consumer.active_changed(body.is_active)

    def _on_watch_topic_list_success(self, frame: Frame) -> None:
        body = frame.command.watchTopicListSuccess
        assert body is not None
        watcher = self.topic_watchers.get(body.watcher_id)
        if watcher is not None:
            watcher.listed(body)

    def _on_watch_topic_update(self, frame: Frame) -> None:
        body = frame.command.watchTopicUpdate
        assert body is not None
        watcher = self.topic_watchers.get(body.watcher_id)
        if watcher is not None:
            watcher.updated(body)

    def _on_auth_challenge(self, frame: Frame) -> None:
        body = frame.command.authChallenge
        assert body is not None
        challenge = body.challenge.auth_data if body.challenge is not None else b""
        # Answered from a task: the plug-in may fetch fresh credentials over the network.
        task = asyncio.get_running_loop().create_task(self._answer_challenge(challenge or b""))
        self._challenges.add(task)
        task.add_done_callback(self._challenges.discard)

    async def _answer_challenge(self, challenge: bytes) -> None:
        auth = self.options.authentication
        try:
            await auth.prepare(challenge)
            data = auth.challenge(challenge)
        except Exception as exc:
            self.conn.abort(exc)
            return
        if not self.conn.is_open:
            return
        self.write_command(pb.BaseCommand(
            type_=T.AUTH_RESPONSE,
            authResponse=pb.CommandAuthResponse(
                client_version=CLIENT_VERSION,
                response=pb.AuthData(auth_method_name=auth.method_name, auth_data=data),
                protocol_version=PROTOCOL_VERSION)))


def _ignore_frame(frame: Frame) -> None:
    pass


def split_url(url: str) -> tuple[str, int, bool]:
    """``pulsar://host:port`` -> (host, port, tls?); default ports 6650 and 6651."""
    tls = url.startswith("pulsar+ssl://")
    rest = strip_scheme(url)
    rest = rest.split("/", 1)[0]
    if "," in rest:
        rest = rest.split(",", 1)[0]
    if rest.startswith("["):
        host, _, port = rest[1:].partition("]")
        port = port.lstrip(":")
    else:
        host, _, port = rest.rpartition(":") if ":" in rest else (rest, "", "")
    return host, int(port) if port else (6651 if tls else 6650), tls


def strip_scheme(url: str) -> str:
    for scheme in ("pulsar+ssl://", "pulsar://"):
        if url.startswith(scheme):
            return url[len(scheme):].rstrip("/")
    return url.rstrip("/")
