"""What our consumer writes to the broker while it reads, on both brokers: FLOW permits by
halves of the receiver queue and grouped ACKs (bench/bench_real_pulsar.py's consume row: the
official client sends the same)."""

from __future__ import annotations

import asyncio
import time

import pytest

from protoframe.clients.pulsar import PulsarClient
from protoframe.clients.pulsar.connection import ClientConnection
from protoframe.generated.pulsar import pulsar_api as pb
from tests.clients.pulsar.scenarios import Broker, Target
from tests.clients.pulsar.test_client import nothing_more, receive_n

COUNT = 300
QUEUE = 40
GROUP_MS = 100


def test_a_consumer_grants_permits_by_halves_and_groups_its_acks(
        monkeypatch: pytest.MonkeyPatch, target: Target) -> None:
    flows: list[int] = []
    acks: list[pb.CommandAck] = []
    original = ClientConnection.write_command

    def spy(self: ClientConnection, command: pb.BaseCommand) -> None:
        if command.flow is not None:
            flows.append(command.flow.messagePermits)
        if command.ack is not None:
            acks.append(command.ack)
        original(self, command)

    monkeypatch.setattr(ClientConnection, "write_command", spy)

    async def scenario(url: str, broker: Broker) -> None:
        async with PulsarClient(url) as client:
            # One entry per message: acknowledging each on its own would be COUNT ACK frames.
            producer = await client.create_producer("wire", batching_enabled=False)
            for i in range(COUNT):
                producer.send_async(str(i).encode())
            await producer.flush()
            consumer = await client.subscribe("wire", "s", receiver_queue_size=QUEUE,
                                              ack_group_time_ms=GROUP_MS,
                                              initial_position="earliest")
            started = time.monotonic()
            got = await receive_n(consumer, COUNT, timeout=30)
            await consumer.close()
            elapsed = time.monotonic() - started
            assert [m.data() for m in got] == [str(i).encode() for i in range(COUNT)]

            assert flows[0] == QUEUE
            assert set(flows[1:]) == {QUEUE // 2}
            # Every message taken was given back as a permit, half a queue at a time.
            assert sum(flows[1:]) == COUNT - COUNT % (QUEUE // 2)

            assert {a.ack_type for a in acks} == {pb.CommandAck.AckType.Individual}
            acked = [(i.ledgerId, i.entryId) for a in acks for i in a.message_id]
            assert sorted(acked) == sorted((m.message_id().ledger_id(),
                                            m.message_id().entry_id()) for m in got)
            # One ACK frame per group time at most, and the one close flushes.
            assert len(acks) <= elapsed / (GROUP_MS / 1000) + 2, (len(acks), elapsed)

            # close() sent them: nothing comes back to the subscription.
            again = await client.subscribe("wire", "s")
            assert await nothing_more(again, 500)
            await again.close()

    target.run(scenario)


def test_a_consumer_acknowledges_at_once_when_grouping_is_off(
        monkeypatch: pytest.MonkeyPatch) -> None:
    acks: list[pb.CommandAck] = []
    original = ClientConnection.write_command

    def spy(self: ClientConnection, command: pb.BaseCommand) -> None:
        if command.ack is not None:
            acks.append(command.ack)
        original(self, command)

    monkeypatch.setattr(ClientConnection, "write_command", spy)

    async def scenario(url: str, broker: Broker) -> None:
        async with PulsarClient(url) as client:
            producer = await client.create_producer("wire-now", batching_enabled=False)
            consumer = await client.subscribe("wire-now", "s", ack_group_time_ms=0,
                                              initial_position="earliest")
            for i in range(3):
                await producer.send(str(i).encode())
            for msg in await receive_n(consumer, 3, ack=False):
                before = len(acks)
                await consumer.acknowledge(msg)
                assert len(acks) == before + 1
            await asyncio.sleep(0)

    Target("embedded").run(scenario)
