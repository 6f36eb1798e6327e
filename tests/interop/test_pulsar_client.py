"""Wire compatibility with the official client (pulsar-client, C++ core), both directions.

The broker runs on a background thread (the official client blocks its caller); our client
runs in an event loop in the test's thread. Everything stays on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import pulsar
import pytest

from protoframe.clients.pulsar import PulsarClient
from protoframe.clients.pulsar.broker import BrokerThread
from protoframe.clients.pulsar.producer import CompressionName
from protoframe.clients.pulsar.routing import murmur3_32


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerThread]:
    with BrokerThread(port=0) as running:
        yield running


@pytest.fixture(scope="module")
def official(broker: BrokerThread) -> Iterator[Any]:
    quiet = logging.getLogger("pulsar.official")
    quiet.setLevel(logging.ERROR)
    client = pulsar.Client(broker.url, logger=quiet, operation_timeout_seconds=10)
    yield client
    client.close()


OFFICIAL_CODECS = {"NONE": "NONE", "LZ4": "LZ4", "ZLIB": "ZLib", "ZSTD": "ZSTD",
                   "SNAPPY": "SNAPPY"}


@pytest.mark.parametrize("codec", ["NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY"])
def test_official_consumer_reads_what_we_produce(broker: BrokerThread, official: Any,
                                                 codec: CompressionName) -> None:
    topic = f"to-official-{codec}"
    consumer = official.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)

    async def produce() -> list[Any]:
        async with PulsarClient(broker.url) as client:
            producer = await client.create_producer(topic, compression_type=codec,
                                                    batching_max_messages=5)
            futures = [producer.send_async(f"m{i}".encode(), properties={"i": str(i)},
                                           partition_key=f"k{i % 3}",
                                           event_timestamp=1000 + i)
                       for i in range(12)]
            futures.append(producer.send_async(b"plain"))
            await producer.flush()
            return [f.result() for f in futures]

    ids = asyncio.run(produce())
    got = [consumer.receive(timeout_millis=5000) for _ in range(13)]
    for msg in got:
        consumer.acknowledge(msg)
    assert [m.data() for m in got] == [f"m{i}".encode() for i in range(12)] + [b"plain"]
    assert [m.properties() for m in got[:12]] == [{"i": str(i)} for i in range(12)]
    assert [m.partition_key() for m in got[:12]] == [f"k{i % 3}" for i in range(12)]
    assert [m.event_timestamp() for m in got[:12]] == [1000 + i for i in range(12)]
    assert [(m.message_id().entry_id(), m.message_id().batch_index()) for m in got] == \
        [(i.entry_id(), i.batch_index()) for i in ids]
    consumer.close()


@pytest.mark.parametrize("batching", [True, False], ids=["batched", "single"])
def test_we_read_what_the_official_client_produces(broker: BrokerThread, official: Any,
                                                   batching: bool) -> None:
    topic = f"from-official-{batching}"
    producer = official.create_producer(topic, batching_enabled=batching,
                                        batching_max_publish_delay_ms=50,
                                        compression_type=pulsar.CompressionType.LZ4)
    sent = []
    for i in range(10):
        producer.send_async(f"o{i}".encode(), lambda res, mid: sent.append(mid),
                            properties={"n": str(i)}, partition_key=f"key{i}",
                            event_timestamp=5000 + i)
    producer.flush()
    assert len(sent) == 10

    async def consume() -> list[Any]:
        async with PulsarClient(broker.url) as client:
            consumer = await client.subscribe(topic, "s", initial_position="earliest")
            out = []
            for _ in range(10):
                msg = await asyncio.wait_for(consumer.receive(), 5)
                await consumer.acknowledge(msg)
                out.append(msg)
            return out

    got = asyncio.run(consume())
    assert [m.data() for m in got] == [f"o{i}".encode() for i in range(10)]
    assert [m.properties() for m in got] == [{"n": str(i)} for i in range(10)]
    assert [m.partition_key() for m in got] == [f"key{i}" for i in range(10)]
    assert [m.event_timestamp() for m in got] == [5000 + i for i in range(10)]
    assert [m.sequence_id() for m in got] == list(range(10))
    producer.close()


def test_partitioned_topic_shared_with_the_official_client(broker: BrokerThread,
                                                           official: Any) -> None:
    # The official Python client routes keys with the C++ default (BoostHash) and cannot be
    # told otherwise, so only the Java-compatible routing of ours is checked against the hash.
    topic = broker.create_partitioned_topic("interop-parts", 5)
    producer = official.create_producer(topic, batching_enabled=False)
    theirs = {f"theirs-{i}": producer.send(f"theirs-{i}".encode(),
                                           partition_key=f"theirs-{i}").partition()
              for i in range(10)}
    producer.close()
    consumer = official.subscribe(topic, "official-sub",
                                  initial_position=pulsar.InitialPosition.Earliest)

    async def ours() -> dict[str, int]:
        async with PulsarClient(broker.url) as client:
            reader = await client.subscribe(topic, "ours", subscription_type="Shared",
                                            initial_position="earliest")
            mine = await client.create_producer(topic, batching_enabled=False)
            for i in range(10):
                await mine.send(f"ours-{i}".encode(), partition_key=f"ours-{i}")
            seen = {}
            for _ in range(20):
                msg = await asyncio.wait_for(reader.receive(), 5)
                await reader.acknowledge(msg)
                seen[msg.data().decode()] = msg.message_id().partition()
                assert msg.topic_name().endswith(f"-partition-{seen[msg.data().decode()]}")
            return seen

    seen = asyncio.run(ours())
    assert {k: v for k, v in seen.items() if k.startswith("theirs")} == theirs
    assert {k: v for k, v in seen.items() if k.startswith("ours")} == \
        {f"ours-{i}": (murmur3_32(f"ours-{i}".encode()) & 0x7FFFFFFF) % 5 for i in range(10)}
    got = {consumer.receive(timeout_millis=5000).data().decode() for _ in range(20)}
    assert got == set(seen)
    consumer.close()
