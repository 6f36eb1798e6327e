"""The embedded broker under connection abuse (issue 18, failures 5 and 6), in a child process
whose resident memory is read from /proc, while the official client (pulsar-client) keeps
making round trips through it.

Each test fails on the broker before the fix: consumers that never read grew its RSS by the
backlog once per consumer (no output backpressure); idle, trickling and parked connections
were never closed (no handshake deadline, no frame deadline, no budget for unfinished frames).
The raw connections here are plain blocking sockets speaking frames built with the generated
codecs; everything stays on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pulsar
import pytest

from protoframe.clients.pulsar.broker import BrokerProcess
from protoframe.generated.pulsar import frames
from protoframe.generated.pulsar.pulsar_api import (
    BaseCommand,
    CommandConnect,
    CommandFlow,
    CommandProducer,
    CommandSend,
    CommandSubscribe,
    MessageMetadata,
)

Type = BaseCommand.Type
MB = 1 << 20
_names = itertools.count()


def rss(broker: BrokerProcess) -> int:
    """The broker process's resident set, in bytes."""
    assert broker.process is not None
    for line in Path(f"/proc/{broker.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def port_of(broker: BrokerProcess) -> int:
    return int(broker.url.rsplit(":", 1)[1])


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.1)


class Raw:
    """A blocking socket speaking Pulsar frames, nothing more."""

    def __init__(self, port: int, *, handshake: bool = True, rcvbuf: int = 0) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:  # a small window: a reader that stops reading stops the broker's writes soon
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(20)
        self.sock.connect(("127.0.0.1", port))
        self.decoder = frames.StreamDecoder(8 * MB)
        self.pending: list[frames.Frame] = []
        if handshake:
            self.send(BaseCommand(type_=Type.CONNECT, connect=CommandConnect(
                client_version="abuse-test", protocol_version=20)))
            self.expect(Type.CONNECTED)

    def send(self, command: BaseCommand, payload: frames.Payload | None = None) -> None:
        self.sock.sendall(frames.Frame(command=command, payload=payload).encode())

    def expect(self, kind: BaseCommand.Type) -> frames.Frame:
        while not self.pending:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed by the broker")
            self.pending.extend(self.decoder.feed(data))
        frame = self.pending.pop(0)
        assert frame.command.type_ == kind, f"expected {kind.name}, got {frame.command!r}"
        return frame

    def closed_by_broker(self, timeout: float) -> bool:
        """Whether the broker closes the connection within ``timeout`` (reading what comes)."""
        self.sock.settimeout(timeout)
        try:
            while self.sock.recv(65536):
                pass
        except TimeoutError:
            return False
        except ConnectionError:
            pass
        return True

    def close(self) -> None:
        self.sock.close()


def produce(port: int, topic: str, count: int, size: int) -> None:
    """``count`` messages of ``size`` bytes on ``topic``, pipelined, all receipts awaited."""
    raw = Raw(port)
    raw.send(BaseCommand(type_=Type.PRODUCER, producer=CommandProducer(
        topic=topic, producer_id=1, request_id=1, producer_name=f"abuse-{next(_names)}")))
    raw.expect(Type.PRODUCER_SUCCESS)
    body = b"m" * size
    for start in range(0, count, 200):
        for sequence_id in range(start, min(count, start + 200)):
            raw.send(BaseCommand(type_=Type.SEND, send=CommandSend(
                producer_id=1, sequence_id=sequence_id, num_messages=1)), frames.Payload(
                metadata=MessageMetadata(producer_name="abuse", sequence_id=sequence_id,
                                         publish_time=int(time.time() * 1000)), data=body))
        for _ in range(start, min(count, start + 200)):
            raw.expect(Type.SEND_RECEIPT)
    raw.close()


@pytest.fixture
def official() -> Iterator[Callable[[str], Any]]:
    """Opens an official client on a broker URL; all are closed at the end."""
    quiet = logging.getLogger("pulsar.official")
    quiet.setLevel(logging.ERROR)
    opened: list[Any] = []

    def open_client(url: str) -> Any:
        client = pulsar.Client(url, logger=quiet, operation_timeout_seconds=10)
        opened.append(client)
        return client

    yield open_client
    for client in opened:
        with contextlib.suppress(Exception):
            client.close()


class RoundTrip:
    """One official producer and consumer on a topic of their own: ``once()`` sends a message
    and receives it, or fails."""

    def __init__(self, client: Any) -> None:
        topic = f"roundtrip-{next(_names)}"
        self.consumer = client.subscribe(topic, "sub")
        self.producer = client.create_producer(topic, batching_enabled=False)
        self.sent = 0

    def once(self) -> None:
        self.sent += 1
        data = f"round trip {self.sent}".encode()
        self.producer.send(data)
        message = self.consumer.receive(timeout_millis=10_000)
        assert message.data() == data
        self.consumer.acknowledge(message)


@contextlib.contextmanager
def running(*args: str) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(extra_args=("--log-level", "ERROR", *args))
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def test_consumers_that_never_read_do_not_grow_the_broker(official: Any) -> None:
    # 8 consumers, each on its own subscription of a 24 MB backlog, grant 10^9 permits and
    # never read. Without backpressure the broker copied the whole backlog into each one's
    # transport buffer (+8 x 24 MB); with it, each holds about one high-water mark (1 MiB).
    with running() as broker:
        port = port_of(broker)
        produce(port, "backlog", 2400, 10_000)
        trip = RoundTrip(official(broker.url))
        trip.once()
        before = rss(broker)
        readers = []
        for i in range(8):
            raw = Raw(port, rcvbuf=64 << 10)
            raw.send(BaseCommand(type_=Type.SUBSCRIBE, subscribe=CommandSubscribe(
                topic="backlog", subscription=f"never-reads-{i}",
                subType=CommandSubscribe.SubType.Exclusive, consumer_id=1, request_id=1,
                initialPosition=CommandSubscribe.InitialPosition.Earliest)))
            raw.expect(Type.SUCCESS)
            raw.send(BaseCommand(type_=Type.FLOW, flow=CommandFlow(
                consumer_id=1, messagePermits=10**9)))
            readers.append(raw)
        time.sleep(2)  # let dispatch run until every transport buffer is full
        for _ in range(3):
            trip.once()
        grown = rss(broker) - before
        print(f"8 consumers that never read: broker RSS +{grown / MB:.1f} MB")
        assert grown < 48 * MB, f"the broker grew by {grown / MB:.0f} MB"
        # A reader that starts reading gets the whole backlog after all (nothing was dropped).
        first = readers[0]
        first.sock.settimeout(20)
        received = 0
        while received < 2400:
            first.expect(Type.MESSAGE)
            received += 1
        trip.once()
        for raw in readers:
            raw.close()


def test_a_thousand_idle_connections_are_closed_at_the_handshake_deadline(
        official: Any) -> None:
    with running("--handshake-timeout", "6") as broker:
        port = port_of(broker)
        trip = RoundTrip(official(broker.url))
        trip.once()
        before = rss(broker)
        began = time.monotonic()
        idle = [socket.create_connection(("127.0.0.1", port), timeout=20) for _ in range(1000)]
        trip.once()
        grown = rss(broker) - before
        print(f"1,000 idle connections: broker RSS +{grown / MB:.1f} MB")
        assert grown < 32 * MB, f"1,000 idle connections cost {grown / MB:.1f} MB"
        for sock in idle:
            sock.settimeout(max(1.0, began + 20 - time.monotonic()))
            assert sock.recv(1) == b"", "an idle connection was not closed"
            sock.close()
        assert time.monotonic() - began >= 5
        trip.once()


def test_slowloris_headers_and_bodies_are_closed_at_the_frame_deadline(official: Any) -> None:
    with running("--frame-timeout", "3", "--handshake-timeout", "30") as broker:
        port = port_of(broker)
        trip = RoundTrip(official(broker.url))
        whole = frames.Frame(command=BaseCommand(type_=Type.PRODUCER, producer=CommandProducer(
            topic="slow", producer_id=1, request_id=1))).encode()
        header = Raw(port, handshake=False)  # before CONNECT: 2 of the 4 length bytes
        header.sock.sendall(whole[:2])
        connected_header = Raw(port)  # after CONNECT: the same
        connected_header.sock.sendall(whole[:2])
        body = Raw(port)  # a frame trickled a byte at a time, every 0.5 s
        began = time.monotonic()
        for i in range(8):
            try:
                body.sock.sendall(whole[i:i + 1])
            except OSError:  # closed by the broker already
                break
            trip.once()
            time.sleep(0.4)
        for raw in (header, connected_header, body):
            assert raw.closed_by_broker(15), "a slow frame was not closed"
        assert time.monotonic() - began >= 2.5
        trip.once()


def test_frames_parked_one_byte_short_hold_at_most_the_budget(official: Any) -> None:
    # Each connection announces a frame of 5 MB and sends all but its last byte. Before, 60
    # of them held +283 MB for ever; the broker's budget for unfinished frames (32 MB here)
    # closes those that go over it, and the frame deadline (8 s here) the rest.
    with running("--max-pending-frame-bytes", str(32 * MB), "--frame-timeout", "8") as broker:
        port = port_of(broker)
        trip = RoundTrip(official(broker.url))
        trip.once()
        before = rss(broker)
        body = b"\0" * (5 * MB - 64)
        frame = frames.Frame(command=BaseCommand(type_=Type.SEND, send=CommandSend(
            producer_id=1, sequence_id=0, num_messages=1)), payload=frames.Payload(
            metadata=MessageMetadata(producer_name="p", sequence_id=0, publish_time=1),
            data=body)).encode()
        parked: list[Raw] = []
        refused = 0
        for _ in range(20):
            raw = Raw(port)
            try:
                raw.sock.sendall(frame[:-1])
                parked.append(raw)
            except ConnectionError:
                refused += 1
                raw.close()
        trip.once()
        grown = rss(broker) - before
        print(f"20 frames parked one byte short of 5 MB: broker RSS +{grown / MB:.1f} MB")
        assert grown < 64 * MB, f"parked frames hold {grown / MB:.0f} MB"
        still_open = [raw for raw in parked if not raw.closed_by_broker(0.5)]
        assert refused + len(parked) - len(still_open) >= 13  # 20 x 5 MB is 3 x 32 MB
        assert len(still_open) <= 7
        for raw in still_open:
            assert raw.closed_by_broker(30), "a parked frame outlived the frame deadline"
        trip.once()


def test_a_silent_connected_client_is_pinged_then_closed_while_the_official_one_works(
        official: Any) -> None:
    # Pulsar's keepalive: after keepAliveIntervalSeconds with nothing received the broker sends
    # PING; if the next interval brings nothing either, it closes the connection. The official
    # client answers the PING and goes on working after the idle time.
    with running("--keep-alive-interval-seconds", "1") as broker:
        trip = RoundTrip(official(broker.url))
        trip.once()
        silent = Raw(port_of(broker))
        began = time.monotonic()
        silent.sock.settimeout(10)
        silent.expect(Type.PING)
        assert silent.closed_by_broker(10), "a client that does not answer PING was kept"
        assert time.monotonic() - began >= 1.5
        time.sleep(2.5)  # idle for more than two intervals
        trip.once()
