"""Readers (non-durable subscriptions placed by the application) and table views, on both
brokers: start positions, ``has_message_available``, seeks that hold across reconnections."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from protoframe.clients.pulsar import Message, MessageId, PulsarClient, Reader, Timeout
from protoframe.clients.pulsar.broker import BrokerThread, EmbeddedBroker
from protoframe.clients.pulsar.errors import IncompatibleSchema
from protoframe.clients.pulsar.schema import JsonSchema, StringSchema
from protoframe.clients.pulsar.sync import Client as SyncClient
from tests.clients.pulsar.scenarios import Broker, Target, run


async def read_n(reader: Reader, n: int, timeout_ms: int = 10000) -> list[Message]:
    return [await reader.read_next(timeout_ms) for _ in range(n)]


async def nothing_more(reader: Reader, wait_ms: int = 100) -> bool:
    try:
        await reader.read_next(wait_ms)
    except Timeout:
        return True
    return False


@dataclass
class Point:
    x: int
    y: int


def data(msgs: list[Message]) -> list[bytes]:
    return [m.data() for m in msgs]


def cut_connections(client: PulsarClient, broker: Broker) -> None:
    """Lose every connection: from the embedded broker's side as a crash would, or from the
    client's side on Apache Pulsar."""
    if isinstance(broker, EmbeddedBroker):
        sessions = list(broker.sessions)
        assert sessions
        for session in sessions:
            session.transport.abort()
        return
    connections = client._pool.connections()
    assert connections
    for cnx in connections:
        cnx.close()


async def sent(client: PulsarClient, topic: str, n: int) -> list[MessageId]:
    producer = await client.create_producer(topic, batching_enabled=False)
    ids = [await producer.send(str(i).encode()) for i in range(n)]
    await producer.close()
    return ids


def test_reader_starts_at_earliest_latest_or_an_id_inclusive_or_not(target: Target) -> None:
    async def scenario(url: str, broker: Broker) -> None:
        async with PulsarClient(url) as client:
            ids = await sent(client, "starts", 5)
            wanted = [str(i).encode() for i in range(5)]
            async with await client.create_reader("starts", MessageId.earliest) as reader:
                got = await read_n(reader, 5)
                assert data(got) == wanted
                assert [m.message_id() for m in got] == ids
                assert await nothing_more(reader)
            async with await client.create_reader("starts", ids[2]) as reader:
                assert data(await read_n(reader, 2)) == wanted[3:]
                assert await nothing_more(reader)
            async with await client.create_reader("starts", ids[2],
                                                  start_message_id_inclusive=True) as reader:
                assert data(await read_n(reader, 3)) == wanted[2:]
            async with await client.create_reader("starts", MessageId.latest) as reader:
                assert await nothing_more(reader)
                producer = await client.create_producer("starts")
                await producer.send(b"after")
                assert (await reader.read_next(10000)).data() == b"after"
            async with await client.create_reader("starts", MessageId.latest,
                                                  start_message_id_inclusive=True) as reader:
                assert (await reader.read_next(10000)).data() == b"after"
                assert await nothing_more(reader)

    target.run(scenario)


def test_a_start_inside_a_batch_skips_the_messages_before_it(target: Target) -> None:
    async def scenario(url: str, broker: Broker) -> None:
        async with PulsarClient(url) as client:
            producer = await client.create_producer("batched", batching_max_messages=4,
                                                    batching_max_publish_delay_ms=1000)
            futures = [producer.send_async(str(i).encode()) for i in range(4)]
            ids = [await f for f in futures]
            assert len({(i.ledger_id(), i.entry_id()) for i in ids}) == 1
            async with await client.create_reader("batched", ids[1]) as reader:
                assert data(await read_n(reader, 2)) == [b"2", b"3"]
                assert not await reader.has_message_available()
            async with await client.create_reader("batched", ids[1],
                                                  start_message_id_inclusive=True) as reader:
                assert data(await read_n(reader, 3)) == [b"1", b"2", b"3"]
            async with await client.create_reader("batched", MessageId.latest,
                                                  start_message_id_inclusive=True) as reader:
                assert await reader.has_message_available()
                assert (await reader.read_next(10000)).data() == b"3"

    target.run(scenario)


def test_has_message_available_at_the_edges(target: Target) -> None:
    async def scenario(url: str, broker: Broker) -> None:
        async with PulsarClient(url) as client:
            producer = await client.create_producer("avail", batching_enabled=False)
            # An empty topic: nothing, whatever the start.
            for start, inclusive in [(MessageId.earliest, False), (MessageId.latest, False),
                                     (MessageId.latest, True)]:
                async with await client.create_reader(
                        "avail", start, start_message_id_inclusive=inclusive) as reader:
                    assert not await reader.has_message_available()
                    consumer = reader.consumer()
                    assert (await consumer.get_last_message_id()).entry_id() == -1
            ids = [await producer.send(str(i).encode()) for i in range(3)]
            async with await client.create_reader("avail", MessageId.earliest) as reader:
                assert await reader.has_message_available()
                read = []
                while await reader.has_message_available():
                    read.append(await reader.read_next(10000))
                assert data(read) == [b"0", b"1", b"2"]
                await producer.send(b"3")
                assert await reader.has_message_available()
                assert (await reader.read_next(10000)).data() == b"3"
                assert not await reader.has_message_available()
            async with await client.create_reader("avail", MessageId.latest) as reader:
                assert not await reader.has_message_available()
                await producer.send(b"4")
                assert await reader.has_message_available()
                assert (await reader.read_next(10000)).data() == b"4"
                assert not await reader.has_message_available()
            async with await client.create_reader("avail", ids[2]) as reader:
                assert await reader.has_message_available()
            async with await client.create_reader("avail", ids[0]) as reader:
                await read_n(reader, 4)
                assert not await reader.has_message_available()

    target.run(scenario)


def test_seek_by_id_and_time_holds_across_a_lost_connection(target: Target) -> None:
    async def scenario(url: str, broker: Broker) -> None:
        async with PulsarClient(url) as client:
            producer = await client.create_producer("hold", batching_enabled=False)
            ids = [await producer.send(str(i).encode()) for i in range(5)]
            await asyncio.sleep(0.05)
            middle = int(time.time() * 1000)
            await asyncio.sleep(0.05)
            ids += [await producer.send(str(i).encode()) for i in range(5, 10)]
            reader = await client.create_reader("hold", MessageId.earliest)
            assert data(await read_n(reader, 8)) == [str(i).encode() for i in range(8)]

            # Seek back (past the target: the start is exclusive), read one, lose the
            # connection: the next is the one after it.
            await reader.seek(ids[2])
            assert (await reader.read_next(10000)).data() == b"3"
            cut_connections(client, broker)
            assert data(await read_n(reader, 2)) == [b"4", b"5"]

            # Seek and lose the connection before reading: what follows the target comes next.
            await reader.seek(ids[6])
            cut_connections(client, broker)
            assert (await reader.read_next(10000)).data() == b"7"

            # The same for a seek by publish time.
            await reader.seek(middle)
            cut_connections(client, broker)
            assert data(await read_n(reader, 5)) == [str(i).encode() for i in range(5, 10)]
            assert await nothing_more(reader)

            # After reading to the end and a lost connection, nothing is read twice.
            cut_connections(client, broker)
            await producer.send(b"10")
            assert (await reader.read_next(10000)).data() == b"10"
            assert not await reader.has_message_available()
            await reader.close()

            # An inclusive reader reads the target of its seek again, also after a lost
            # connection.
            reader = await client.create_reader("hold", ids[9], start_message_id_inclusive=True)
            assert (await reader.read_next(10000)).data() == b"9"
            await reader.seek(ids[3])
            cut_connections(client, broker)
            assert data(await read_n(reader, 2)) == [b"3", b"4"]
            await reader.close()

    target.run(scenario, timeout=60)


def test_reader_reads_every_partition(target: Target) -> None:
    async def scenario(url: str, broker: Broker) -> None:
        topic = broker.create_partitioned_topic("readparts", 3)
        async with PulsarClient(url) as client:
            producer = await client.create_producer(topic, batching_enabled=False)
            for i in range(12):
                await producer.send(str(i).encode(), partition_key=f"k{i}")
            async with await client.create_reader(topic, MessageId.earliest) as reader:
                got = []
                while await reader.has_message_available():
                    got.append(await reader.read_next(10000))
                assert sorted(data(got)) == sorted(str(i).encode() for i in range(12))
                assert len({m.message_id().partition() for m in got}) > 1
                cut_connections(client, broker)
                await producer.send(b"late", partition_key="k0")
                assert (await reader.read_next(10000)).data() == b"late"
            with pytest.raises(Exception, match="partitioned"):
                first = got[0].message_id()
                await client.create_reader(topic, MessageId(-1, first.ledger_id(),
                                                            first.entry_id()))

    target.run(scenario)


def test_table_view_keeps_the_latest_value_per_key(target: Target) -> None:
    async def scenario(url: str, broker: Broker) -> None:
        async with PulsarClient(url) as client:
            producer = await client.create_producer("table", batching_enabled=False)
            await producer.send(b"1", partition_key="a")
            await producer.send(b"1", partition_key="b")
            await producer.send(b"2", partition_key="a")
            await producer.send(b"no key")
            await producer.send(b"1", partition_key="c")
            await producer.send(b"", partition_key="c")  # a tombstone
            view = await client.create_table_view("table")
            assert dict(view) == {"a": b"2", "b": b"1"}
            assert view.size() == 2 and not view.is_empty() and view.contains_key("a")
            assert view.get("c") is None
            seen: list[tuple[str, bytes]] = []
            view.for_each_and_listen(lambda k, v: seen.append((k, v)))
            assert sorted(seen) == [("a", b"2"), ("b", b"1")]
            await producer.send(b"3", partition_key="a")
            await producer.send(b"", partition_key="b")
            await producer.send(b"1", partition_key="d")
            await view.refresh()
            assert dict(view) == {"a": b"3", "d": b"1"}
            assert seen[2:] == [("a", b"3"), ("d", b"1")]
            await view.close()

    target.run(scenario)


def test_sync_reader_and_table_view() -> None:
    with BrokerThread(port=0) as broker, \
            SyncClient(broker.url, operation_timeout_seconds=10) as client:
        producer = client.create_producer("sync-read", batching_enabled=False)
        ids = [producer.send(str(i).encode(), partition_key=f"k{i % 2}") for i in range(4)]
        reader = client.create_reader("sync-read", ids[0])
        got = []
        while reader.has_message_available():
            got.append(reader.read_next(5000).data())
        assert got == [b"1", b"2", b"3"]
        reader.seek(ids[1])
        assert reader.read_next(5000).data() == b"2"
        assert reader.read_next(5000).data() == b"3"
        with pytest.raises(Timeout):
            reader.read_next(100)
        reader.close()
        view = client.create_table_view("sync-read")
        assert dict(view) == {"k0": b"2", "k1": b"3"}
        updates: list[tuple[str, bytes]] = []
        view.for_each_and_listen(lambda k, v: updates.append((k, v)))
        producer.send(b"4", partition_key="k0")
        view.refresh()
        assert view["k0"] == b"4" and updates[-1] == ("k0", b"4")
        view.close()


def test_embedded_broker_keeps_a_non_durable_subscription_over_a_seek_only() -> None:
    async def scenario(url: str, broker: EmbeddedBroker) -> None:
        async with PulsarClient(url) as client:
            ids = await sent(client, "nd", 4)
            reader = await client.create_reader("nd", MessageId.earliest)
            topic = broker.state.topics["persistent://public/default/nd"]
            name = reader.subscription_name()
            sub = topic.subscriptions[name]
            assert not sub.durable
            await reader.seek(ids[2])
            # The seek closed the reader's consumer; the subscription waited for it, moved.
            assert topic.subscriptions[name] is sub and sub.mark_delete == ids[2].entry_id() - 1
            assert (await reader.read_next(10000)).data() == b"3"
            assert topic.subscriptions[name] is sub
            cut_connections(client, broker)
            for _ in range(500):
                if name not in topic.subscriptions or topic.subscriptions[name] is not sub:
                    break
                await asyncio.sleep(0.01)
            # Gone with the connection; the reader's new one starts after what it read.
            assert topic.subscriptions.get(name) is not sub
            assert not await reader.has_message_available()
            assert topic.subscriptions[name].mark_delete == ids[3].entry_id() - 1
            await reader.close()
            assert name not in topic.subscriptions

    run(scenario)


def test_has_message_available_after_a_seek_by_time(target: Target) -> None:
    async def scenario(url: str, broker: Broker) -> None:
        async with PulsarClient(url) as client:
            await sent(client, "avail-time", 3)
            reader = await client.create_reader("avail-time", MessageId.earliest)
            await reader.seek(int(time.time() * 1000) + 3_600_000)
            assert not await reader.has_message_available()
            await reader.seek(0)
            assert await reader.has_message_available()
            assert (await reader.read_next(10000)).data() == b"0"
            await reader.close()

    target.run(scenario)


async def until(condition: Callable[[], bool], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "not in time"
        await asyncio.sleep(0.02)


def test_reader_listener_gets_every_message_until_closed(target: Target) -> None:
    async def scenario(url: str, broker: Broker) -> None:
        async with PulsarClient(url) as client:
            seen: list[tuple[Reader, bytes]] = []

            async def listener(reader: Reader, msg: Message) -> None:
                seen.append((reader, msg.data()))
                if msg.data() == b"1":
                    raise RuntimeError("a listener's error is logged, not fatal")

            await sent(client, "listened", 3)
            reader = await client.create_reader("listened", MessageId.earliest,
                                                reader_listener=listener)
            await until(lambda: len(seen) == 3)
            assert [data for _, data in seen] == [b"0", b"1", b"2"]
            assert all(r is reader for r, _ in seen)
            reader.pause_listener()
            producer = await client.create_producer("listened")
            await producer.send(b"paused")
            await asyncio.sleep(0.2)
            assert len(seen) == 3
            reader.resume_listener()
            await until(lambda: len(seen) == 4)
            await reader.close()
            await producer.send(b"closed")
            await asyncio.sleep(0.2)
            assert [data for _, data in seen] == [b"0", b"1", b"2", b"paused"]

    target.run(scenario)


def test_reader_with_a_schema_reads_typed_values(target: Target) -> None:
    async def scenario(url: str, broker: Broker) -> None:
        async with PulsarClient(url) as client:
            producer = await client.create_producer("typed-read", schema=StringSchema())
            await producer.send("zwölf")
            async with await client.create_reader("typed-read", MessageId.earliest,
                                                  schema=StringSchema()) as reader:
                msg = await reader.read_next(10000)
                value: str = msg.value()
                assert value == "zwölf" and msg.data() == "zwölf".encode()
            # A reader's schema is checked as a consumer's: a JSON reader of a String topic
            # is refused.
            with pytest.raises(IncompatibleSchema):
                await client.create_reader("typed-read", MessageId.earliest,
                                           schema=JsonSchema(Point))

    target.run(scenario)


def test_sync_reader_listener_gets_the_sync_reader_on_a_worker_thread() -> None:
    with BrokerThread(port=0) as broker:
        client = SyncClient(broker.url)
        try:
            producer = client.create_producer("sync-listened")
            producer.send(b"a")
            seen: list[tuple[object, bytes, bool]] = []
            main = threading.get_ident()
            reader = client.create_reader(
                "sync-listened", MessageId.earliest,
                reader_listener=lambda r, m: seen.append(
                    (r, m.data(), threading.get_ident() != main)))
            deadline = time.monotonic() + 20
            while not seen and time.monotonic() < deadline:
                time.sleep(0.02)
            assert seen == [(reader, b"a", True)]
            reader.close()
        finally:
            client.close()
