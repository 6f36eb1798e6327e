"""``format("pulsar")``: batch reads and writes through Spark, against the embedded broker and
Apache Pulsar (``pulsar_service``)."""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import json
import time
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from tests.support.spark import skip_module_without_java  # noqa: E402

skip_module_without_java()

from protoframe.clients.pulsar import PulsarClient  # noqa: E402
from protoframe.clients.pulsar.consumer import entry_messages  # noqa: E402
from protoframe.clients.pulsar.message import Message, MessageId, ReceivedEntry  # noqa: E402
from protoframe.generated.demo import spark as demo_rows  # noqa: E402
from protoframe.generated.demo.events import OrderPlaced  # noqa: E402
from protoframe.pipeline.pulsar_rows import MESSAGE_SCHEMA  # noqa: E402
from tests.support.demo_orders import orders, produce  # noqa: E402
from tests.support.pulsar_service import ON_BOTH_BROKERS, PulsarService  # noqa: E402

_names = itertools.count()


def reader(spark: Any, service: PulsarService, topic: str) -> Any:
    return (spark.read.format("pulsar").option("service_url", service.url)
            .option("topic", topic).option("read_timeout_ms", "15000"))


@ON_BOTH_BROKERS
def test_read_partitioned_topic_with_decoded_values(spark: Any,
                                                    pulsar_service: PulsarService) -> None:
    topic = pulsar_service.create_partitioned_topic(
        f"persistent://public/default/spark-read-{next(_names)}", 2)
    sent = orders(200)
    asyncio.run(produce(pulsar_service.url, topic, sent))

    df = reader(spark, pulsar_service, topic).option("value_type", OrderPlaced.FULL_NAME).load()
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
    assert reader(spark, pulsar_service, topic).load().count() == len(sent)
    assert reader(spark, pulsar_service, topic).option("starting_offsets", "latest") \
        .load().count() == 0


@ON_BOTH_BROKERS
def test_read_several_topics_and_empty_one(spark: Any, pulsar_service: PulsarService) -> None:
    first = f"persistent://public/default/spark-multi-{next(_names)}"
    second = f"persistent://public/default/spark-multi-{next(_names)}"
    empty = pulsar_service.create_partitioned_topic(
        f"persistent://public/default/spark-empty-{next(_names)}", 2)
    asyncio.run(produce(pulsar_service.url, first, orders(5)))
    asyncio.run(produce(pulsar_service.url, second, orders(7)))
    df = (spark.read.format("pulsar").option("service_url", pulsar_service.url)
          .option("topics", f"{first},{second},{empty}").load())
    counts = {r.topic: r["count"] for r in df.groupBy("topic").count().collect()}
    assert counts == {first: 5, second: 7}
    assert {r.partition for r in df.select("partition").collect()} == {-1}


def test_write_then_read_back(spark: Any, pulsar_service: PulsarService) -> None:
    # Embedded only, for time (the slowest case here): df.write.format("pulsar") on Apache
    # Pulsar is shown by the demo's run against it (tests/examples/test_pulsar_demo.py, which
    # writes and reads back), and the streaming sink by test_pulsar_sink.py on both brokers.
    source = pulsar_service.create_partitioned_topic(
        f"persistent://public/default/spark-src-{next(_names)}", 2)
    target = f"persistent://public/default/spark-dst-{next(_names)}"
    asyncio.run(produce(pulsar_service.url, source, orders(120)))
    df = reader(spark, pulsar_service, source).load().select("key", "value", "properties",
                                                     "event_time")
    (df.write.format("pulsar").option("service_url", pulsar_service.url).option("topic", target)
     .mode("append").save())
    back = reader(spark, pulsar_service, target).load()
    cols = ["key", "value", "properties", "event_time"]

    def rows(frame: Any) -> list[tuple[Any, ...]]:
        return sorted((r.key, r.value, tuple(sorted(r.properties.items())), r.event_time)
                      for r in frame.select(*cols).collect())

    assert rows(back) == rows(df)
    names = {r.producer_name for r in back.select("producer_name").distinct().collect()}
    assert len(names) == df.rdd.getNumPartitions()

    # String values and no key column are fine too.
    plain = spark.createDataFrame([("a",), ("b",)], "value string")
    (plain.write.format("pulsar").option("service_url", pulsar_service.url).option("topic", target)
     .mode("append").save())
    again = reader(spark, pulsar_service, target).load()
    assert again.count() == 122
    tail = again.where("key is null").select("value").collect()
    assert sorted(r.value for r in tail) == [b"a", b"b"]


async def produce_batched(url: str, topic: str, count: int, pause_after: int | None = None
                          ) -> int | None:
    """``count`` messages numbered by property "n", in batches of 4; returns a time between
    the first ``pause_after`` messages and the rest, when asked for one."""
    between = None
    async with PulsarClient(url) as client:
        producer = await client.create_producer(topic, block_if_queue_full=True,
                                                batching_max_messages=4)
        for i in range(count):
            if i == pause_after:
                await producer.flush()
                await asyncio.sleep(0.05)
                between = int(time.time() * 1000)
                await asyncio.sleep(0.05)
            producer.send_async(b"v%d" % i, properties={"n": str(i)})
        await producer.flush()
    return between


def ns(frame: Any) -> list[int]:
    return sorted(int(r.properties["n"]) for r in frame.select("properties").collect())


@ON_BOTH_BROKERS
def test_read_between_message_ids(spark: Any, pulsar_service: PulsarService) -> None:
    topic = f"persistent://public/default/spark-ids-{next(_names)}"
    asyncio.run(produce_batched(pulsar_service.url, topic, 30))
    rows = {int(r.properties["n"]): r.message_id
            for r in reader(spark, pulsar_service, topic).load().collect()}
    assert sorted(rows) == list(range(30))
    assert MessageId.deserialize(reader(spark, pulsar_service, topic).load().first()
                                 .message_id_bytes).batch_index() >= 0  # batched
    # Inclusive start, exclusive end, both inside batches.
    between = (reader(spark, pulsar_service, topic)
               .option("starting_offsets", json.dumps({topic: rows[6]}))
               .option("ending_offsets", json.dumps({topic: rows[23]})).load())
    assert ns(between) == list(range(6, 23))
    # The colon form; an end past the last message means "latest".
    start = MessageId.deserialize(
        reader(spark, pulsar_service, topic).load().where("properties['n'] = '9'").first()
        .message_id_bytes)
    colon = f"{start.ledger_id()}:{start.entry_id()}:{start.batch_index()}"
    later = (reader(spark, pulsar_service, topic)
             .option("starting_offsets", json.dumps({topic: colon}))
             .option("ending_offsets", json.dumps({topic: "999999:0"})).load())
    assert ns(later) == list(range(9, 30))
    # An end at or before the start reads nothing.
    assert (reader(spark, pulsar_service, topic)
            .option("starting_offsets", json.dumps({topic: rows[20]}))
            .option("ending_offsets", json.dumps({topic: rows[20]})).load().count()) == 0
    with pytest.raises(Exception, match="not a message id"):
        reader(spark, pulsar_service, topic).option("starting_offsets", '{"t": "x"}').load().count()


@ON_BOTH_BROKERS
def test_read_between_publish_times(spark: Any, pulsar_service: PulsarService) -> None:
    topic = f"persistent://public/default/spark-times-{next(_names)}"
    between = asyncio.run(produce_batched(pulsar_service.url, topic, 20, pause_after=12))
    assert between is not None
    after = reader(spark, pulsar_service, topic).option("starting_time", str(between)).load()
    assert ns(after) == list(range(12, 20))
    before = reader(spark, pulsar_service, topic).option("ending_time", str(between)).load()
    assert ns(before) == list(range(12))
    iso = dt.datetime.fromtimestamp(between / 1000, dt.UTC).isoformat()
    assert ns(reader(spark, pulsar_service, topic).option("starting_time", iso).load()) == \
        list(range(12, 20))


@ON_BOTH_BROKERS
def test_read_topics_pattern(spark: Any, pulsar_service: PulsarService) -> None:
    base = f"spark-pattern-{next(_names)}"
    plain = f"persistent://public/default/{base}-a"
    parted = pulsar_service.create_partitioned_topic(f"persistent://public/default/{base}-b", 2)
    other = f"persistent://public/default/{base}x-c"
    for name, count in ((plain, 3), (parted, 6), (other, 2)):
        asyncio.run(produce(pulsar_service.url, name, orders(count)))
    df = (spark.read.format("pulsar").option("service_url", pulsar_service.url)
          .option("topics_pattern", f"persistent://public/default/{base}-.*").load())
    counts = {r.topic: r["count"] for r in df.groupBy("topic").count().collect()}
    assert sum(counts.values()) == 9
    assert counts[plain] == 3
    assert {t for t in counts if t != plain} <= {f"{parted}-partition-0",
                                                f"{parted}-partition-1"}
    with pytest.raises(Exception, match="cannot be combined"):
        (spark.read.format("pulsar").option("service_url", pulsar_service.url)
         .option("topic", plain).option("topics_pattern", ".*").load().count())


@ON_BOTH_BROKERS
def test_client_lists_topics_and_last_ids(pulsar_service: PulsarService) -> None:
    topic = pulsar_service.create_partitioned_topic(
        f"persistent://public/default/spark-last-{next(_names)}", 2)

    async def check() -> None:
        await produce(pulsar_service.url, topic, orders(10))
        async with PulsarClient(pulsar_service.url) as client:
            assert await client.get_topics_matching(topic) == [topic]
            listed = await client.get_topics_of_namespace("public/default")
            assert f"{topic}-partition-1" in listed
            consumer = await client.subscribe(topic, "last-ids", durable=False)
            lasts = await consumer.get_last_message_ids()
            assert [m.partition() for m in lasts] == [0, 1]
            assert all(m.entry_id() >= 0 for m in lasts)
            with pytest.raises(ValueError, match="get_last_message_ids"):
                await consumer.get_last_message_id()
            await consumer.close()
            single = await client.subscribe(f"{topic}-partition-0", "last-id", durable=False)
            assert (await single.get_last_message_id()).entry_id() == lasts[0].entry_id()
            await single.close()

    asyncio.run(check())


@ON_BOTH_BROKERS
def test_row_builder_matches_each_message(pulsar_service: PulsarService) -> None:
    """The per-entry column shortcuts give what each message's own accessors give."""
    from protoframe.pipeline.pulsar_rows import RowBatchBuilder

    topic = f"persistent://public/default/spark-rows-{next(_names)}"

    async def check() -> None:
        async with PulsarClient(pulsar_service.url) as client:
            batched = await client.create_producer(topic, batching_max_messages=300)
            for i in range(700):  # per-message metadata on some, uniform runs elsewhere
                batched.send_async(b"x%d" % i, properties={"i": str(i)} if i % 2 else None,
                                   partition_key="k" if i % 3 else None,
                                   event_timestamp=7 + i if i % 5 == 0 else None)
            await batched.flush()
            single = await client.create_producer(topic, batching_enabled=False)
            for i in range(5):
                single.send_async(b"y", event_timestamp=5 + i, properties={"s": "1"},
                                  partition_key="one")
            await single.flush()
            plain = await client.create_producer(topic, batching_max_messages=200)
            for i in range(400):  # uniform batches: the columns are built with Arrow kernels
                plain.send_async(b"p%03d" % i)  # one size: fixed-size records
            await plain.flush()
            consumer = await client.subscribe(topic, "rows", durable=False,
                                              initial_position="earliest")
            msgs: list[Message] = []
            while len(msgs) < 1105:
                msgs += await consumer.batch_receive(1000, timeout_millis=10_000)
            with pytest.raises(TypeError, match="deliver_entries=True"):
                await consumer.receive_entries(1, timeout_millis=1)
            # The same topic as whole entries, as the data source reads it.
            reader = await client.subscribe(topic, "entries", durable=False,
                                            initial_position="earliest", deliver_entries=True)
            with pytest.raises(TypeError, match="receive_entries"):
                await reader.receive(timeout_millis=1)
            entries: list[ReceivedEntry] = []
            while sum(e.info.batch_size or 1 for e in entries) < 1105:
                entries += await reader.receive_entries(1000, timeout_millis=10_000)
        assert sum(m.single_metadata() is None and m.batch_index() >= 0 for m in msgs) >= 400
        split = [m for e in entries for m in entry_messages(e)]
        assert [(m.message_id(), m.data(), m.properties()) for m in split] == \
            [(m.message_id(), m.data(), m.properties()) for m in msgs]
        for part in (-1, 3):
            by_message = RowBatchBuilder(None, part)
            by_message.extend(msgs)
            by_entry = RowBatchBuilder(None, part)
            for entry in entries:
                by_entry.add_entry(entry)
            assert len(by_entry) == 1105
            assert by_entry.take().equals(by_message.take())
        # Whole entries, and a range starting inside a uniform batch.
        for part, chosen in ((-1, msgs), (3, msgs), (-1, msgs[705 + 37:] + msgs[:40])):
            builder = RowBatchBuilder(None, part)
            builder.extend(chosen)
            rows = builder.take().to_pylist()
            assert len(rows) == len(chosen) and len(builder) == 0
            for msg, row in zip(chosen, rows, strict=True):
                got = msg.message_id()
                mid = MessageId(part, got.ledger_id(), got.entry_id(), got.batch_index(),
                                got.batch_size())
                assert row["message_id_bytes"] == mid.serialize()
                assert row["message_id"] == str(mid)
                assert row["key"] == (msg.partition_key().encode() if msg.has_partition_key()
                                      else None)
                assert dict(row["properties"]) == msg.properties()
                assert row["value"] == msg.data() and row["topic"] == msg.topic_name()
                event = row["event_time"]
                assert (0 if event is None else int(event.timestamp() * 1000)) == \
                    msg.event_timestamp()
                assert int(row["publish_time"].timestamp() * 1000) == msg.publish_timestamp()
                assert row["producer_name"] == msg.producer_name()

    asyncio.run(check())


# --- min_partitions ---------------------------------------------------------------------------


def ids_of(frame: Any) -> list[str]:
    return sorted(r.message_id for r in frame.select("message_id").collect())


def test_min_partitions_splits_one_partition(spark: Any, pulsar_service: PulsarService) -> None:
    # Embedded only, for time (a minute of Spark jobs): splitting by the entry ids a real
    # bookie gives is shown on Apache Pulsar by the test below.
    topic = f"persistent://public/default/spark-split-{next(_names)}"
    between = asyncio.run(produce_batched(pulsar_service.url, topic, 203, pause_after=90))
    assert between is not None
    whole = reader(spark, pulsar_service, topic).load()
    assert whole.rdd.getNumPartitions() == 1
    split = reader(spark, pulsar_service, topic).option("min_partitions", "4").load()
    assert split.rdd.getNumPartitions() == 4
    expected = ids_of(whole)
    assert len(expected) == 203
    got = ids_of(split)
    assert got == expected and len(set(got)) == len(got)
    assert ns(split) == list(range(203))
    # Per-task counts: every piece reads something.
    sizes = split.rdd.mapPartitions(lambda rows: [sum(1 for _ in rows)]).collect()
    assert len(sizes) == 4 and all(size > 0 for size in sizes) and sum(sizes) == 203

    # Id bounds inside batch entries (inclusive start, exclusive end), and entry-wide ones.
    by_n = {int(r.properties["n"]): MessageId.deserialize(r.message_id_bytes)
            for r in whole.collect()}
    assert by_n[6].batch_index() > 0 and by_n[181].batch_index() > 0

    def colon(mid: MessageId, batch: bool = True) -> str:
        return (f"{mid.ledger_id()}:{mid.entry_id()}"
                + (f":{mid.batch_index()}" if batch else ""))

    for start, end in ((colon(by_n[6]), colon(by_n[181])),
                       (colon(by_n[6], False), colon(by_n[181], False)),
                       (colon(by_n[50]), colon(by_n[52]))):
        bounded = {"starting_offsets": json.dumps({topic: start}),
                   "ending_offsets": json.dumps({topic: end})}
        unsplit = reader(spark, pulsar_service, topic).options(**bounded).load()
        pieces = reader(spark, pulsar_service, topic).options(**bounded) \
            .option("min_partitions", "5").load()
        assert ids_of(pieces) == ids_of(unsplit) and ns(pieces) == ns(unsplit)
        assert ns(unsplit)  # not trivially empty
    bounded_split = (reader(spark, pulsar_service, topic).option("min_partitions", "5")
                     .option("starting_offsets", json.dumps({topic: colon(by_n[6])}))
                     .option("ending_offsets", json.dumps({topic: colon(by_n[181])})).load())
    assert ns(bounded_split) == list(range(6, 181))
    assert bounded_split.rdd.getNumPartitions() == 5

    # Publish-time bounds filter every piece.
    for option in ("starting_time", "ending_time"):
        unsplit = reader(spark, pulsar_service, topic).option(option, str(between)).load()
        pieces = (reader(spark, pulsar_service, topic).option(option, str(between))
                  .option("min_partitions", "3").load())
        assert pieces.rdd.getNumPartitions() == 3
        assert ids_of(pieces) == ids_of(unsplit)
    assert ns(reader(spark, pulsar_service, topic).option("starting_time", str(between))
              .option("min_partitions", "3").load()) == list(range(90, 203))

    with pytest.raises(Exception, match="min_partitions must be a positive integer"):
        reader(spark, pulsar_service, topic).option("min_partitions", "0").load().count()


@ON_BOTH_BROKERS
def test_min_partitions_small_and_partitioned_topics(spark: Any,
                                                     pulsar_service: PulsarService) -> None:
    # Fewer entries than min_partitions: at most one piece per entry.
    small = f"persistent://public/default/spark-split-small-{next(_names)}"
    asyncio.run(produce_batched(pulsar_service.url, small, 7))  # entries of 4 and 3 messages
    df = reader(spark, pulsar_service, small).option("min_partitions", "8").load()
    assert ns(df) == list(range(7))
    assert df.rdd.getNumPartitions() == len({(m.ledger_id(), m.entry_id()) for m in (
        MessageId.deserialize(r.message_id_bytes) for r in df.collect())})
    single = f"persistent://public/default/spark-split-one-{next(_names)}"
    asyncio.run(produce_batched(pulsar_service.url, single, 1))
    one = reader(spark, pulsar_service, single).option("min_partitions", "8").load()
    assert ns(one) == [0] and one.rdd.getNumPartitions() == 1

    # Two partitions of different sizes: the bigger one gets more pieces; already enough
    # partitions: nothing is split.
    parted = pulsar_service.create_partitioned_topic(
        f"persistent://public/default/spark-split-parts-{next(_names)}", 2)
    asyncio.run(produce_batched(pulsar_service.url, f"{parted}-partition-0", 120))
    asyncio.run(produce_batched(pulsar_service.url, f"{parted}-partition-1", 40))
    whole = reader(spark, pulsar_service, parted).load()
    split = reader(spark, pulsar_service, parted).option("min_partitions", "4").load()
    assert split.rdd.getNumPartitions() == 4
    assert ids_of(split) == ids_of(whole) and len(ids_of(whole)) == 160
    per_task = split.rdd.mapPartitions(
        lambda rows: [sorted({r.partition for r in rows})]).collect()
    assert sorted(map(tuple, per_task)) == [(0,), (0,), (0,), (1,)]
    assert reader(spark, pulsar_service, parted).option("min_partitions", "2").load() \
        .rdd.getNumPartitions() == 2


def test_decoded_column_is_columnar_and_equals_the_row_path(
        spark: Any, pulsar_service: PulsarService) -> None:
    """The ``decoded`` column, built by the columnar decoder, has the codec's exact schema and
    the row path's values: the decoded value where a value decodes, null where it does not
    (cut short, invalid UTF-8, a group), in the same batch as good values."""
    from protoframe.runtime.spark import columnar
    from protoframe.runtime.spark.columnar import row_column

    topic = f"persistent://public/default/spark-columnar-{next(_names)}"
    good = orders(60)
    damaged = [good[0].encode()[:-1], b"\x0a\x02\xff\xfe", b"\x0b\x00"]
    values = [o.encode() for o in good] + damaged

    async def send() -> None:
        async with PulsarClient(pulsar_service.url) as client:
            producer = await client.create_producer(topic, block_if_queue_full=True)
            for i, value in enumerate(values):
                producer.send_async(value, properties={"n": str(i)})
            await producer.flush()

    asyncio.run(send())
    df = reader(spark, pulsar_service, topic).option("value_type", OrderPlaced.FULL_NAME).load()
    assert df.schema["decoded"].dataType == demo_rows.OrderPlaced.spark_schema
    assert df.schema["decoded"].nullable
    rows = {int(r.properties["n"]): r for r in df.collect()}
    assert sorted(rows) == list(range(len(values)))
    expected = row_column(demo_rows.OrderPlaced, values).to_pylist()
    for n, row in rows.items():
        got = None if row.decoded is None else row.decoded.asDict(recursive=True)
        assert got == expected[n], n
    assert all(rows[len(good) + k].decoded is None for k in range(len(damaged)))
    if columnar.available():
        assert columnar.plan(demo_rows.OrderPlaced) is not None
