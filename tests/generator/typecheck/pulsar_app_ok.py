"""An application on the asyncio Pulsar client (and its sync facade); must pass mypy --strict.

It is only type-checked, never run: names and types are what matter here.
"""

from __future__ import annotations

import asyncio

from protoframe.clients.pulsar import (
    AuthenticationToken,
    CompressionType,
    Consumer,
    ConsumerType,
    Message,
    MessageId,
    Producer,
    ProducerQueueIsFull,
    PulsarClient,
    SendFuture,
    Timeout,
    TopicNotFound,
)
from protoframe.clients.pulsar.sync import Client


async def produce(client: PulsarClient, topic: str) -> list[MessageId]:
    producer: Producer = await client.create_producer(
        topic, compression_type="LZ4", batching_enabled=True, batching_max_messages=500,
        batching_max_publish_delay_ms=5, max_pending_messages=10_000, block_if_queue_full=True,
        send_timeout_millis=10_000, producer_name="typed-app")
    first: MessageId = await producer.send(b"data", properties={"k": "v"}, partition_key="key",
                                           event_timestamp=1_700_000_000_000)
    futures: list[SendFuture] = []
    for i in range(100):
        try:
            futures.append(producer.send_async(f"{i}".encode()))
        except ProducerQueueIsFull:
            break
    await producer.flush()
    ids = [first] + [f.result() for f in futures if f.done() and f.exception() is None]
    later: MessageId = await producer.send_async(b"awaited")
    ids.append(later)
    other = await client.create_producer(topic, compression_type=CompressionType.ZSTD,
                                         batching_enabled=False)
    await other.close()
    await producer.close()
    return ids


async def consume(client: PulsarClient, topic: str) -> int:
    consumer: Consumer = await client.subscribe(
        topic, "sub", subscription_type="Shared", initial_position="earliest",
        receiver_queue_size=1000, negative_ack_redelivery_delay_ms=1000, consumer_name="c")
    exclusive = await client.subscribe(topic, "other", consumer_type=ConsumerType.Failover)
    await exclusive.close()
    count = 0
    msg: Message = await consumer.receive()
    payload: bytes = msg.data()
    props: dict[str, str] = msg.properties()
    key: str = msg.partition_key()
    mid: MessageId = msg.message_id()
    stamps: tuple[int, int] = (msg.publish_timestamp(), msg.event_timestamp())
    where: str = msg.topic_name()
    again: int = msg.redelivery_count()
    del payload, props, key, stamps, where, again
    await consumer.acknowledge(msg)
    await consumer.acknowledge(mid)
    consumer.negative_acknowledge(msg)
    try:
        await consumer.receive(timeout_millis=100)
    except Timeout:
        pass
    async for received in consumer:
        await consumer.acknowledge(received)
        count += 1
        if count == 10:
            break
    await consumer.seek(MessageId.earliest)
    await consumer.seek(1_700_000_000_000)
    await consumer.unsubscribe()
    return count


async def main() -> None:
    async with PulsarClient("pulsar://127.0.0.1:6650", auth=AuthenticationToken("t"),
                            operation_timeout_seconds=10) as client:
        try:
            await produce(client, "typed")
        except TopicNotFound as exc:
            print(exc.code)
        print(await consume(client, "typed"))
        print(await client.get_topic_partitions("typed"))


def sync_main() -> None:
    with Client("pulsar+ssl://127.0.0.1:6651", tls_trust_certs_file_path="ca.pem") as client:
        producer = client.create_producer("typed")
        msg_id: MessageId = producer.send(b"x")
        producer.send_async(b"y", lambda error, mid: print(error, mid))
        producer.flush()
        consumer = client.subscribe("typed", "s", consumer_type="Shared")
        msg: Message = consumer.receive(timeout_millis=1000)
        consumer.acknowledge(msg)
        print(msg_id, msg.data())


if __name__ == "__main__":
    asyncio.run(main())
    sync_main()
