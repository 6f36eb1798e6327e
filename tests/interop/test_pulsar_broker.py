"""The embedded broker against the official Pulsar client (pulsar-client, C++ core).

The broker runs on a background thread with its own event loop; the official client, which
blocks, runs in the test's thread. Everything stays on 127.0.0.1.
"""

from __future__ import annotations

import itertools
import logging
import re
import time
from collections.abc import Iterator
from typing import Any

import pulsar
import pytest

from protoframe.clients.pulsar.broker import BrokerThread

_names = itertools.count()
RECEIVE_MS = 5000


def unique(prefix: str) -> str:
    return f"{prefix}-{next(_names)}-{time.monotonic_ns() % 1_000_000}"


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerThread]:
    with BrokerThread(port=0) as running:
        yield running


@pytest.fixture(scope="module")
def client(broker: BrokerThread) -> Iterator[Any]:
    quiet = logging.getLogger("pulsar.official")
    quiet.setLevel(logging.ERROR)
    official = pulsar.Client(broker.url, logger=quiet, operation_timeout_seconds=10)
    yield official
    official.close()


def drain(consumer: Any, idle_ms: int = 500, ack: bool = True) -> list[Any]:
    """Receive until nothing arrives for ``idle_ms``."""
    out: list[Any] = []
    while True:
        try:
            message = consumer.receive(timeout_millis=idle_ms)
        except pulsar.Timeout:
            return out
        out.append(message)
        if ack:
            consumer.acknowledge(message)


COMPRESSIONS = ["NONE", "LZ4", "ZLib", "ZSTD", "SNAPPY"]


@pytest.mark.parametrize("batching", [False, True], ids=["single", "batched"])
@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_roundtrip_keeps_contents_keys_and_properties(client: Any, compression: str,
                                                      batching: bool) -> None:
    topic = unique(f"rt-{compression}")
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(
        topic, batching_enabled=batching, batching_max_publish_delay_ms=5,
        compression_type=getattr(pulsar.CompressionType, compression))
    sent = []
    # The official client cannot decompress its own ZLib-compressed empty payload (it logs
    # "Failed to decompress zlib buffer" and discards the message), so ZLib gets no empty one.
    start = 1 if compression == "ZLib" else 0
    for i in range(start, 30 + start):
        # Compressible and incompressible contents, an empty one, keys and properties.
        data = (b"abc" * i * 50) if i % 2 else bytes((i * 37 + j) % 256 for j in range(i * 7))
        props = {"index": str(i), "kind": "even" if i % 2 == 0 else "odd", "ü": "ñ"}
        sent.append((data, f"key-{i % 4}", props))
        producer.send_async(data, None, partition_key=f"key-{i % 4}", properties=props,
                            event_timestamp=1_700_000_000_000 + i)
    producer.flush()
    received = []
    for _ in sent:
        message = consumer.receive(timeout_millis=RECEIVE_MS)
        received.append((message.data(), message.partition_key(), message.properties()))
        assert message.event_timestamp() == 1_700_000_000_000 + start + len(received) - 1
        consumer.acknowledge(message)
    assert received == sent
    assert drain(consumer, 100) == []
    producer.close()
    consumer.close()


def test_batched_messages_share_an_entry(client: Any) -> None:
    topic = unique("batch-ids")
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, batching_enabled=True,
                                      batching_max_publish_delay_ms=50)
    for i in range(10):
        producer.send_async(f"m{i}".encode(), None)
    producer.flush()
    ids = []
    for _ in range(10):
        message = consumer.receive(timeout_millis=RECEIVE_MS)
        ids.append(message.message_id())
        consumer.acknowledge(message)
    assert len({(m.ledger_id(), m.entry_id()) for m in ids}) < 10  # batched into entries
    assert all(m.batch_index() >= 0 for m in ids)
    producer.close()
    consumer.close()


def test_shared_subscription_splits_messages(client: Any) -> None:
    topic = unique("shared")
    first = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared,
                             receiver_queue_size=5)
    second = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared,
                              receiver_queue_size=5)
    producer = client.create_producer(topic)
    for i in range(40):
        producer.send(f"m{i}".encode())
    got_first = [m.data() for m in drain(first)]
    got_second = [m.data() for m in drain(second)]
    assert got_first and got_second
    assert sorted(got_first + got_second) == sorted(f"m{i}".encode() for i in range(40))
    producer.close()
    first.close()
    second.close()


def test_exclusive_subscription_refuses_a_second_consumer(client: Any) -> None:
    topic = unique("exclusive")
    consumer = client.subscribe(topic, "sub")
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "sub")
    with pytest.raises(pulsar.ConsumerBusy):  # nor one of another type
        client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
    consumer.close()
    client.subscribe(topic, "sub").close()  # free again once the first one left


def test_failover_delivers_to_the_active_consumer_only(client: Any) -> None:
    topic = unique("failover")
    a = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Failover,
                         consumer_name="a")
    b = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Failover,
                         consumer_name="b")
    producer = client.create_producer(topic)
    for i in range(10):
        producer.send(f"m{i}".encode())
    assert [m.data() for m in drain(a)] == [f"m{i}".encode() for i in range(10)]
    assert drain(b, 100) == []
    a.close()  # b takes over
    for i in range(10, 15):
        producer.send(f"m{i}".encode())
    assert [m.data() for m in drain(b)] == [f"m{i}".encode() for i in range(10, 15)]
    producer.close()
    b.close()


def _key_shared_view(broker: BrokerThread, topic: str) -> str:
    """What the broker holds for a Key_Shared test's subscription, for a failure's message."""
    def view() -> str:
        held = [t for name, t in broker.broker.state.topics.items() if name.endswith(topic)]
        out = []
        for t in held:
            for sub in t.subscriptions.values():
                out.append(f"{sub.name}: read_pos {sub.read_pos} of {t.durable_id}, ring of "
                           f"{len(sub._ring)}, consumers " + ", ".join(
                               f"{c.name}#{c.consumer_id} permits={c.permits} "
                               f"paused={c.paused} pending={len(c.pending)}"
                               for c in sub.consumers))
        return "; ".join(out) or f"no topic {topic}"
    return broker.call(view)


def test_key_shared_keeps_each_key_on_one_consumer(client: Any, broker: BrokerThread) -> None:
    topic = unique("keyshared")
    consumers = [client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.KeyShared)
                 for _ in range(2)]
    producer = client.create_producer(topic, batching_enabled=True,
                                      batching_type=pulsar.BatchingType.KeyBased)
    keys = [f"key-{k}" for k in range(16)]
    for i in range(160):
        producer.send_async(f"m{i}".encode(), None, partition_key=keys[i % 16])
    producer.flush()
    per_consumer = [drain(c) for c in consumers]
    key_sets = [{m.partition_key() for m in got} for got in per_consumer]
    assert key_sets[0] and key_sets[1], (
        [len(got) for got in per_consumer], [c.consumer_name() for c in consumers],
        _key_shared_view(broker, topic))
    assert not key_sets[0] & key_sets[1]
    assert sum(len(got) for got in per_consumer) == 160
    for got in per_consumer:  # per-key order holds
        for key in keys:
            seq = [int(m.data()[1:]) for m in got if m.partition_key() == key]
            assert seq == sorted(seq)
    producer.close()
    for c in consumers:
        c.close()


def test_negative_ack_is_redelivered_with_a_count(client: Any) -> None:
    topic = unique("nack")
    consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared,
                                negative_ack_redelivery_delay_ms=100)
    producer = client.create_producer(topic)
    producer.send(b"poison")
    producer.send(b"fine")
    first = consumer.receive(timeout_millis=RECEIVE_MS)
    assert (first.data(), first.redelivery_count()) == (b"poison", 0)
    consumer.negative_acknowledge(first)
    second = consumer.receive(timeout_millis=RECEIVE_MS)
    assert second.data() == b"fine"
    consumer.acknowledge(second)
    again = consumer.receive(timeout_millis=RECEIVE_MS)
    assert (again.data(), again.redelivery_count()) == (b"poison", 1)
    consumer.negative_acknowledge(again)
    third = consumer.receive(timeout_millis=RECEIVE_MS)
    assert (third.data(), third.redelivery_count()) == (b"poison", 2)
    consumer.acknowledge(third)
    assert drain(consumer, 300) == []
    producer.close()
    consumer.close()


def test_unacked_messages_go_to_another_consumer_when_one_closes(client: Any) -> None:
    topic = unique("close-redeliver")
    lazy = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(topic)
    for i in range(5):
        producer.send(f"m{i}".encode())
    held = [lazy.receive(timeout_millis=RECEIVE_MS) for _ in range(5)]  # never acknowledged
    assert [m.data() for m in held] == [f"m{i}".encode() for i in range(5)]
    other = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
    assert drain(other, 200) == []
    lazy.close()
    again = drain(other)
    assert sorted(m.data() for m in again) == [f"m{i}".encode() for i in range(5)]
    assert all(m.redelivery_count() == 1 for m in again)
    producer.close()
    other.close()


def test_redeliver_unacknowledged_on_an_exclusive_subscription(client: Any) -> None:
    topic = unique("redeliver")
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    for i in range(4):
        producer.send(f"m{i}".encode())
    first = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(4)]
    consumer.acknowledge(first[0])
    consumer.redeliver_unacknowledged_messages()
    again = drain(consumer)
    assert [m.data() for m in again] == [b"m1", b"m2", b"m3"]
    producer.close()
    consumer.close()


def test_cumulative_ack_survives_resubscribing(client: Any) -> None:
    topic = unique("cumulative")
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, batching_enabled=True)
    for i in range(10):
        producer.send(f"m{i}".encode())  # one at a time: ten single-message batches
    received = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(10)]
    consumer.acknowledge_cumulative(received[5])
    consumer.close()
    consumer = client.subscribe(topic, "sub")
    assert [m.data() for m in drain(consumer)] == [f"m{i}".encode() for i in range(6, 10)]
    producer.close()
    consumer.close()


def test_batch_index_acks(client: Any) -> None:
    topic = unique("batch-index")
    consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared,
                                batch_index_ack_enabled=True)
    producer = client.create_producer(topic, batching_enabled=True,
                                      batching_max_publish_delay_ms=100)
    for i in range(10):
        producer.send_async(f"m{i}".encode(), None)
    producer.flush()
    received = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(10)]
    assert len({(m.message_id().ledger_id(), m.message_id().entry_id()) for m in received}) == 1
    for message in received[::2]:
        consumer.acknowledge(message)
    time.sleep(0.3)  # let the grouped acks reach the broker
    consumer.close()
    consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared,
                                batch_index_ack_enabled=True)
    assert [m.data() for m in drain(consumer)] == [f"m{i}".encode() for i in range(1, 10, 2)]
    consumer.close()
    consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
    assert drain(consumer, 200) == []
    producer.close()
    consumer.close()


def test_partitioned_topic(client: Any, broker: BrokerThread) -> None:
    topic = broker.create_partitioned_topic(unique("partitioned"), 3)
    assert client.get_topic_partitions(topic) == [f"{topic}-partition-{i}" for i in range(3)]
    consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(topic, batching_enabled=True,
                                      batching_max_publish_delay_ms=5)
    sent = {}
    for i in range(60):
        key = f"key-{i % 7}"
        sent[f"m{i}".encode()] = key
        producer.send_async(f"m{i}".encode(), None, partition_key=key)
    producer.flush()
    for i in range(60, 66):  # round robin without keys
        sent[f"m{i}".encode()] = ""
        producer.send(f"m{i}".encode())
    received = drain(consumer)
    assert {m.data(): m.partition_key() for m in received} == sent
    assert len(received) == len(sent)
    partitions = {m.message_id().partition() for m in received}
    assert partitions == {0, 1, 2}
    for message in received:  # a key always lands on the same partition
        assert message.topic_name().endswith(f"-partition-{message.message_id().partition()}")
    by_key: dict[str, set[int]] = {}
    for message in received:
        if message.partition_key():
            by_key.setdefault(message.partition_key(), set()).add(message.message_id().partition())
    assert all(len(parts) == 1 for parts in by_key.values())
    producer.close()
    consumer.close()


def test_seek_by_message_id_and_by_time(client: Any) -> None:
    topic = unique("seek")
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    ids = [producer.send(f"m{i}".encode()) for i in range(10)]
    assert [m.data() for m in drain(consumer)] == [f"m{i}".encode() for i in range(10)]
    consumer.seek(ids[3])
    # The broker restarts delivery at m3; the official client drops the seek target itself
    # unless start_message_id_inclusive is set.
    assert [m.data() for m in drain(consumer)] == [f"m{i}".encode() for i in range(4, 10)]
    consumer.seek(0)  # publish time: the beginning
    assert len(drain(consumer)) == 10
    consumer.seek(int(time.time() * 1000) + 60_000)  # the future: nothing
    assert drain(consumer, 200) == []
    producer.close()
    consumer.close()


def test_reader_and_last_message_id(client: Any) -> None:
    topic = unique("reader")
    producer = client.create_producer(topic)
    for i in range(5):
        producer.send(f"m{i}".encode())
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    seen = []
    while reader.has_message_available():
        seen.append(reader.read_next(RECEIVE_MS).data())
    assert seen == [f"m{i}".encode() for i in range(5)]
    producer.send(b"m5")
    assert reader.has_message_available()
    assert reader.read_next(RECEIVE_MS).data() == b"m5"
    assert not reader.has_message_available()
    reader.close()
    producer.close()


def test_named_producer_continues_its_sequence_and_resends_are_dropped(client: Any) -> None:
    topic = unique("dedup")
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, producer_name="the-producer")
    ids = [producer.send(f"m{i}".encode()) for i in range(3)]
    assert producer.last_sequence_id() == 2
    producer.close()
    producer = client.create_producer(topic, producer_name="the-producer")
    assert producer.last_sequence_id() == 2  # from the broker's dedup state
    # A resend of sequence id 1 is acknowledged with the original id and not stored again.
    resent = producer.send(b"m1 again", sequence_id=1)
    assert (resent.ledger_id(), resent.entry_id()) == (ids[1].ledger_id(), ids[1].entry_id())
    producer.send(b"m3")
    assert [m.data() for m in drain(consumer)] == [b"m0", b"m1", b"m2", b"m3"]
    producer.close()
    consumer.close()


def test_producer_names_are_unique_per_topic(client: Any) -> None:
    topic = unique("names")
    first = client.create_producer(topic)
    second = client.create_producer(topic)
    assert first.producer_name() != second.producer_name()
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer(topic, producer_name=first.producer_name())
    first.close()
    second.close()


def test_unsubscribe_forgets_the_cursor(client: Any) -> None:
    topic = unique("unsubscribe")
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic)
    producer.send(b"m0")
    assert [m.data() for m in drain(consumer)] == [b"m0"]
    consumer.unsubscribe()
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    assert [m.data() for m in drain(consumer)] == [b"m0"]  # a new subscription, from the start
    producer.close()
    consumer.close()


def test_chunked_message(client: Any) -> None:
    topic = unique("chunked")
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, chunking_enabled=True, batching_enabled=False)
    big = bytes(range(256)) * (7 * 1024 * 1024 // 256)  # over the 5 MiB message limit
    producer.send(big)
    producer.send(b"small")
    assert consumer.receive(timeout_millis=RECEIVE_MS * 2).data() == big
    assert consumer.receive(timeout_millis=RECEIVE_MS).data() == b"small"
    producer.close()
    consumer.close()


def test_regex_subscription_lists_the_namespace(client: Any) -> None:
    prefix = unique("pattern")
    producers = [client.create_producer(f"{prefix}-{i}") for i in range(3)]
    consumer = client.subscribe(re.compile(f"persistent://public/default/{prefix}-.*"), "sub",
                                initial_position=pulsar.InitialPosition.Earliest)
    for i, producer in enumerate(producers):
        producer.send(f"from {i}".encode())
    assert sorted(m.data() for m in drain(consumer)) == [b"from 0", b"from 1", b"from 2"]
    consumer.close()
    for producer in producers:
        producer.close()
