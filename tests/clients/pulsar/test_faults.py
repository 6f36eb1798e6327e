"""Faults between our asyncio client and the embedded broker: restarts and cut connections.

* A broker restarted (SIGKILL, or a clean SIGTERM stop) on its --data-dir and the same port in
  the middle of a 10,000-message produce: the producer reconnects by itself, re-creates itself
  under the same name and resends what had no receipt with the same sequence ids; the broker's
  de-duplication keeps one copy, so the topic holds every message once, in order. A consumer
  that acknowledged the first half resumes after its last acknowledgement, across the broker's
  restart and across its own.
* A TCP proxy (``tests.clients.faultproxy``) that cuts connections at seeded-random points, in both
  directions and often mid-frame, while one client produces and another consumes: nothing is
  lost, every duplicate delivery is a redelivery, and the topic holds each message once.

Everything runs on 127.0.0.1 with bounded loops and timeouts.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from protoframe.clients.pulsar import (
    Message,
    MessageId,
    Producer,
    PulsarClient,
    SendFuture,
    Timeout,
)
from protoframe.clients.pulsar.broker import BrokerProcess, EmbeddedBroker
from protoframe.clients.pulsar.consumer import SubscriptionTypeName
from protoframe.generated.pulsar import pulsar_api as pb
from tests.clients.faultproxy import FaultProxy

pytestmark = pytest.mark.slow  # broker restarts and cut connections under load take minutes

N = 10_000
HALF = N // 2
TOPIC = "persistent://public/default/restart-orders"
BARRIER_TOPIC = "persistent://public/default/restart-barrier"


def payload(i: int) -> bytes:
    return f"m{i:05d}".encode()


def index_of(data: bytes) -> int:
    return int(data[1:])


async def until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"not reached within {timeout} s: {what}")
        await asyncio.sleep(0.01)


async def drain(consumer: Any, quiet_ms: int = 700, limit: int = 3 * N) -> list[Message]:
    """Receive (and acknowledge) until nothing comes for ``quiet_ms``."""
    out: list[Message] = []
    while len(out) < limit:
        try:
            msg = await consumer.receive(timeout_millis=quiet_ms)
        except Timeout:
            break
        out.append(msg)
        consumer.acknowledge_nowait(msg)
    return out


async def read_topic(url: str, topic: str, subscription: str) -> list[Message]:
    """Everything the topic holds, through a fresh subscription from the earliest entry."""
    async with PulsarClient(url, operation_timeout_seconds=10) as client:
        consumer = await client.subscribe(topic, subscription, initial_position="earliest")
        got = await drain(consumer)
        await consumer.close()
        return got


def assert_redeliveries_only(messages: list[Message]) -> None:
    """Every message seen twice is a redelivery: redelivery_count > 0, or the same message id
    as its earlier delivery (not a second copy stored in the topic)."""
    first: dict[bytes, MessageId] = {}
    for msg in messages:
        data = msg.data()
        earlier = first.get(data)
        if earlier is None:
            first[data] = msg.message_id()
        else:
            assert msg.redelivery_count() > 0 or msg.message_id() == earlier, (
                f"{data!r} delivered again as {msg.message_id()} (first {earlier}) with "
                f"redelivery count 0")


def first_occurrences(messages: list[Message]) -> list[bytes]:
    seen: set[bytes] = set()
    out: list[bytes] = []
    for msg in messages:
        if msg.data() not in seen:
            seen.add(msg.data())
            out.append(msg.data())
    return out


# ---- a) broker restarts ------------------------------------------------------------------------


class RestartingBroker:
    """A ``BrokerProcess`` on a data directory that can be restarted on the same port.

    It logs at DEBUG to ``log_path``, so that a test can check what the broker did (its
    de-duplication logs every resend it drops).
    """

    def __init__(self, data_dir: Path, log_path: Path) -> None:
        self.data_dir = data_dir
        self.log_path = log_path
        self.port = 0
        self.process: BrokerProcess | None = None
        self.restarts = 0

    def start(self) -> str:
        with open(self.log_path, "a") as log:
            self.process = BrokerProcess(port=self.port, data_dir=self.data_dir,
                                         extra_args=("--log-level", "DEBUG"), stderr=log)
            url = self.process.start()
        self.port = int(url.rsplit(":", 1)[1])
        return url

    def end(self, how: str) -> None:
        """Kill the broker (SIGKILL, as a crash) or stop it (SIGTERM, a clean shutdown)."""
        assert self.process is not None
        if how == "kill":
            self.process.kill()
        else:
            assert self.process.stop() == 0
        self.restarts += 1

    def restart(self, how: str) -> str:
        self.end(how)
        return self.start()

    def log_lines(self, text: str) -> list[str]:
        return [line for line in self.log_path.read_text().splitlines() if text in line]

    def close(self) -> None:
        if self.process is not None:
            self.process.kill()


@pytest.fixture
def restarting_broker(tmp_path: Path) -> Any:
    broker = RestartingBroker(tmp_path / "data", tmp_path / "broker.log")
    try:
        yield broker
    finally:
        broker.close()


async def acks_on_disk(client: PulsarClient, consumer: Any) -> None:
    """Send the consumer's grouped acks and wait until the broker has written them.

    The broker answers a SEND only after a log commit that covers every cursor change it saw
    before that SEND; on the consumer's connection, the ACKs come before it.
    """
    consumer.flush_acknowledgements()
    barrier = await client.create_producer(BARRIER_TOPIC)
    await asyncio.wait_for(barrier.send(b"barrier"), 10)
    await barrier.close()


def producer_transport(producer: Producer) -> asyncio.Transport:
    cnx = producer._producers[0].cnx
    assert cnx is not None and cnx.conn.transport is not None
    return cnx.conn.transport


def unread_receipts(transport: asyncio.Transport) -> int:
    """SEND_RECEIPTs waiting unread in a paused transport's socket (peeked, not consumed)."""
    fd = transport.get_extra_info("socket").fileno()
    with socket.socket(fileno=os.dup(fd)) as sock:
        try:
            data = sock.recv(1 << 20, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return 0
    count = pos = 0
    while pos + 8 <= len(data):
        total, size = struct.unpack_from(">II", data, pos)
        if pos + 4 + total > len(data):
            break
        command = pb.BaseCommand.decode(data[pos + 8:pos + 8 + size])
        count += command.type_ is pb.BaseCommand.Type.SEND_RECEIPT
        pos += 4 + total
    return count


async def produce_through_restart(producer: Producer, broker: RestartingBroker, how: str
                                  ) -> list[SendFuture]:
    """Send N messages with sequence ids 0..N-1; restart the broker in the middle.

    Messages go out in paced bursts: some have their receipts before the broker goes; one burst
    (one batch) is stored by the broker but its receipt never reaches the client (the client
    stops reading, the broker goes, the connection with the unread receipt is dropped); another
    is in flight when the broker goes; more are queued while it is down, and the rest go after
    it is back.
    """
    loop = asyncio.get_running_loop()
    futures: list[SendFuture] = []

    def burst(start: int, stop: int) -> None:
        for i in range(start, stop):
            futures.append(producer.send_async(payload(i), sequence_id=i))

    for start in range(0, 3500, 500):
        burst(start, start + 500)
        await asyncio.sleep(0.005)
    await asyncio.wait_for(producer.flush(), 10)  # receipts for 0..3499; no batch open
    transport = producer_transport(producer)
    transport.pause_reading()  # receipts from here on wait unread in the socket
    burst(3500, 4500)  # a full batch: sent at once
    # The broker stores (and fsyncs) the batch, then answers; the client does not listen.
    await until(lambda: unread_receipts(transport) == 1, 10, "the batch stored")
    burst(4500, HALF)  # in flight when the broker goes
    await asyncio.sleep(0)
    broker.end(how)
    transport.abort()  # the unread receipts are lost with the connection
    starting = loop.run_in_executor(None, broker.start)
    for start in range(HALF, 7500, 500):  # queued while the broker is down (or coming back)
        burst(start, start + 500)
        await asyncio.sleep(0.02)
    await asyncio.wait_for(starting, 30)
    await until(producer.is_connected, 20, "producer reconnected")
    for start in range(7500, N, 500):
        burst(start, start + 500)
        await asyncio.sleep(0.005)
    await asyncio.wait_for(producer.flush(), 30)
    return futures


@pytest.mark.parametrize("how", ["kill", "stop"])
def test_broker_restart_mid_produce_loses_and_duplicates_nothing(
        restarting_broker: RestartingBroker, how: str) -> None:
    broker = restarting_broker
    url = broker.start()

    async def main() -> None:
        async with PulsarClient(url, operation_timeout_seconds=10) as client:
            producer = await client.create_producer(TOPIC, max_pending_messages=0,
                                                    batching_max_publish_delay_ms=5)
            name = producer.producer_name()
            futures = await produce_through_restart(producer, broker, how)
            assert broker.restarts == 1
            assert producer.producer_name() == name  # re-created under the same name
            assert producer.last_sequence_id() == N - 1
            ids = [f.result() for f in futures]  # every send succeeded
            assert len(set(ids)) == N  # each with a message id of its own

        stored = await read_topic(url, TOPIC, "check")
        assert [m.data() for m in stored] == [payload(i) for i in range(N)]
        assert [m.sequence_id() for m in stored] == list(range(N))
        assert {m.producer_name() for m in stored} == {name}
        # A resend the broker dropped was answered with the id of the copy it kept.
        assert [m.message_id() for m in stored] == ids
        # ... and there were such resends: the burst stored before the broker went.
        assert broker.log_lines(f"duplicate sequence id 3500 from {name}")

    asyncio.run(asyncio.wait_for(main(), 60))


def test_resends_after_two_restarts_get_the_original_ids(
        restarting_broker: RestartingBroker) -> None:
    """The broker's de-duplication window survives the log compaction of a restart: a resend
    that reaches it only after a second restart still gets the id of the copy it holds."""
    broker = restarting_broker
    url = broker.start()
    count = 1000

    async def main() -> None:
        loop = asyncio.get_running_loop()
        async with PulsarClient(url, operation_timeout_seconds=10) as client:
            producer = await client.create_producer(TOPIC, max_pending_messages=0,
                                                    batching_max_messages=100)
            transport = producer_transport(producer)
            transport.pause_reading()  # the receipts will never be read
            futures = [producer.send_async(payload(i)) for i in range(count)]  # ten batches
            await until(lambda: unread_receipts(transport) == count // 100, 10,
                        "every batch stored")
            await loop.run_in_executor(None, broker.restart, "kill")  # recovers, compacts
            await loop.run_in_executor(None, broker.restart, "kill")  # from the compacted log
            transport.abort()  # the producer reconnects and resends all ten batches
            await asyncio.wait_for(producer.flush(), 20)
            ids = [f.result() for f in futures]

        stored = await read_topic(url, TOPIC, "check")
        assert [m.data() for m in stored] == [payload(i) for i in range(count)]
        assert [m.message_id() for m in stored] == ids
        assert len(broker.log_lines("duplicate sequence id")) == count // 100

    asyncio.run(asyncio.wait_for(main(), 60))


@pytest.mark.parametrize("how", ["kill", "stop"])
def test_consumer_resumes_after_its_last_ack_across_restarts(
        restarting_broker: RestartingBroker, how: str) -> None:
    broker = restarting_broker
    url = broker.start()

    async def main() -> None:
        async with PulsarClient(url, operation_timeout_seconds=10) as client:
            producer = await client.create_producer(TOPIC, max_pending_messages=0)
            for i in range(N):
                producer.send_async(payload(i))
            await asyncio.wait_for(producer.flush(), 30)
            await producer.close()

            # Batch-index acks: the consumer stops in the middle of a batch (7,500 of a
            # 1,000-message batch), and without them a partly acknowledged batch comes back
            # whole, as in Pulsar. HALF is a batch boundary.
            consumer = await client.subscribe(TOPIC, "resume", initial_position="earliest",
                                              batch_index_ack_enabled=True)
            first = [await asyncio.wait_for(consumer.receive(), 10) for _ in range(HALF)]
            assert [m.data() for m in first] == [payload(i) for i in range(HALF)]
            for msg in first:
                consumer.acknowledge_nowait(msg)
            await acks_on_disk(client, consumer)
            # By now the consumer holds more prefetched messages, none acknowledged.
            await until(lambda: consumer.queued() > 0, 5, "prefetched messages")

            # The broker restarts under the connected consumer, which subscribes again by
            # itself: it goes on after its last acknowledgement.
            await asyncio.get_running_loop().run_in_executor(None, broker.restart, how)
            await until(consumer.is_connected, 20, "consumer reconnected")
            second: list[Message] = []
            while len({m.data() for m in second}) < 2500:
                msg = await asyncio.wait_for(consumer.receive(), 10)
                second.append(msg)
                consumer.acknowledge_nowait(msg)
            assert all(index_of(m.data()) >= HALF for m in second), "an acked message came back"
            assert_redeliveries_only(second)
            assert first_occurrences(second) == [payload(i) for i in range(HALF, HALF + 2500)]
            await consumer.close()  # sends the acks; returns once they are on disk

        # The consumer restarts (a new client): exactly the rest, in order, nothing again.
        async with PulsarClient(url, operation_timeout_seconds=10) as client:
            consumer = await client.subscribe(TOPIC, "resume", initial_position="earliest",
                                              batch_index_ack_enabled=True)
            rest = await drain(consumer)
            assert [m.data() for m in rest] == [payload(i) for i in range(HALF + 2500, N)]
            # (Those the first consumer had prefetched come with redelivery_count > 0.)
            await consumer.close()

    asyncio.run(asyncio.wait_for(main(), 60))


# ---- b) connections cut by a proxy -------------------------------------------------------------

PROXY_N = 20_000


@pytest.mark.parametrize(("seed", "sub_type"), [(1, "Exclusive"), (2, "Shared"), (6, "Failover"),
                                               (4, "Key_Shared")])
def test_random_connection_cuts_lose_nothing(seed: int, sub_type: SubscriptionTypeName) -> None:
    topic = f"persistent://public/default/cuts-{seed}"

    async def main() -> None:
        broker = EmbeddedBroker(port=0)
        await broker.start()
        proxy = FaultProxy("127.0.0.1", broker.port, seed=seed, max_cuts=12)
        await proxy.start()
        broker.advertised_url = proxy.url  # lookups send the clients back through the proxy
        try:
            await cut_and_check(broker, proxy, topic, sub_type)
        finally:
            await proxy.stop()
            await broker.stop()

    asyncio.run(asyncio.wait_for(main(), 60))


async def cut_and_check(broker: EmbeddedBroker, proxy: FaultProxy, topic: str,
                        sub_type: SubscriptionTypeName = "Exclusive") -> None:
    sent = [f"c{i}".encode() for i in range(PROXY_N)]
    received: list[Message] = []
    # Separate clients, so that producer and consumer lose their connections independently.
    producing = PulsarClient(proxy.url, operation_timeout_seconds=20)
    consuming = PulsarClient(proxy.url, operation_timeout_seconds=20)
    try:
        consumer = await consuming.subscribe(topic, "s", sub_type, initial_position="earliest",
                                             receiver_queue_size=500)
        producer = await producing.create_producer(topic, "cut-producer",
                                                   max_pending_messages=0,
                                                   batching_max_messages=200)

        async def consume() -> None:
            distinct: set[bytes] = set()
            while len(distinct) < PROXY_N:
                msg = await consumer.receive(timeout_millis=20_000)
                received.append(msg)
                distinct.add(msg.data())
                consumer.acknowledge_nowait(msg)

        consuming_task = asyncio.ensure_future(consume())
        futures: list[SendFuture] = []
        for start in range(0, PROXY_N, 250):
            futures.extend(producer.send_async(data) for data in sent[start:start + 250])
            await asyncio.sleep(0.01)
        # Let the cuts play out; then heal, so that the test ends on a working path.
        await until(lambda: proxy.cuts >= proxy.max_cuts or consuming_task.done(), 15,
                    "the planned cuts")
        proxy.heal()
        await asyncio.wait_for(producer.flush(), 30)
        await asyncio.wait_for(consuming_task, 30)
        ids = [f.result() for f in futures]
        assert len(set(ids)) == PROXY_N
        assert proxy.cuts >= 5, proxy.log
    finally:
        await producing.close()
        await consuming.close()

    # Consumer: nothing lost, duplicates only as redeliveries.
    assert {m.data() for m in received} == set(sent)
    assert_redeliveries_only(received)
    # Producer: with de-duplication, the topic holds each message once, in order.
    stored = await read_topic(broker.url, topic, "check")
    assert [m.data() for m in stored] == sent
    assert [m.sequence_id() for m in stored] == list(range(PROXY_N))

