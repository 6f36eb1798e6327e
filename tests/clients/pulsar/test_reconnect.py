"""Failures: dropped connections, dead peers, broker-side closes, corrupt messages."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from protoframe.clients.pulsar import Message, PulsarClient, Timeout
from protoframe.clients.pulsar.broker import EmbeddedBroker
from protoframe.clients.pulsar.broker.entries import Entry
from protoframe.clients.pulsar.broker.session import Session
from protoframe.generated.pulsar import pulsar_api as pb
from tests.clients.pulsar.scenarios import run


def drop_connections(broker: EmbeddedBroker) -> int:
    """Cut every client connection from the broker's side, as a crash would: answers not yet
    written (receipts of stored messages, for one) are lost."""
    sessions = list(broker.sessions)
    for session in sessions:
        session.transport.abort()
    return len(sessions)


async def receive_all(consumer: Any, quiet_ms: int = 500) -> list[Message]:
    out: list[Message] = []
    while True:
        try:
            msg = await consumer.receive(timeout_millis=quiet_ms)
        except Timeout:
            return out
        out.append(msg)
        await consumer.acknowledge(msg)


@pytest.mark.parametrize("batching", [True, False], ids=["batched", "single"])
def test_producer_resends_pending_messages_after_a_dropped_connection(batching: bool) -> None:
    async def scenario(url: str, broker: EmbeddedBroker) -> None:
        sends: list[tuple[str, int]] = []
        drop_at = {5, 15} if batching else {100, 300}
        original = Session.on_send

        def spy(self: Session, body: pb.CommandSend, frame: Any) -> None:
            sends.append((self.peer, body.sequence_id))
            original(self, body, frame)
            if len(sends) in drop_at:
                # The message is stored but its receipt is never written: the client must
                # send it again (the broker's deduplication keeps one copy).
                self.transport.abort()

        Session.on_send = spy  # type: ignore[method-assign, assignment]
        try:
            async with PulsarClient(url) as client:
                producer = await client.create_producer(
                    "resend", batching_enabled=batching, batching_max_messages=50,
                    max_pending_messages=0)
                total = 3000 if batching else 600
                futures = []
                for i in range(total):
                    futures.append(producer.send_async(f"{i}".encode()))
                    if i % 100 == 0:
                        await asyncio.sleep(0.001)
                await asyncio.wait_for(producer.flush(), 20)
                ids = [f.result() for f in futures]
                assert len(set(ids)) == total  # every message stored once
                # Read the topic back on a fresh subscription (a consumer connected during
                # the drops would legitimately see redeliveries of what it had not acked).
                consumer = await client.subscribe("resend", "check",
                                                  initial_position="earliest")
                got = await receive_all(consumer)
                assert [m.data() for m in got] == [f"{i}".encode() for i in range(total)]
                assert [m.sequence_id() for m in got] == list(range(total))
                # Some SENDs were written twice, with the same sequence ids, on new connections.
                assert len({peer for peer, _ in sends}) == 3
                counts: dict[int, int] = {}
                for _, seq in sends:
                    counts[seq] = counts.get(seq, 0) + 1
                assert any(n > 1 for n in counts.values())
        finally:
            Session.on_send = original  # type: ignore[method-assign]

    run(scenario, timeout=40)


def test_consumer_resubscribes_after_a_dropped_connection() -> None:
    async def scenario(url: str, broker: EmbeddedBroker) -> None:
        async with PulsarClient(url) as client:
            consumer = await client.subscribe("resub", "s", subscription_type="Shared",
                                              receiver_queue_size=20,
                                              initial_position="earliest")
            producer = await client.create_producer("resub", batching_enabled=False)
            for i in range(50):
                producer.send_async(str(i).encode())
            await producer.flush()
            seen: set[bytes] = set()
            for _ in range(10):
                msg = await asyncio.wait_for(consumer.receive(), 5)
                seen.add(msg.data())
                await consumer.acknowledge(msg)
            consumer.flush_acknowledgements()
            await asyncio.sleep(0.05)
            drop_connections(broker)
            for i in range(50, 60):
                await asyncio.wait_for(producer.send(str(i).encode()), 10)
            seen.update(m.data() for m in await receive_all(consumer))
            assert seen == {str(i).encode() for i in range(60)}
            assert consumer.is_connected() and producer.is_connected()

    run(scenario, timeout=40)


@pytest.mark.slow  # waits out keepalive timeouts
def test_keepalive_closes_a_dead_connection_and_the_client_recovers() -> None:
    async def scenario(url: str, broker: EmbeddedBroker) -> None:
        async with PulsarClient(url, keepalive_interval_seconds=0.2) as client:
            producer = await client.create_producer("alive", batching_enabled=False)
            await producer.send(b"before")
            cnx = producer._producers[0].cnx
            assert cnx is not None
            (session,) = list(broker.sessions)
            session.transport.pause_reading()  # the broker goes silent: nothing comes back
            send = asyncio.ensure_future(producer.send(b"during"))
            loop = asyncio.get_running_loop()
            start = loop.time()
            await asyncio.wait_for(cnx.conn.wait_closed(), 3)
            assert loop.time() - start < 2.0  # 2 x 0.2 s of silence, give or take a tick
            assert "nothing received" in str(cnx.conn.closed)
            # The broker drops its side later (its own keepalive, 1 s), after which the producer,
            # re-created under the same name, resends what was pending.
            await asyncio.wait_for(send, 20)
            await producer.send(b"after")
            consumer = await client.subscribe("alive", "s", initial_position="earliest")
            got = [m.data() for m in await receive_all(consumer)]
            assert got == [b"before", b"during", b"after"]

    run(scenario, timeout=40, keepalive_interval=1.0)


def test_corrupt_message_is_not_delivered_and_acked_as_checksum_mismatch() -> None:
    async def scenario(url: str, broker: EmbeddedBroker) -> None:
        acks: list[pb.CommandAck] = []
        original = Session.on_ack

        def spy(self: Session, body: pb.CommandAck, frame: Any) -> None:
            acks.append(body)
            original(self, body, frame)

        Session.on_ack = spy  # type: ignore[method-assign, assignment]
        try:
            async with PulsarClient(url) as client:
                producer = await client.create_producer("corrupt", batching_enabled=False)
                for i in range(3):
                    await producer.send(f"message {i}".encode())
                topic = broker.state.topics["persistent://public/default/corrupt"]
                entry = topic.entries[1]
                assert entry is not None
                damaged = bytearray(entry.payload)
                damaged[-1] ^= 0xFF  # a flipped bit in the data: the checksum fails
                topic.entries[1] = Entry(entry.entry_id, bytes(damaged), entry.num_messages,
                                         entry.is_batch, entry.publish_time, entry.key)
                consumer = await client.subscribe("corrupt", "s", initial_position="earliest")
                got = await receive_all(consumer)
                assert [m.data() for m in got] == [b"message 0", b"message 2"]
                validation = [a for a in acks if a.has_validation_error()]
                assert len(validation) == 1
                assert validation[0].validation_error is \
                    pb.CommandAck.ValidationError.ChecksumMismatch
                assert validation[0].message_id[0].entryId == entry.entry_id
        finally:
            Session.on_ack = original  # type: ignore[method-assign]

    run(scenario, timeout=40)


def test_closing_the_client_fails_nothing_silently() -> None:
    async def scenario(url: str, broker: EmbeddedBroker) -> None:
        client = PulsarClient(url, operation_timeout_seconds=2)
        producer = await client.create_producer("closing", batching_max_publish_delay_ms=5000)
        future = producer.send_async(b"flushed by close")
        consumer = await client.subscribe("closing", "s")
        waiting = asyncio.ensure_future(consumer.receive())
        await client.close()
        assert (await future).entry_id() >= 0  # close flushes first
        with pytest.raises(Exception):  # noqa: B017 - AlreadyClosed, not left hanging
            await waiting
        assert client.connection_count() == 0

    run(scenario, timeout=40)
