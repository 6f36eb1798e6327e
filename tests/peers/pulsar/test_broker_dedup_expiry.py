"""Deduplication state of producer names nobody uses any more expires, as Pulsar's does
(``brokerDeduplicationProducerInactivityTimeoutMinutes``).

Regression test for issue 18, failure 8 (last part): 20,000 short-lived producers left 20,001
deduplication records, kept forever.
"""

from __future__ import annotations

from pathlib import Path

from protoframe.clients.pulsar.broker import EmbeddedBroker
from protoframe.clients.pulsar.broker.dedup import DedupState
from protoframe.clients.pulsar.broker.limits import Limits
from protoframe.generated.pulsar.pulsar_api import BaseCommand, CommandCloseProducer
from tests.support.pulsar_raw import RawClient, run

Type = BaseCommand.Type
TOPIC = "persistent://public/default/dedup"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_inactive_names_expire_and_connected_ones_do_not() -> None:
    clock = Clock()
    dedup = DedupState(inactivity_timeout=60.0, clock=clock)
    for name in ("a", "b", "c"):
        dedup.producer_connected(name)
        dedup.record(name, 0, 0, 0)
    dedup.producer_disconnected("a")
    clock.now += 30
    dedup.producer_disconnected("b")
    clock.now += 31  # a: inactive 61 s, b: 31 s, c: connected
    assert dedup.expire() == 1
    assert dedup.last_sequence_id("a") == -1
    assert dedup.last_sequence_id("b") == 0 and dedup.last_sequence_id("c") == 0
    # b comes back before its time is up: its clock stops.
    dedup.producer_connected("b")
    clock.now += 1000
    assert dedup.expire() == 0 and len(dedup) == 2
    # Two producers under one name: inactive only once both are gone.
    dedup.producer_connected("c")
    dedup.producer_disconnected("c")
    clock.now += 1000
    assert dedup.expire() == 0
    dedup.producer_disconnected("c")
    clock.now += 59
    assert dedup.expire() == 0
    clock.now += 1
    assert dedup.expire() == 1 and len(dedup) == 1


def test_names_known_only_from_the_log_are_inactive_from_the_start() -> None:
    clock = Clock()
    dedup = DedupState(inactivity_timeout=10.0, clock=clock)
    dedup.restore("old", 5, 5, 5, 3)
    dedup.record("older", 1, 1, 1)
    assert len(dedup) == 2
    clock.now += 10
    assert dedup.expire() == 2 and len(dedup) == 0


async def _short_lived_producers(client: RawClient, count: int, first_id: int) -> None:
    for i in range(count):
        producer_id = first_id + i
        await client.producer("dedup", producer_id=producer_id, request_id=producer_id,
                              name=f"short-{producer_id}")
        await client.publish(producer_id, 0, b"m", producer_name=f"short-{producer_id}")
        await client.receipt()
        await client.send(BaseCommand(type_=Type.CLOSE_PRODUCER, close_producer=(
            CommandCloseProducer(producer_id=producer_id, request_id=producer_id))))
        await client.expect(Type.SUCCESS)


@run
async def test_a_broker_forgets_short_lived_producers_after_the_timeout(tmp_path: Path) -> None:
    clock = Clock()
    broker = EmbeddedBroker(port=0, data_dir=tmp_path,
                            limits=Limits(dedup_inactivity_minutes=1.0))
    broker.state.clock = clock
    async with broker as url:
        client = await RawClient.connect(url)
        await client.producer("dedup", producer_id=1, request_id=1, name="long-lived")
        await client.publish(1, 0, b"m", producer_name="long-lived")
        await client.receipt()
        await _short_lived_producers(client, 50, first_id=100)
        dedup = broker.state.topics[TOPIC].dedup
        assert len(dedup) == 51
        clock.now += 61
        await _short_lived_producers(client, 1, first_id=200)
        # The 50 old names are gone; the connected producer and the newest one remain.
        assert len(dedup) == 2
        assert dedup.last_sequence_id("long-lived") == 0
        # A producer back under an expired name starts a new sequence.
        answer = (await client.producer("dedup", producer_id=300, request_id=300,
                                        name="short-100")).command.producer_success
        assert answer is not None and answer.last_sequence_id == -1
        await client.close()


@run
async def test_an_expired_name_stays_forgotten_after_a_restart(tmp_path: Path) -> None:
    clock = Clock()
    broker = EmbeddedBroker(port=0, data_dir=tmp_path,
                            limits=Limits(dedup_inactivity_minutes=1.0))
    broker.state.clock = clock
    async with broker as url:
        client = await RawClient.connect(url)
        await _short_lived_producers(client, 3, first_id=100)
        clock.now += 61
        # A producer coming and going makes the broker expire the three old names.
        await _short_lived_producers(client, 1, first_id=200)
        assert len(broker.state.topics[TOPIC].dedup) == 1
        await client.close()
    # The log still holds the old names' entries; its record of their expiry keeps them out.
    async with EmbeddedBroker(port=0, data_dir=tmp_path) as url:
        client = await RawClient.connect(url)
        for producer_id in (100, 101, 102):
            answer = (await client.producer("dedup", producer_id=producer_id,
                                            request_id=producer_id,
                                            name=f"short-{producer_id}")).command
            assert answer.producer_success is not None
            assert answer.producer_success.last_sequence_id == -1
        answer = (await client.producer("dedup", producer_id=200, request_id=200,
                                        name="short-200")).command
        assert answer.producer_success is not None
        assert answer.producer_success.last_sequence_id == 0
        await client.close()
