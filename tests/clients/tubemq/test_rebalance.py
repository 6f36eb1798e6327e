"""Consumer-group rebalancing: the embedded master moves partitions between the consumers of a
group with rebalance events in heartbeat answers, and the consumer follows them.

The network tests run the client against ``EmbeddedTubeMQ`` over TCP on 127.0.0.1, with short
heartbeat intervals and every wait bounded.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable

import pytest

from protoframe.clients.tubemq import Consumer, EmbeddedTubeMQ, Producer, ServerError, TubeMQError
from protoframe.clients.tubemq.consumer import Rebalance
from protoframe.clients.tubemq.errors import NOT_REGISTERED
from protoframe.clients.tubemq.rebalance import (
    EventType,
    SubscribeInfo,
    assign_partitions,
    node_share,
    parse_subscribe_info,
)
from protoframe.clients.tubemq.topics import BrokerInfo

TIMEOUT = 20.0  # a whole scenario
SETTLE = 5.0  # one rebalance
BEAT = 0.05  # consumers' heartbeat interval
ALL = frozenset(range(4))

Scenario = Callable[[EmbeddedTubeMQ], Awaitable[None]]


def run(scenario: Scenario, *, consumer_timeout: float = 30.0) -> None:
    async def main() -> None:
        async with EmbeddedTubeMQ(partitions=4, consumer_timeout=consumer_timeout) as peer:
            await asyncio.wait_for(scenario(peer), TIMEOUT)

    asyncio.run(main())


async def settled(consumers: list[Consumer], wanted: list[frozenset[int]] | None = None) -> None:
    """Wait until the consumers' partitions are disjoint and cover all four (or are exactly
    ``wanted``, in order)."""

    def done() -> bool:
        sets = [c.assignment for c in consumers]
        if wanted is not None:
            return sets == wanted
        return sum(len(s) for s in sets) == len(ALL) and frozenset().union(*sets) == ALL

    async with asyncio.timeout(SETTLE):
        while not done():
            await asyncio.sleep(0.01)


class Exclusive:
    """Samples the consumers' partitions while running: no partition is ever held twice."""

    def __init__(self, consumers: list[Consumer]) -> None:
        self.consumers = consumers
        self.samples = 0
        self.task = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        while True:
            held = [p for c in self.consumers for p in c.assignment]
            assert len(held) == len(set(held)), held
            self.samples += 1
            await asyncio.sleep(0.002)

    async def stop(self) -> None:
        self.task.cancel()
        # gather, not a suppressed await: a cancel of the scenario itself must not be lost.
        (outcome,) = await asyncio.gather(self.task, return_exceptions=True)
        assert isinstance(outcome, asyncio.CancelledError), outcome
        assert self.samples > 0


# ---- the assignment function and the subscribeInfo format ----------------------------------


def test_assign_partitions_deals_round_robin_over_sorted_ids() -> None:
    assert assign_partitions(range(4), ["b", "a"]) == {"a": {0, 2}, "b": {1, 3}}
    assert assign_partitions(range(5), ["c", "a", "b"]) == {"a": {0, 3}, "b": {1, 4}, "c": {2}}


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5, 7])
def test_assign_partitions_is_a_balanced_partition_of_the_set(count: int) -> None:
    consumers = [f"c{i}" for i in range(count)]
    result = assign_partitions(range(4), consumers)
    assert set(result) == set(consumers)
    dealt = [p for parts in result.values() for p in parts]
    assert sorted(dealt) == [0, 1, 2, 3]  # disjoint and covering
    sizes = [len(parts) for parts in result.values()]
    assert max(sizes) - min(sizes) <= 1


def test_assign_partitions_depends_only_on_the_sets() -> None:
    one = assign_partitions([3, 1, 2, 0, 1], ["x", "y", "x"])
    two = assign_partitions(range(4), ["y", "x"])
    assert one == two


def test_assign_partitions_without_consumers_or_partitions() -> None:
    assert assign_partitions(range(4), []) == {}
    assert assign_partitions([], ["a"]) == {"a": set()}


def test_subscribe_info_round_trip_and_the_proto_comment_form() -> None:
    info = SubscribeInfo("host-1-2-consumer", "my-group", BrokerInfo(1, "127.0.0.1", 8123),
                         "top-ic", 3)
    assert str(info) == "host-1-2-consumer@my-group#1:127.0.0.1:8123#top-ic:3"
    assert parse_subscribe_info(str(info)) == info
    # The .proto comment's form, with '-' between the parts.
    assert parse_subscribe_info("host-1-2-consumer@my-group-1:127.0.0.1:8123-top-ic:3") == info
    with pytest.raises(ValueError, match="not a consumerId"):
        parse_subscribe_info("c@g#1:h#t:0")


# ---- over TCP against the embedded master and broker ----------------------------------------


def test_two_consumers_split_the_partitions_and_one_takes_all_when_the_other_closes() -> None:
    async def scenario(peer: EmbeddedTubeMQ) -> None:
        events: list[tuple[str, Rebalance]] = []
        a = await Consumer.create(peer.master, "t", "g", client_id="a", heartbeat_interval=BEAT,
                                  on_rebalance=lambda r: events.append(("a", r)))
        assert a.assignment == ALL  # alone in the group: the first heartbeat gave it all
        watch = Exclusive([a])
        b = await Consumer.create(peer.master, "t", "g", client_id="b", heartbeat_interval=BEAT,
                                  on_rebalance=lambda r: events.append(("b", r)))
        watch.consumers.append(b)
        await settled([a, b], [frozenset({0, 2}), frozenset({1, 3})])
        assert {k: {p for _, p in v} for k, v in peer.assignment("g").items()} == \
            {"a": {0, 2}, "b": {1, 3}}
        # a released 1 and 3 (DISCONNECT) before b was offered them (CONNECT).
        moves = [(who, r.op, r.changed) for who, r in events if r.changed]
        assert moves == [("a", EventType.CONNECT, ALL),
                         ("a", EventType.DISCONNECT, frozenset({1, 3})),
                         ("b", EventType.CONNECT, frozenset({1, 3}))]
        ids = [r.rebalance_id for _, r in events if r.changed]
        assert ids == sorted(ids)
        assert all(r.ok for _, r in events)
        # The master heard the reports: it has nothing left to send.
        await asyncio.sleep(3 * BEAT)
        assert all(m.pending is None for m in peer.state.consumers.values())

        await a.close()
        assert await b.wait_for_assignment(lambda s: s == ALL, SETTLE) == ALL
        assert set(peer.state.consumers) == {"b"}
        await watch.stop()
        await b.close()
        assert peer.state.consumers == {}

    run(scenario)


def test_a_quiet_consumer_expires_and_its_partitions_move() -> None:
    async def scenario(peer: EmbeddedTubeMQ) -> None:
        producer = await Producer.create(peer.master, "t", heartbeat_interval=None)
        await producer.send(b"zero", partition=0)
        # "quiet" heartbeats only when told to, and is never told to again.
        quiet = await Consumer.create(peer.master, "t", "g", client_id="quiet",
                                      heartbeat_interval=None)
        assert quiet.assignment == ALL
        live = await Consumer.create(peer.master, "t", "g", client_id="live",
                                     heartbeat_interval=BEAT)
        assert live.assignment == frozenset()  # quiet never hears its DISCONNECT
        assert await live.wait_for_assignment(lambda s: s == ALL, SETTLE) == ALL
        assert set(peer.state.consumers) == {"live"}
        # The broker forgot quiet's registrations: its reads are refused.
        with pytest.raises(ServerError):
            await quiet.get_messages(0)
        assert [m.data for m in await live.get_messages(0)] == [b"zero"]
        await live.commit(0)
        # Its next heartbeat tells quiet it is out; it lets go of everything.
        with pytest.raises(ServerError) as info:
            await quiet.heartbeat()
        assert info.value.err_code == NOT_REGISTERED
        assert quiet.assignment == frozenset()
        for c in (quiet, live):
            await c.close()
        await producer.close()

    run(scenario, consumer_timeout=0.5)


async def _consume(consumer: Consumer, got: list[int], stop: asyncio.Event) -> None:
    """Fetch and commit until ``stop``; partitions come and go meanwhile."""
    while not stop.is_set():
        try:
            batch = await consumer.get_messages()
        except TubeMQError:  # no partition right now, or one being moved
            await asyncio.sleep(0.01)
            continue
        if not batch:
            await asyncio.sleep(0.005)
            continue
        await consumer.commit(batch[0].partition)
        got.extend(m.message_id for m in batch)


def test_every_message_is_consumed_once_across_rebalances() -> None:
    async def scenario(peer: EmbeddedTubeMQ) -> None:
        producer = await Producer.create(peer.master, "t", heartbeat_interval=None)
        sent: list[int] = []

        async def produce(rounds: int) -> None:
            for i in range(rounds):
                for p in ALL:
                    sent.append((await producer.send(b"m%d" % i, partition=p)).message_id)

        await produce(10)
        got: list[int] = []
        stop = asyncio.Event()
        a = await Consumer.create(peer.master, "t", "g", client_id="a", heartbeat_interval=BEAT)
        tasks = [asyncio.create_task(_consume(a, got, stop))]
        while len(got) < 10:
            await asyncio.sleep(0.005)
        b = await Consumer.create(peer.master, "t", "g", client_id="b", heartbeat_interval=BEAT)
        tasks.append(asyncio.create_task(_consume(b, got, stop)))
        await produce(10)
        await settled([a, b])
        await produce(10)
        # b leaves while messages keep coming (its loop then only meets errors); a takes its
        # partitions back.
        await asyncio.sleep(0.05)
        await b.close()
        await produce(10)
        assert await a.wait_for_assignment(lambda s: s == ALL, SETTLE) == ALL
        async with asyncio.timeout(SETTLE):
            while len(got) < len(sent):
                await asyncio.sleep(0.01)
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        twice = [m for m, n in Counter(got).items() if n > 1]
        assert twice == []
        assert sorted(got) == sorted(sent)
        assert len(sent) == 160
        await a.close()
        await producer.close()

    run(scenario)


def test_a_second_group_gets_every_partition_on_its_own() -> None:
    async def scenario(peer: EmbeddedTubeMQ) -> None:
        producer = await Producer.create(peer.master, "t", heartbeat_interval=None)
        for p in ALL:
            await producer.send(b"p%d" % p, partition=p)
        a = await Consumer.create(peer.master, "t", "g1", client_id="a", heartbeat_interval=BEAT)
        b = await Consumer.create(peer.master, "t", "g1", client_id="b", heartbeat_interval=BEAT)
        other = await Consumer.create(peer.master, "t", "g2", client_id="c",
                                      heartbeat_interval=BEAT)
        await settled([a, b])
        assert other.assignment == ALL
        await asyncio.sleep(3 * BEAT)  # g1's rebalance does not touch g2
        assert other.assignment == ALL
        got = []
        for p in sorted(other.assignment):
            got += [m.data for m in await other.get_messages(p)]
            await other.commit(p)
        assert sorted(got) == [b"p0", b"p1", b"p2", b"p3"]
        g1 = []
        for c in (a, b):
            for p in sorted(c.assignment):
                g1 += [m.data for m in await c.get_messages(p)]
                await c.commit(p)
        assert sorted(g1) == sorted(got)  # each group reads everything once
        for c in (a, b, other):
            await c.close()
        await producer.close()

    run(scenario)


def test_node_share_deals_layout_places_by_broker_then_partition() -> None:
    layout = ["2:10.0.0.2:8123-t:2", "1:10.0.0.1:8123-t:3", "1:10.0.0.1:8123-other:4", "junk"]
    shares = [node_share(layout, "t", 2, node) for node in (0, 1)]
    # Places (broker, partition): (1, 0) (1, 1) (1, 2) (2, 0) (2, 1); node 0 takes the even
    # places, node 1 the odd ones.
    assert {p: b.broker_id for p, b in shares[0][0].items()} == {0: 1, 2: 1, 1: 2}
    assert {p: b.broker_id for p, b in shares[1][0].items()} == {1: 1, 0: 2}
    assert shares[0][1] == shares[1][1] == ["junk"]
