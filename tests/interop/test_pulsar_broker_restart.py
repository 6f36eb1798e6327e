"""A broker killed with SIGKILL and restarted on its --data-dir loses nothing it acknowledged:
the official client's messages, its subscription cursors and its producer's sequence."""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path
from typing import Any

import pulsar

from protoframe.clients.pulsar.broker import BrokerProcess

RECEIVE_MS = 5000
TOPIC = "persistent://durable/ns/orders"


def official_client(url: str) -> Any:
    quiet = logging.getLogger("pulsar.official")
    quiet.setLevel(logging.ERROR)
    return pulsar.Client(url, logger=quiet, operation_timeout_seconds=10)


def drain(consumer: Any, idle_ms: int = 500) -> list[Any]:
    out: list[Any] = []
    while True:
        try:
            out.append(consumer.receive(timeout_millis=idle_ms))
        except pulsar.Timeout:
            return out


def test_acknowledged_messages_and_cursors_survive_a_crash(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    broker = BrokerProcess(data_dir=data_dir, partitioned={"parts": 3},
                           extra_args=("--log-level", "WARNING"), stderr=subprocess.DEVNULL)
    client = official_client(broker.start())
    try:
        # Batch index acks, so that acknowledging part of a batch is sent (and persisted).
        consumer = client.subscribe(TOPIC, "sub", consumer_type=pulsar.ConsumerType.Shared,
                                    batch_index_ack_enabled=True)
        batched = client.create_producer(TOPIC, producer_name="batched", batching_enabled=True,
                                         batching_max_publish_delay_ms=5,
                                         compression_type=pulsar.CompressionType.LZ4)
        for i in range(100):
            batched.send_async(f"b{i}".encode(), None, properties={"i": str(i)})
        batched.flush()  # returns once every message has its receipt
        single = client.create_producer(TOPIC, producer_name="single")
        for i in range(20):
            single.send(f"s{i}".encode(), partition_key=f"k{i}")
        assert single.last_sequence_id() == 19
        parts = client.create_producer("parts")
        for i in range(9):
            parts.send(f"p{i}".encode())

        received = [consumer.receive(timeout_millis=RECEIVE_MS) for _ in range(120)]
        expected = [f"b{i}".encode() for i in range(100)] + [f"s{i}".encode() for i in range(20)]
        assert [m.data() for m in received] == expected
        # Acknowledge b0..b29 and b40..b49; everything else stays unacknowledged.
        for message in received[:30] + received[40:50]:
            consumer.acknowledge(message)
        consumer.close()  # flushes the grouped acks; the broker answers once they are on disk
    finally:
        client.close()
        broker.kill()  # SIGKILL: no shutdown, no final flush

    broker = BrokerProcess(data_dir=data_dir, extra_args=("--log-level", "WARNING"),
                           stderr=subprocess.DEVNULL)
    client = official_client(broker.start())
    try:
        consumer = client.subscribe(TOPIC, "sub", consumer_type=pulsar.ConsumerType.Shared,
                                    batch_index_ack_enabled=True)
        left = drain(consumer)
        assert [m.data() for m in left] == (
            [f"b{i}".encode() for i in range(30, 40)] + [f"b{i}".encode() for i in range(50, 100)]
            + [f"s{i}".encode() for i in range(20)])
        assert left[0].properties() == {"i": "30"}
        assert left[-1].partition_key() == "k19"
        # The producer's sequence goes on where it stopped, and new ids follow the old ones.
        single = client.create_producer(TOPIC, producer_name="single")
        assert single.last_sequence_id() == 19
        new_id = single.send(b"after the crash")
        assert new_id.entry_id() > left[-1].message_id().entry_id()
        assert consumer.receive(timeout_millis=RECEIVE_MS).data() == b"after the crash"
        # The partitioned topic's metadata came back too.
        assert len(client.get_topic_partitions("parts")) == 3
        reader = client.subscribe("parts", "late", initial_position=pulsar.InitialPosition.Earliest)
        assert sorted(m.data() for m in drain(reader)) == [f"p{i}".encode() for i in range(9)]
        reader.close()
        consumer.close()
    finally:
        client.close()
        assert broker.stop() == 0  # SIGTERM: a clean shutdown
