"""The demo's ``OrderPlaced`` events produced to a Pulsar topic, as the Spark data source tests
(local session and standalone cluster) read them back."""

from __future__ import annotations

from protoframe.clients.pulsar import PulsarClient
from protoframe.generated.demo.events import OrderPlaced


def orders(count: int) -> list[OrderPlaced]:
    """``count`` orders, each field a function of its index."""
    return [OrderPlaced(order_id=f"o-{i}", customer=f"c{i % 7}", amount_cents=100 + i,
                        currency=["EUR", "USD"][i % 2], items=["pen"] * (i % 3),
                        placed_at_ms=1_700_000_000_000 + i) for i in range(count)]


async def produce(url: str, topic: str, values: list[OrderPlaced]) -> None:
    """Send ``values`` keyed by customer, with property ``n`` and event time ``1000 + n``."""
    async with PulsarClient(url) as client:
        producer = await client.create_producer(topic, block_if_queue_full=True)
        for i, order in enumerate(values):
            producer.send_async(order.encode(), partition_key=order.customer,
                                properties={"n": str(i)}, event_timestamp=1_000 + i)
        await producer.flush()


async def produce_numbered(url: str, topic: str, first: int, count: int,
                           batching: bool = True) -> None:
    """Send orders ``first`` to ``first + count - 1``, keyed by customer, with property ``n``."""
    async with PulsarClient(url) as client:
        producer = await client.create_producer(topic, block_if_queue_full=True,
                                                batching_enabled=batching)
        for i in range(first, first + count):
            order = OrderPlaced(order_id=f"o-{i}", customer=f"c{i % 5}", amount_cents=i)
            producer.send_async(order.encode(), partition_key=order.customer,
                                properties={"n": str(i)})
        await producer.flush()
