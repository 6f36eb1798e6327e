"""``make run``: typed events through Pulsar, end to end (``python examples/pulsar_demo/demo.py``).

Starts the embedded broker (or uses ``PULSAR_URL`` to talk to a real cluster), produces
``OrderPlaced`` events encoded with the generated bindings, consumes and decodes them, and
prints a short summary. It also shows the wire form of a few typed protocol commands.

Then (unless ``PROTOFRAME_DEMO_SPARK=0``, or ``SPARK`` is False) Spark reads the topic through
the ``pulsar`` data source (``pipeline/pulsar_source.py``) with the decoded ``OrderPlaced``
column, sums revenue per currency, writes the sums as ``RevenueSummary`` values to a second
topic with ``df.write.format("pulsar")`` and reads them back.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator

from protoframe.clients.pulsar import PulsarClient
from protoframe.clients.pulsar.broker import EmbeddedBroker
from protoframe.generated.demo.events import OrderPlaced
from protoframe.generated.pulsar.pulsar_api import (
    BaseCommand,
    CommandConnect,
    CommandSend,
)

EVENTS = 2_000
SPARK = os.environ.get("PROTOFRAME_DEMO_SPARK", "1") != "0"
CUSTOMERS = ["ada", "grace", "linus", "margaret", "ken", "barbara"]
CURRENCIES = ["EUR", "USD", "GBP"]
ITEMS = ["book", "lamp", "mug", "pen", "desk", "chair"]


@contextlib.asynccontextmanager
async def service_url() -> AsyncIterator[str]:
    """PULSAR_URL when set, else an embedded broker on a free loopback port."""
    url = os.environ.get("PULSAR_URL")
    if url:
        yield url
        return
    async with EmbeddedBroker(port=0) as embedded:
        yield embedded


def make_orders(count: int, seed: int = 7) -> list[OrderPlaced]:
    rng = random.Random(seed)
    now = int(time.time() * 1000)
    return [
        OrderPlaced(
            order_id=f"o-{i:06d}",
            customer=rng.choice(CUSTOMERS),
            amount_cents=rng.randrange(199, 25_000),
            currency=rng.choice(CURRENCIES),
            items=rng.sample(ITEMS, rng.randrange(1, 4)),
            placed_at_ms=now + i,
        )
        for i in range(count)
    ]


def show_commands() -> None:
    print("Typed protocol commands and their wire form:")
    for cmd in (
        BaseCommand(type_=BaseCommand.Type.CONNECT, connect=CommandConnect(
            client_version="protoframe-demo", protocol_version=21)),
        BaseCommand(type_=BaseCommand.Type.SEND, send=CommandSend(
            producer_id=0, sequence_id=0, num_messages=1)),
    ):
        data = cmd.encode()
        assert BaseCommand.decode(data) == cmd
        print(f"  {cmd.type_.name:<8} {len(data):>3} bytes  {data.hex()}")


async def produce_and_consume(url: str, topic: str) -> None:
    orders = make_orders(EVENTS)
    async with PulsarClient(url) as client:
        consumer = await client.subscribe(topic, "demo-summary", subscription_type="Shared",
                                          initial_position="earliest")
        producer = await client.create_producer(topic, compression_type="LZ4",
                                                batching_enabled=True,
                                                block_if_queue_full=True)
        started = time.perf_counter()
        for order in orders:
            producer.send_async(order.encode(), partition_key=order.customer,
                                properties={"schema": OrderPlaced.FULL_NAME,
                                            "currency": order.currency})
        await producer.flush()
        produced = time.perf_counter() - started

        revenue: dict[str, int] = defaultdict(int)
        by_customer: Counter[str] = Counter()
        started = time.perf_counter()
        for _ in range(len(orders)):
            msg = await consumer.receive(timeout_millis=10_000)
            event = OrderPlaced.decode(msg.data())
            assert msg.partition_key() == event.customer
            revenue[event.currency] += event.amount_cents
            by_customer[event.customer] += 1
            await consumer.acknowledge(msg)
        consumed = time.perf_counter() - started
        await producer.close()
        await consumer.close()

    print(f"\nProduced {len(orders)} OrderPlaced events to {topic} in {produced:.2f} s "
          f"(LZ4, batched) and consumed them in {consumed:.2f} s.")
    print("Revenue by currency:")
    for currency in sorted(revenue):
        print(f"  {currency}  {revenue[currency] / 100:>12,.2f}")
    top = ", ".join(f"{name} ({n})" for name, n in by_customer.most_common(3))
    print(f"Busiest customers: {top}")
    expected = sum(o.amount_cents for o in orders)
    assert sum(revenue.values()) == expected, "consumed revenue differs from produced"
    print(f"Checked: every event arrived once and decoded to what was sent "
          f"(total {expected / 100:,.2f}).")


def spark_step(url: str, topic: str) -> None:
    """Revenue per currency with Spark, through Pulsar both ways (see the module docstring)."""
    from pyspark.sql import functions as F

    from protoframe.generated.demo import spark as demo_rows
    from protoframe.generated.demo.events import RevenueSummary
    from protoframe.pipeline.pulsar_source import register
    from protoframe.pipeline.spark_session import local_session

    started = time.perf_counter()
    spark = local_session("protoframe-demo")
    register(spark)
    orders = (spark.read.format("pulsar").option("service_url", url).option("topic", topic)
              .option("value_type", OrderPlaced.FULL_NAME).load())
    sums = (orders.groupBy(F.col("decoded.currency").alias("currency"))
            .agg(F.count("*").alias("orders"),
                 F.sum("decoded.amount_cents").alias("amount_cents"))
            .collect())
    encoded = [(s.currency, RevenueSummary(currency=s.currency, orders=s.orders,
                                           amount_cents=s.amount_cents).encode())
               for s in sums]
    summary_topic = f"{topic}-revenue"
    (spark.createDataFrame(encoded, "key string, value binary")
     .write.format("pulsar").option("service_url", url).option("topic", summary_topic)
     .mode("append").save())
    back = (spark.read.format("pulsar").option("service_url", url)
            .option("topic", summary_topic).option("value_type", RevenueSummary.FULL_NAME)
            .load().select("decoded.*").orderBy("currency"))
    rows = back.collect()
    elapsed = time.perf_counter() - started
    print(f"\nSpark read {orders.count()} events from {topic} (format \"pulsar\", decoded "
          f"OrderPlaced column), wrote {len(encoded)} RevenueSummary values to "
          f"{summary_topic} and read them back ({elapsed:.1f} s):")
    print(f"  {'currency':<8} {'orders':>6} {'revenue':>12}")
    for row in rows:
        summary = demo_rows.RevenueSummary.from_row(row)
        print(f"  {summary.currency:<8} {summary.orders:>6} "
              f"{summary.amount_cents / 100:>12,.2f}")
    assert sum(r.orders for r in rows) == orders.count(), "Spark totals differ"


async def run() -> None:
    show_commands()
    async with service_url() as url:
        topic = f"persistent://public/default/protoframe-demo-orders-{int(time.time())}"
        print(f"\nPulsar at {url}" + ("" if os.environ.get("PULSAR_URL") else
                                       " (embedded broker; set PULSAR_URL for a real cluster)"))
        await produce_and_consume(url, topic)
        if SPARK:
            # In a thread: the embedded broker runs on this event loop and must keep serving.
            await asyncio.to_thread(spark_step, url, topic)


def main() -> None:
    asyncio.run(run())


if __name__ == "__main__":
    main()
