"""An asyncio AMQP 0-9-1 client: the connection handshake (PLAIN), channels, queue.declare,
basic.publish / get / consume / ack, heartbeats and closing, on the generated frames module and
``protoframe.runtime.io``'s ``Connection``.

``AmqpWire`` is the sans-IO protocol object the connection drives: ``send`` is the generated
``encode`` of a frame (or of the protocol header), ``receive_data`` the generated
``StreamDecoder``; nothing else writes or reads the socket. Everything below it is the
protocol's logic: which method answers which, the content of a delivery (its header and
body frames), the SASL PLAIN response.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

from amqp_client.proto.amqp import frames as f
from amqp_client.tables import Value, to_table
from protoframe.runtime.io.connection import Connection, open_connection

FRAME_OVERHEAD = 8  # type, channel, size and the frame-end octet
BASIC_CLASS = 60
DEFAULT_TIMEOUT = 30.0
Outgoing = f.Frame | f.ProtocolHeader


class AmqpWire:
    """Bytes in, frames out, by the generated code only (what ``Connection`` drives)."""

    def __init__(self, max_frame_size: int = 1 << 20) -> None:
        # The server sends no first message: the client's decoder starts with frames.
        self.decoder = f.StreamDecoder(max_frame_size, handshake=False)

    def receive_data(self, data: bytes) -> Sequence[Outgoing]:
        return self.decoder.feed(data)

    def send(self, frame: Outgoing) -> bytes:
        return frame.encode()


class ChannelClosedError(Exception):
    """The server closed a channel (Channel.Close) or the connection (Connection.Close)."""

    def __init__(self, close: f.ChannelClose | f.ConnectionClose) -> None:
        super().__init__(f"{close.reply_code} {close.reply_text} "
                         f"(class {close.class_id}, method {close.method_id})")
        self.reply_code = close.reply_code
        self.reply_text = close.reply_text
        self.class_id = close.class_id
        self.method_id = close.method_id


@dataclass
class Message:
    """A delivered message: the method that announced it, its properties and its body."""

    method: f.BasicDeliver | f.BasicGetOk
    properties: f.ContentHeader
    body: bytes

    @property
    def delivery_tag(self) -> int:
        return self.method.delivery_tag


@dataclass
class _Content:
    method: f.BasicDeliver | f.BasicGetOk
    header: f.ContentHeader | None = None
    parts: list[bytes] = field(default_factory=list)
    size: int = 0


class Channel:
    """One channel: its methods are awaited in turn, deliveries queue in ``deliveries``."""

    def __init__(self, client: AmqpClient, number: int) -> None:
        self.client = client
        self.number = number
        self.methods: asyncio.Queue[f.MethodArguments] = asyncio.Queue()
        self.deliveries: asyncio.Queue[Message] = asyncio.Queue()
        self.closed: ChannelClosedError | None = None
        self._content: _Content | None = None
        self.get_ok: Message | None = None  # the content of the last Basic.GetOk

    def _send(self, arguments: f.MethodArguments) -> None:
        self.client.send_method(self.number, arguments)

    async def _call(self, arguments: f.MethodArguments,
                    *answers: type[f.MethodArguments]) -> f.MethodArguments:
        if self.closed is not None:
            raise self.closed
        self._send(arguments)
        return await self._expect(*answers)

    async def _expect(self, *answers: type[f.MethodArguments]) -> f.MethodArguments:
        while True:
            got = await asyncio.wait_for(self.methods.get(), self.client.timeout)
            if isinstance(got, (f.ChannelClose, f.ConnectionClose)):
                raise ChannelClosedError(got)
            if isinstance(got, answers):
                return got

    def _received(self, frame: f.Frame) -> None:
        payload = frame.payload
        if isinstance(payload, f.Method):
            arguments = payload.arguments
            if isinstance(arguments, (f.BasicDeliver, f.BasicGetOk)):
                self._content = _Content(arguments)
                return
            if isinstance(arguments, f.ChannelClose):
                self.closed = ChannelClosedError(arguments)
                self._send(f.ChannelCloseOk())
            self.methods.put_nowait(arguments)
        elif self._content is not None:
            content = self._content
            if isinstance(payload, f.ContentHeader):
                content.header = payload
            elif isinstance(payload, f.Body):
                content.parts.append(payload.data)
                content.size += len(payload.data)
            if content.header is not None and content.size >= content.header.body_size:
                self._content = None
                message = Message(content.method, content.header, b"".join(content.parts))
                if isinstance(content.method, f.BasicGetOk):
                    self.get_ok = message
                    self.methods.put_nowait(content.method)
                else:
                    self.deliveries.put_nowait(message)

    async def declare_queue(self, queue: str, *, passive: bool = False, durable: bool = False,
                            exclusive: bool = False, auto_delete: bool = False,
                            arguments: dict[str, Value] | None = None) -> f.QueueDeclareOk:
        """Queue.Declare; a passive declare of a missing queue raises ChannelClosedError (404)
        and the channel is closed."""
        answer = await self._call(f.QueueDeclare(
            queue=queue, no_wait=False, auto_delete=auto_delete, exclusive=exclusive,
            durable=durable, passive=passive, arguments=to_table(arguments or {})),
            f.QueueDeclareOk)
        assert isinstance(answer, f.QueueDeclareOk)
        return answer

    def publish(self, exchange: str, routing_key: str, body: bytes,
                properties: f.ContentHeader | None = None, *, mandatory: bool = False) -> None:
        """Basic.Publish, its content header and the body in frames of at most frame_max."""
        if self.closed is not None:
            raise self.closed
        header = dataclasses.replace(
            properties or f.ContentHeader(class_id=BASIC_CLASS, body_size=0),
            class_id=BASIC_CLASS, body_size=len(body))
        self._send(f.BasicPublish(exchange=exchange, routing_key=routing_key,
                                  immediate=False, mandatory=mandatory))
        client = self.client
        client.send_frame(f.Frame(channel=self.number, payload=header))
        step = client.frame_max - FRAME_OVERHEAD
        for start in range(0, len(body), step):
            client.send_frame(f.Frame(channel=self.number,
                                      payload=f.Body(data=body[start:start + step])))

    async def get(self, queue: str, *, no_ack: bool = False) -> Message | None:
        """Basic.Get: the next message (GetOk and its content) or None (GetEmpty)."""
        answer = await self._call(f.BasicGet(queue=queue, no_ack=no_ack),
                                  f.BasicGetOk, f.BasicGetEmpty)
        if isinstance(answer, f.BasicGetEmpty):
            return None
        message, self.get_ok = self.get_ok, None
        assert message is not None
        return message

    async def consume(self, queue: str, consumer_tag: str = "", *,
                      no_ack: bool = False) -> str:
        """Basic.Consume; deliveries then arrive in ``deliveries``. Returns the tag."""
        answer = await self._call(f.BasicConsume(
            queue=queue, consumer_tag=consumer_tag, no_wait=False, exclusive=False,
            no_ack=no_ack, no_local=False, arguments=to_table({})), f.BasicConsumeOk)
        assert isinstance(answer, f.BasicConsumeOk)
        return answer.consumer_tag

    async def next_delivery(self) -> Message:
        return await asyncio.wait_for(self.deliveries.get(), self.client.timeout)

    def ack(self, delivery_tag: int, *, multiple: bool = False) -> None:
        self._send(f.BasicAck(delivery_tag=delivery_tag, multiple=multiple))

    async def close(self, reply_code: int = 200, reply_text: str = "bye") -> None:
        await self._call(f.ChannelClose(reply_code=reply_code, reply_text=reply_text,
                                        class_id=0, method_id=0), f.ChannelCloseOk)
        self.closed = ChannelClosedError(f.ChannelClose(
            reply_code=reply_code, reply_text=reply_text, class_id=0, method_id=0))


class AmqpClient:
    """A connection: ``await AmqpClient.connect(...)``, then ``await client.channel()``."""

    def __init__(self, timeout: float = DEFAULT_TIMEOUT, wire: AmqpWire | None = None) -> None:
        self.wire = wire or AmqpWire()
        self.timeout = timeout
        self.connection: Connection[Outgoing] | None = None
        self.control = Channel(self, 0)
        self.channels: dict[int, Channel] = {}
        self.frame_max = 4096
        self.heartbeat = 0
        self.heartbeats_received = 0
        self.server_properties: f.FieldTable | None = None
        self.close_ok: f.ConnectionCloseOk | None = None

    @classmethod
    async def connect(cls, host: str, port: int, user: str, password: str, vhost: str = "/",
                      *, heartbeat: int = 0, frame_max: int = 131072,
                      timeout: float = DEFAULT_TIMEOUT,
                      wire: AmqpWire | None = None) -> AmqpClient:
        """Open a connection: the protocol header, Start/StartOk (PLAIN), Tune/TuneOk (the
        smaller of each limit), Open/OpenOk."""
        client = cls(timeout, wire)
        client.connection = await open_connection(
            host, port, client.wire, client._received, keepalive_interval=None,
            connect_timeout=timeout)
        client.connection.write(f.ProtocolHeader())
        start = await client.control._expect(f.ConnectionStart)
        assert isinstance(start, f.ConnectionStart)
        client.server_properties = start.server_properties
        if b"PLAIN" not in start.mechanisms.split():
            raise ConnectionError(f"the server offers no PLAIN login: {start.mechanisms!r}")
        tune = await client.control._call(f.ConnectionStartOk(
            client_properties=to_table({"product": "protoframe amqp example",
                                        "capabilities": {"consumer_cancel_notify": True}}),
            mechanism="PLAIN", response=b"\0" + user.encode() + b"\0" + password.encode(),
            locale="en_US"), f.ConnectionTune)
        assert isinstance(tune, f.ConnectionTune)
        client.frame_max = min(frame_max, tune.frame_max or frame_max)
        client.heartbeat = min(heartbeat, tune.heartbeat) if tune.heartbeat else heartbeat
        client.control._send(f.ConnectionTuneOk(channel_max=tune.channel_max or 2047,
                                                frame_max=client.frame_max,
                                                heartbeat=client.heartbeat))
        await client.control._call(f.ConnectionOpen(virtual_host=vhost, reserved_2=False),
                                   f.ConnectionOpenOk)
        return client

    def send_frame(self, frame: f.Frame) -> None:
        assert self.connection is not None
        self.connection.write(frame)

    def send_method(self, channel: int, arguments: f.MethodArguments) -> None:
        self.send_frame(f.Frame(channel=channel,
                                payload=f.Method(arguments=arguments)))

    def send_heartbeat(self) -> None:
        self.send_frame(f.Frame(channel=0, payload=f.Heartbeat()))

    def _received(self, frame: Outgoing) -> None:
        assert isinstance(frame, f.Frame)
        if isinstance(frame.payload, f.Heartbeat):
            self.heartbeats_received += 1
            self.send_heartbeat()
            return
        if frame.channel == 0:
            payload = frame.payload
            if isinstance(payload, f.Method) and isinstance(payload.arguments, f.ConnectionClose):
                self.send_method(0, f.ConnectionCloseOk())
            self.control._received(frame)
            return
        channel = self.channels.get(frame.channel)
        if channel is not None:
            channel._received(frame)

    async def channel(self) -> Channel:
        """Open the next channel (Channel.Open/OpenOk)."""
        number = max(self.channels, default=0) + 1
        channel = self.channels[number] = Channel(self, number)
        await channel._call(f.ChannelOpen(), f.ChannelOpenOk)
        return channel

    async def closed_by_server(self) -> ChannelClosedError:
        """Wait for the server's Connection.Close (answered with CloseOk as it arrives) and for
        the socket to close; return its reply code and text."""
        try:
            await self.control._expect()
        except ChannelClosedError as closed:
            assert self.connection is not None
            await asyncio.wait_for(self.connection.wait_closed(), self.timeout)
            return closed
        raise AssertionError("unreachable: _expect() with no answers returns nothing")

    async def close(self, reply_code: int = 200, reply_text: str = "goodbye") -> None:
        """Connection.Close, wait for CloseOk, then close the socket."""
        answer = await self.control._call(f.ConnectionClose(
            reply_code=reply_code, reply_text=reply_text, class_id=0, method_id=0),
            f.ConnectionCloseOk)
        assert isinstance(answer, f.ConnectionCloseOk)
        self.close_ok = answer
        assert self.connection is not None
        self.connection.close()
        await asyncio.wait_for(self.connection.wait_closed(), self.timeout)
