"""``format("pulsar")``: batch reads and writes through Spark against the embedded broker."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from pipeline.capture_decode import java_version  # noqa: E402

if (java_version() or 0) < 17:
    pytest.skip("Spark needs Java 17+", allow_module_level=True)

from clients.pulsar import PulsarClient  # noqa: E402
from clients.pulsar.broker import BrokerThread  # noqa: E402
from clients.pulsar.message import MessageId  # noqa: E402
from generated.demo import spark as demo_rows  # noqa: E402
from generated.demo.events import OrderPlaced  # noqa: E402
from pipeline.capture_decode import local_session  # noqa: E402
from pipeline.pulsar_source import MESSAGE_SCHEMA, register  # noqa: E402

_names = itertools.count()


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerThread]:
    with BrokerThread() as thread:
        yield thread


@pytest.fixture(scope="module")
def spark() -> Any:
    session = local_session("protoframe-pulsar-source")
    register(session)
    return session


def orders(count: int) -> list[OrderPlaced]:
    return [OrderPlaced(order_id=f"o-{i}", customer=f"c{i % 7}", amount_cents=100 + i,
                        currency=["EUR", "USD"][i % 2], items=["pen"] * (i % 3),
                        placed_at_ms=1_700_000_000_000 + i) for i in range(count)]


async def produce(url: str, topic: str, values: list[OrderPlaced]) -> None:
    async with PulsarClient(url) as client:
        producer = await client.create_producer(topic, block_if_queue_full=True)
        for i, order in enumerate(values):
            producer.send_async(order.encode(), partition_key=order.customer,
                                properties={"n": str(i)}, event_timestamp=1_000 + i)
        await producer.flush()


def reader(spark: Any, broker: BrokerThread, topic: str) -> Any:
    return (spark.read.format("pulsar").option("service_url", broker.url)
            .option("topic", topic).option("read_timeout_ms", "15000"))


def test_read_partitioned_topic_with_decoded_values(spark: Any, broker: BrokerThread) -> None:
    topic = broker.create_partitioned_topic(
        f"persistent://public/default/spark-read-{next(_names)}", 2)
    sent = orders(200)
    asyncio.run(produce(broker.url, topic, sent))

    df = reader(spark, broker, topic).option("value_type", OrderPlaced.FULL_NAME).load()
    assert df.schema.fields[:len(MESSAGE_SCHEMA.fields)] == MESSAGE_SCHEMA.fields
    assert df.schema["decoded"].dataType == demo_rows.OrderPlaced.spark_schema
    rows = df.collect()
    assert len(rows) == len(sent)
    by_n = {int(r.properties["n"]): r for r in rows}
    assert sorted(by_n) == list(range(len(sent)))
    for n, row in by_n.items():
        order = sent[n]
        assert row.value == order.encode()
        assert row.key == order.customer.encode()
        assert demo_rows.OrderPlaced.from_row(row.decoded) == order
        assert row.topic == f"{topic}-partition-{row.partition}"
        assert row.event_time.timestamp() * 1000 == pytest.approx(1_000 + n, abs=1)
        assert row.publish_time is not None and row.redelivery_count == 0
        assert MessageId.deserialize(row.message_id_bytes).partition() == row.partition
        assert row.message_id == str(MessageId.deserialize(row.message_id_bytes))

    counts = {r.partition: r["count"] for r in df.groupBy("partition").count().collect()}
    assert set(counts) == {0, 1} and sum(counts.values()) == len(sent)
    assert df.rdd.getNumPartitions() == 2
    # Same customer, same partition: the key routes.
    per_key = df.select("key", "partition").distinct().groupBy("key").count().collect()
    assert per_key and all(r["count"] == 1 for r in per_key)

    # A second read plans the same range again; "latest" as the start reads nothing.
    assert reader(spark, broker, topic).load().count() == len(sent)
    assert reader(spark, broker, topic).option("starting_offsets", "latest").load().count() == 0


def test_read_several_topics_and_empty_one(spark: Any, broker: BrokerThread) -> None:
    first = f"persistent://public/default/spark-multi-{next(_names)}"
    second = f"persistent://public/default/spark-multi-{next(_names)}"
    empty = broker.create_partitioned_topic(
        f"persistent://public/default/spark-empty-{next(_names)}", 2)
    asyncio.run(produce(broker.url, first, orders(5)))
    asyncio.run(produce(broker.url, second, orders(7)))
    df = (spark.read.format("pulsar").option("service_url", broker.url)
          .option("topics", f"{first},{second},{empty}").load())
    counts = {r.topic: r["count"] for r in df.groupBy("topic").count().collect()}
    assert counts == {first: 5, second: 7}
    assert {r.partition for r in df.select("partition").collect()} == {-1}


def test_write_then_read_back(spark: Any, broker: BrokerThread) -> None:
    source = broker.create_partitioned_topic(
        f"persistent://public/default/spark-src-{next(_names)}", 2)
    target = f"persistent://public/default/spark-dst-{next(_names)}"
    asyncio.run(produce(broker.url, source, orders(120)))
    df = reader(spark, broker, source).load().select("key", "value", "properties",
                                                     "event_time")
    (df.write.format("pulsar").option("service_url", broker.url).option("topic", target)
     .mode("append").save())
    back = reader(spark, broker, target).load()
    cols = ["key", "value", "properties", "event_time"]

    def rows(frame: Any) -> list[tuple[Any, ...]]:
        return sorted((r.key, r.value, tuple(sorted(r.properties.items())), r.event_time)
                      for r in frame.select(*cols).collect())

    assert rows(back) == rows(df)
    names = {r.producer_name for r in back.select("producer_name").distinct().collect()}
    assert len(names) == df.rdd.getNumPartitions()

    # String values and no key column are fine too.
    plain = spark.createDataFrame([("a",), ("b",)], "value string")
    (plain.write.format("pulsar").option("service_url", broker.url).option("topic", target)
     .mode("append").save())
    again = reader(spark, broker, target).load()
    assert again.count() == 122
    tail = again.where("key is null").select("value").collect()
    assert sorted(r.value for r in tail) == [b"a", b"b"]
