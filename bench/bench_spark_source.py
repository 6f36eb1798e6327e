"""Topic read throughput: ``spark.read.format("pulsar")`` against our client alone.

One embedded broker runs in a child process (``BrokerProcess``, messages in memory). Two
topics are written once with our producer (batching on: 1,000 messages per entry), ``N``
messages of 100 bytes each (``BENCH_SPARK_SOURCE_N``, default 1,000,000: Spark's fixed
costs per query, a few hundred milliseconds, would otherwise weigh on the rate): one
non-partitioned topic and one with two partitions.

Rows, each the best of ``RUNS`` runs (``BENCH_SPARK_SOURCE_RUNS``, default 2):

* client: our ``PulsarClient`` in this process, a non-durable subscription from the earliest
  message, ``await consumer.receive()`` until all ``N`` messages have arrived (no
  acknowledgements: the data source does not acknowledge either). The clock starts before
  ``subscribe``.
* spark: ``spark.read.format("pulsar")...load()`` in a ``local[2]`` session, materialised with
  ``write.format("noop")`` (every column of every row is produced and then dropped). The
  clock covers the whole action: planning (last message ids), the tasks' subscriptions,
  building the Arrow batches (11 columns) and handing them to the JVM. The session is
  started and warmed up (a read of 50,000 messages) before timing.
* spark, min_partitions=2 (1-partition topic only): the same read with
  ``option("min_partitions", "2")``, so the one topic partition's range is cut in two by
  entry id and read by two tasks on the session's two cores. The clock also covers the
  driver's extra planning step (one message received at the earliest position).
* client, receive+ack: the ``client`` benchmark's consume phase on the 1-partition topic (a
  durable subscription, ``await consumer.acknowledge(await consumer.receive())`` per
  message), for comparison with that benchmark's definition of the consume rate; the
  target lines are judged against the plain ``client`` row, which is faster.
* 1 property: a third, non-partitioned topic of ``N / 5`` messages that each carry one
  property, so every message has its own metadata in the batch: client and spark rows as
  above. Without per-message metadata the data source builds a batch's columns straight
  from its buffer; with it, each message is split out and its metadata decoded, by the
  client and by the data source alike.
* ceiling: the same action on a Python data source that only yields one prebuilt Arrow
  batch of 10,000 rows of the same schema (built by our row builder from real messages of
  the topic) ``N / 10,000`` times, with no Pulsar at all: what Spark's side of a Python
  data source costs with these rows. It is far above both readers, so the data source's
  rate is set by the work in its Python worker (receiving, building rows, handing Arrow
  batches over), not by Spark.

The target (from the issue): the data source reads at >= 50% of our client's own rate, judged
on the default rows. The one-partition row is the like-for-like comparison (one task, one
consumer); with two partitions Spark runs one task per partition on its two cores while the
client reads both partitions on one event loop. The ``min_partitions=2`` row's ratio (and a
target line for it) is printed for information.
"""

from __future__ import annotations

import asyncio
import os
import platform
import time
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from protoframe.clients.pulsar import PulsarClient
from protoframe.clients.pulsar.broker import BrokerProcess
from protoframe.pipeline.pulsar_rows import MESSAGE_SCHEMA, RowBatchBuilder

N = int(os.environ.get("BENCH_SPARK_SOURCE_N", "1000000"))
RUNS = int(os.environ.get("BENCH_SPARK_SOURCE_RUNS", "2"))
MESSAGE_SIZE = 100
TARGET_RATIO = 0.5
SPLIT = "spark, min_partitions=2"
CONSUME = "client, receive+ack"
PROPS = "1 property"  # a 1-partition topic whose messages each carry one property
N_PROPS = max(N // 5, 10_000)
COUNTS = {PROPS: N_PROPS}


def _load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


async def _produce(url: str, topic: str, count: int, properties: bool = False) -> None:
    async with PulsarClient(url) as client:
        producer = await client.create_producer(topic, max_pending_messages=0)
        for i in range(count):
            producer.send_async(i.to_bytes(8, "big") + bytes(MESSAGE_SIZE - 8),
                                properties={"n": str(i % 1000)} if properties else None)
        await producer.flush()


async def _client_read(url: str, topic: str, count: int) -> float:
    started = time.perf_counter()
    async with PulsarClient(url) as client:
        consumer = await client.subscribe(topic, f"bench-{time.monotonic_ns()}", durable=False,
                                          initial_position="earliest")
        receive = consumer.receive
        for _ in range(count):
            await receive(timeout_millis=30_000)
        elapsed = time.perf_counter() - started
        await consumer.close()
    return elapsed


async def _pin(url: str, topic: str) -> None:
    """A durable subscription at the start that never acknowledges: it keeps the broker from
    trimming what the receive+ack runs acknowledge (the topic is over its retention size)."""
    async with PulsarClient(url) as client:
        consumer = await client.subscribe(topic, "bench-pin", initial_position="earliest",
                                          receiver_queue_size=1)
        await consumer.close()


async def _client_consume(url: str, topic: str, count: int) -> float:
    """The ``client`` benchmark's consume phase: a durable subscription, receive + acknowledge."""
    async with PulsarClient(url) as client:
        consumer = await client.subscribe(topic, f"bench-ack-{time.monotonic_ns()}",
                                          initial_position="earliest")
        receive, acknowledge = consumer.receive, consumer.acknowledge
        started = time.perf_counter()
        for _ in range(count):
            await acknowledge(await receive(timeout_millis=30_000))
        elapsed = time.perf_counter() - started
        await consumer.close()
    return elapsed


def _spark_read(spark: Any, url: str, topic: str, min_partitions: int | None = None) -> float:
    reader = spark.read.format("pulsar").option("service_url", url).option("topic", topic)
    if min_partitions is not None:
        reader = reader.option("min_partitions", str(min_partitions))
    df = reader.load()
    started = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - started


async def _sample_batch(url: str, topic: str, count: int) -> Any:
    """An Arrow batch of the first ``count`` messages of ``topic``, as the source builds it."""
    async with PulsarClient(url) as client:
        consumer = await client.subscribe(topic, f"sample-{time.monotonic_ns()}",
                                          durable=False, initial_position="earliest")
        rows = RowBatchBuilder(None, -1)
        while len(rows) < count:
            rows.extend(await consumer.batch_receive(count - len(rows), timeout_millis=30_000))
        await consumer.close()
    return rows.take()


class _PrebuiltReader(DataSourceReader):
    def __init__(self, batch: Any, repeat: int) -> None:
        self.batch = batch
        self.repeat = repeat

    def partitions(self) -> Sequence[InputPartition]:
        return [InputPartition(0)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        for _ in range(self.repeat):
            yield self.batch


class _PrebuiltSource(DataSource):
    """``format("prebuilt")``: one Arrow batch of the Pulsar row schema, yielded repeatedly."""

    batch: Any = None
    repeat = 0

    @classmethod
    def name(cls) -> str:
        return "prebuilt"

    def schema(self) -> StructType:
        return MESSAGE_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return _PrebuiltReader(_PrebuiltSource.batch, _PrebuiltSource.repeat)


def _spark_ceiling(spark: Any) -> float:
    started = time.perf_counter()
    spark.read.format("prebuilt").load().write.format("noop").mode("overwrite").save()
    return time.perf_counter() - started


def main() -> None:
    from protoframe.pipeline.pulsar_source import register
    from protoframe.pipeline.spark_session import local_session

    print(f"Python {platform.python_version()}, {os.cpu_count()} CPUs, load average {_load()}")
    print(f"{N:,} messages of {MESSAGE_SIZE} bytes per topic, best of {RUNS} runs; broker: "
          "embedded, in a child process, messages in memory; Spark local[2]")
    single = "persistent://public/default/bench-source-1"
    double = "persistent://public/default/bench-source-2"
    props = "persistent://public/default/bench-source-props"
    broker = BrokerProcess(partitioned={double: 2}, extra_args=("--log-level", "WARNING"))
    url = broker.start()
    results: dict[tuple[str, str], list[float]] = {}
    try:
        asyncio.run(_produce(url, single, N))
        asyncio.run(_produce(url, double, N))
        asyncio.run(_produce(url, props, N_PROPS, properties=True))
        asyncio.run(_pin(url, single))
        asyncio.run(_produce(url, "bench-source-warmup", 50_000))
        _PrebuiltSource.batch = asyncio.run(_sample_batch(url, single, 10_000))
        _PrebuiltSource.repeat = N // 10_000
        spark = local_session("protoframe-bench-source")
        register(spark)
        spark.dataSource.register(_PrebuiltSource)
        spark.sparkContext.setLogLevel("ERROR")
        _spark_read(spark, url, "persistent://public/default/bench-source-warmup")
        _spark_ceiling(spark)
        for _ in range(RUNS):
            for label, topic in (("1 partition", single), ("2 partitions", double),
                                 (PROPS, props)):
                results.setdefault((label, "client"), []).append(
                    asyncio.run(_client_read(url, topic, COUNTS.get(label, N))))
                results.setdefault((label, "spark"), []).append(_spark_read(spark, url, topic))
            results.setdefault(("1 partition", SPLIT), []).append(
                _spark_read(spark, url, single, min_partitions=2))
            results.setdefault(("1 partition", CONSUME), []).append(
                asyncio.run(_client_consume(url, single, N)))
            results.setdefault(("1 partition", "ceiling"), []).append(_spark_ceiling(spark))
        spark.stop()
    finally:
        broker.stop()

    print()
    header = (f"{'topic':<13} {'reader':<25} {'msgs/s (best)':>14} {'all runs':>26} "
              f"{'spark/client':>13}")
    print(header)
    print("-" * len(header))
    verdicts: list[str] = []
    for label in ("1 partition", "2 partitions", PROPS):
        readers = ["client", "spark"] + ([SPLIT, CONSUME] if label == "1 partition" else [])
        n = COUNTS.get(label, N)
        rates = {who: n / min(results[(label, who)]) for who in readers}
        for who in readers:
            runs = ", ".join(f"{n / t / 1000:,.0f}k" for t in results[(label, who)])
            shown = (f"{rates[who] / rates['client']:.2f}x" if who not in ("client", CONSUME)
                     else "")
            print(f"{label:<13} {who:<25} {rates[who]:>14,.0f} {runs:>26} {shown:>13}")
        for who in readers[1:]:
            if who == CONSUME:
                ratio = rates["spark"] / rates[CONSUME]
                verdicts.append(f"  {label}, spark / {CONSUME} (information only): "
                                f"{ratio:.2f} >= {TARGET_RATIO:.2f} "
                                f"{'MET' if ratio >= TARGET_RATIO else 'NOT MET'}")
                continue
            ratio = rates[who] / rates["client"]
            name = label if who == "spark" else f"{label}, {who} (information only)"
            verdicts.append(f"  {name}: spark/client {ratio:.2f} >= {TARGET_RATIO:.2f} "
                            f"{'MET' if ratio >= TARGET_RATIO else 'NOT MET'}")
    ceiling = N // 10_000 * 10_000 / min(results[("1 partition", "ceiling")])
    runs = ", ".join(f"{N / t / 1000:,.0f}k" for t in results[("1 partition", "ceiling")])
    print(f"{'(prebuilt)':<13} {'ceiling':<25} {ceiling:>14,.0f} {runs:>26} "
          f"{ceiling / (N / min(results[('1 partition', 'client')])):>12.2f}x")
    print("(ceiling: Spark taking ready Arrow batches of this schema from a Python data "
          "source, no Pulsar; its ratio is against the 1-partition client)")
    print()
    print("targets:")
    print("\n".join(verdicts))
    print(f"(load average at the end: {_load()})")


if __name__ == "__main__":
    main()
