"""Our reader against the official client's, on the embedded broker and on Apache Pulsar: from
the same start (earliest, a message inside a batch, inclusive or not, after a seek) both read
the same messages with the same ids, and ``has_message_available`` answers alike."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pulsar
import pytest

from protoframe.clients.pulsar import MessageId, PulsarClient, Timeout
from protoframe.clients.pulsar.broker import BrokerThread
from protoframe.clients.pulsar.schema import StringSchema
from tests.support.pulsar_service import BROKERS
from tests.support.real_pulsar import RealPulsar

LOGGER = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
Seen = list[tuple[bytes, int, int, int]]
# (start as (entry, batch index) of a produced message or "earliest", inclusive, seek to)
CASES: list[tuple[str | int, bool, int | None]] = [
    ("earliest", False, None), (1, False, None), (1, True, None), (6, False, None),
    (6, True, None), ("earliest", False, 4), ("earliest", True, 4), ("earliest", False, 7),
    ("earliest", True, 7)]


@pytest.fixture(params=BROKERS)
def broker(request: pytest.FixtureRequest) -> Iterator[BrokerThread | RealPulsar]:
    if request.param == "embedded":
        with BrokerThread(port=0) as embedded:
            yield embedded
        return
    real: RealPulsar = request.getfixturevalue("real_pulsar")
    real.delete_all_topics()
    yield real


def produce(url: str, topic: str) -> list[tuple[int, int, int]]:
    """Five single messages, then a batch of five (official producer): their ids."""
    client = pulsar.Client(url, logger=LOGGER, operation_timeout_seconds=30)
    try:
        single = client.create_producer(topic, batching_enabled=False)
        ids = [single.send(f"s{i}".encode()) for i in range(5)]
        batched = client.create_producer(topic, batching_enabled=True,
                                         batching_max_messages=5,
                                         batching_max_publish_delay_ms=10_000)
        futures: list[Any] = []
        for i in range(5):
            batched.send_async(f"b{i}".encode(), lambda res, mid: futures.append(mid))
        batched.flush()
        ids += futures
        return [(m.ledger_id(), m.entry_id(), m.batch_index()) for m in ids]
    finally:
        client.close()


def read_official(url: str, topic: str, start: tuple[int, int, int] | None, inclusive: bool,
                  seek: tuple[int, int, int] | None) -> tuple[Seen, bool]:
    client = pulsar.Client(url, logger=LOGGER, operation_timeout_seconds=30)
    try:
        start_id = pulsar.MessageId.earliest if start is None else \
            pulsar.MessageId(-1, start[0], start[1], start[2])
        reader = client.create_reader(topic, start_id, start_message_id_inclusive=inclusive)
        if seek is not None:
            reader.seek(pulsar.MessageId(-1, seek[0], seek[1], seek[2]))
        seen: Seen = []
        while reader.has_message_available():
            msg = reader.read_next(30_000)
            mid = msg.message_id()
            seen.append((msg.data(), mid.ledger_id(), mid.entry_id(), mid.batch_index()))
        try:
            reader.read_next(300)
        except pulsar.Timeout:
            return seen, True
        return seen, False
    finally:
        client.close()


def read_ours(url: str, topic: str, start: tuple[int, int, int] | None, inclusive: bool,
              seek: tuple[int, int, int] | None) -> tuple[Seen, bool]:
    async def run() -> tuple[Seen, bool]:
        async with PulsarClient(url) as client:
            start_id = MessageId.earliest if start is None else MessageId(-1, *start)
            reader = await client.create_reader(topic, start_id,
                                                start_message_id_inclusive=inclusive)
            if seek is not None:
                await reader.seek(MessageId(-1, *seek))
            seen: Seen = []
            while await reader.has_message_available():
                msg = await reader.read_next(30_000)
                mid = msg.message_id()
                seen.append((msg.data(), mid.ledger_id(), mid.entry_id(), mid.batch_index()))
            try:
                await reader.read_next(300)
            except Timeout:
                return seen, True
            return seen, False

    return asyncio.run(asyncio.wait_for(run(), 120))


def test_our_reader_reads_what_the_official_reader_reads(
        broker: BrokerThread | RealPulsar) -> None:
    url = broker.url
    ids = produce(url, "readers")
    for start, inclusive, seek in CASES:
        start_id = None if start == "earliest" else ids[int(start)]
        seek_id = None if seek is None else ids[seek]
        theirs = read_official(url, "readers", start_id, inclusive, seek_id)
        mine = read_ours(url, "readers", start_id, inclusive, seek_id)
        assert mine == theirs, (start, inclusive, seek)
        assert theirs[0] and theirs[1], (start, inclusive, seek)



def test_partitioned_readers_read_the_same_messages(broker: BrokerThread | RealPulsar) -> None:
    topic = broker.create_partitioned_topic("readparts", 3)
    client = pulsar.Client(broker.url, logger=LOGGER, operation_timeout_seconds=30)
    try:
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(9):
            producer.send(str(i).encode(), partition_key=f"k{i}")
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        theirs = []
        while reader.has_message_available():
            msg = reader.read_next(30_000)
            mid = msg.message_id()
            theirs.append((msg.data(), mid.partition(), mid.ledger_id(), mid.entry_id()))
    finally:
        client.close()

    async def run() -> list[tuple[bytes, int, int, int]]:
        async with PulsarClient(broker.url) as ours:
            reader = await ours.create_reader(topic, MessageId.earliest)
            seen = []
            while await reader.has_message_available():
                msg = await reader.read_next(30_000)
                mid = msg.message_id()
                seen.append((msg.data(), mid.partition(), mid.ledger_id(), mid.entry_id()))
            return seen

    mine = asyncio.run(asyncio.wait_for(run(), 120))
    assert len(theirs) == 9 and len({p for _, p, _, _ in theirs}) > 1
    assert sorted(mine) == sorted(theirs)


def test_our_table_view_holds_what_the_official_one_holds(
        broker: BrokerThread | RealPulsar) -> None:
    client = pulsar.Client(broker.url, logger=LOGGER, operation_timeout_seconds=30)
    try:
        producer = client.create_producer("tables", batching_enabled=True,
                                          batching_max_publish_delay_ms=5)
        for key, value in [("a", b"1"), ("b", b"1"), ("a", b"2"), ("c", b"1"), ("c", b""),
                           ("d", b"1")]:
            producer.send(value, partition_key=key)
        view = client.create_table_view("tables")
        theirs_before = {key: view.get(key) for key in "abcd"}
        updates: list[tuple[str, bytes]] = []
        view.for_each_and_listen(lambda k, v: updates.append((k, v)))
        theirs_listened = sorted(updates)
        view.close()
    finally:
        client.close()

    async def run() -> tuple[dict[str, bytes | None], list[tuple[str, bytes]]]:
        async with PulsarClient(broker.url) as ours:
            view = await ours.create_table_view("tables")
            seen: list[tuple[str, bytes]] = []
            view.for_each_and_listen(lambda k, v: seen.append((k, v)))
            return {key: view.get(key) for key in "abcd"}, sorted(seen)

    mine_before, mine_listened = asyncio.run(asyncio.wait_for(run(), 120))
    assert theirs_before == {"a": b"2", "b": b"1", "c": None, "d": b"1"}
    assert mine_before == theirs_before
    assert mine_listened == theirs_listened


def test_our_typed_listening_reader_reads_the_official_producers_strings(
        broker: BrokerThread | RealPulsar) -> None:
    """The official producer's String-schema values reach our reader's listener as ``str``,
    decoded by the reader's schema, in order."""
    client = pulsar.Client(broker.url, logger=LOGGER, operation_timeout_seconds=30)
    try:
        producer = client.create_producer("typed-listened", schema=pulsar.schema.StringSchema(),
                                          batching_enabled=False)
        for word in ("eins", "zwei", "drei"):
            producer.send(word)
    finally:
        client.close()

    async def ours() -> list[str]:
        got: list[str] = []
        async with PulsarClient(broker.url) as client:
            reader = await client.create_reader(
                "typed-listened", MessageId.earliest, schema=StringSchema(),
                reader_listener=lambda _, msg: got.append(msg.value()))
            async with asyncio.timeout(30):
                while len(got) < 3:
                    await asyncio.sleep(0.02)
            await reader.close()
        return got

    assert asyncio.run(ours()) == ["eins", "zwei", "drei"]
