"""A writer from ``SegmentWriter.connect`` survives a lost connection, with every event stored
exactly once and in order. All of it runs against the embedded segment store over TCP on
127.0.0.1, with a time limit on every scenario.

What is shown:

* connections cut in the middle of a stream of writes: the client's side aborted, the store's
  side aborted, or the fault proxy cutting them at random byte counts and times;
* the store restarted on its directory while writes are in flight (it keeps each writer's
  last event number with the data, and cuts back an append whose metadata a crash lost);
* appends stored but never acknowledged resolve from APPEND_SETUP without being sent again
  (conditional appends too, and one lost before it reached the store is sent again);
* a segment sealed or deleted while the writer is away fails its pending events at once;
* a store down longer than the retry budget, or one that drops every connection before any
  append lands, fails them with ``StoreUnreachable`` in bounded time;
* the store keeps only the new events of an append that overlaps events it holds (a writer's
  old connection still being read after the writer reconnected).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from protoframe.clients.pravega import (
    ConditionalCheckFailed,
    ConnectionOptions,
    EmbeddedSegmentStore,
    NoSuchSegment,
    PravegaConnection,
    RetryPolicy,
    SegmentIsSealed,
    SegmentReader,
    SegmentWriter,
    StoreUnreachable,
)
from protoframe.clients.pravega.events import frame_events
from protoframe.clients.pravega.store import SegmentTable
from protoframe.generated.pravega import frames
from protoframe.runtime.errors import ConnectionClosed
from tests.clients.faultproxy import FaultProxy

SEGMENT = "scope/stream/0.#epoch.0"
EVENTS = 2000
CHUNK = 20  # events written per turn of the event loop
FAST = RetryPolicy(initial_delay=0.01, max_delay=0.1, timeout=10.0)
OPTIONS = ConnectionOptions(request_timeout=5.0, connect_timeout=2.0)
WRITER = UUID("00112233-4455-6677-8899-aabbccddeeff")


def run(scenario: Callable[[], Coroutine[Any, Any, None]], timeout: float = 30.0) -> None:
    async def bounded() -> None:
        await asyncio.wait_for(scenario(), timeout)

    asyncio.run(bounded())


def payload(i: int) -> bytes:
    return f"event {i:05d};".encode() * (1 + i % 4)


async def start_store(directory: Path | None = None, port: int = 0) -> EmbeddedSegmentStore:
    store = EmbeddedSegmentStore(port=port, directory=directory)
    await store.start()
    return store


async def create_segment(store: EmbeddedSegmentStore) -> None:
    async with await PravegaConnection.connect(*store.address, request_timeout=5.0) as admin:
        await admin.requests.create_segment(SEGMENT, 0, 0, "")


async def read_back(store: EmbeddedSegmentStore) -> list[bytes]:
    async with await PravegaConnection.connect(*store.address, request_timeout=5.0) as reader:
        return [e.data for e in await SegmentReader(reader, SEGMENT).read_all()]


async def write_stream(writer: SegmentWriter, count: int,
                       cuts: dict[int, Callable[[], Awaitable[None]]],
                       pause: float = 0.002) -> list[asyncio.Future[int]]:
    """Write events 0..count-1, CHUNK per turn; after chunk k, run ``cuts[k]``."""
    futures: list[asyncio.Future[int]] = []
    for chunk, start in enumerate(range(0, count, CHUNK)):
        futures += [writer.write(payload(i)) for i in range(start, min(start + CHUNK, count))]
        if chunk in cuts:
            await cuts[chunk]()
        await asyncio.sleep(pause)
    return futures


def assert_exactly_once(futures: list[asyncio.Future[int]], stored: list[bytes],
                        count: int) -> None:
    assert [f.result() for f in futures] == list(range(1, count + 1))
    assert len(stored) == count, f"{len(stored)} events stored for {count} written"
    assert stored == [payload(i) for i in range(count)]


async def until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    for _ in range(int(timeout / 0.005)):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("condition not met in time")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


# -- 1. connections cut in the middle of a stream of writes ------------------------------------


@pytest.mark.parametrize("side", ["client", "store"])
def test_cut_connections_lose_and_duplicate_nothing(side: str) -> None:
    async def scenario() -> None:
        store = await start_store()
        await create_segment(store)
        writer = await SegmentWriter.connect(*store.address, SEGMENT, retry=FAST,
                                             options=OPTIONS)
        held_unacknowledged: list[int] = []

        async def cut() -> None:
            assert writer.pending  # at least this chunk's events, not sent yet
            if side == "client":
                writer.connection.connection.abort()
            else:  # the store drops its session, and with it any DATA_APPENDED not yet sent
                for connection in list(store.connections):
                    connection.abort()

        async def cut_after_store() -> None:
            # Let the chunk's append reach the store, then cut before its DATA_APPENDED
            # reaches the writer (the store sends it at the end of its turn).
            appends = store.received["APPEND_BLOCK_END"]
            for _ in range(1000):
                if store.received["APPEND_BLOCK_END"] > appends:
                    break
                await asyncio.sleep(0)
            held = store.table.segments[SEGMENT].writers[writer.writer_id]
            held_unacknowledged.append(held - writer.acked_event_number)
            await cut()

        futures = await write_stream(writer, EVENTS, {20: cut, 50: cut_after_store, 80: cut})
        await writer.flush()
        assert writer.reconnects == 3
        assert held_unacknowledged[0] > 0  # stored, acknowledgement lost with the connection
        assert_exactly_once(futures, await read_back(store), EVENTS)
        assert store.table.segments[SEGMENT].writers[writer.writer_id] == EVENTS
        await writer.close()
        assert not writer.connection.is_open  # close() closes the writer's own connection
        await store.stop()

    run(scenario)


@pytest.mark.parametrize("block_size", [None, 256])
def test_fault_proxy_cuts_lose_and_duplicate_nothing(block_size: int | None) -> None:
    async def scenario() -> None:
        store = await start_store()
        await create_segment(store)
        # Every connection is doomed until four have been cut: some mid-frame, some by RST
        # (bytes in flight are lost), some by FIN, some before SETUP_APPEND is answered.
        proxy = FaultProxy(*store.address, seed=11, max_cuts=4, lifetime=(0.05, 0.3),
                           to_server_bytes=(200, 40_000))
        await proxy.start()
        writer = await SegmentWriter.connect("127.0.0.1", proxy.port, SEGMENT, retry=FAST,
                                             options=OPTIONS, block_size=block_size)
        futures = await write_stream(writer, EVENTS, {}, pause=0.01)
        await writer.flush()
        assert proxy.cuts >= 1 and writer.reconnects >= 1, proxy.log
        assert_exactly_once(futures, await read_back(store), EVENTS)
        await writer.close()
        await proxy.stop()
        await store.stop()

    run(scenario)


# -- 2. the store restarts on its directory ----------------------------------------------------


def test_store_restart_while_writes_are_in_flight(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = await start_store(tmp_path)
        port = store.port
        await create_segment(store)
        writer = await SegmentWriter.connect(*store.address, SEGMENT, retry=FAST,
                                             options=OPTIONS)
        acked_before_stop: list[int] = []

        async def stop() -> None:
            assert writer.pending
            acked_before_stop.append(writer.acked_event_number)
            await store.stop()

        async def restart() -> None:
            nonlocal store
            store = EmbeddedSegmentStore(port=port, directory=tmp_path)
            # Before the writer is back, the new store knows the writer's last event number
            # from the directory: at least every event acknowledged before the stop.
            remembered = store.table.segments[SEGMENT].writers[writer.writer_id]
            assert remembered >= acked_before_stop[0] > 0
            await store.start()

        # Down for chunks 40..59: the writes of those chunks queue up meanwhile.
        futures = await write_stream(writer, EVENTS, {40: stop, 60: restart})
        await writer.flush()
        assert writer.reconnects >= 1
        assert_exactly_once(futures, await read_back(store), EVENTS)
        await writer.close()
        await store.stop()

    run(scenario)


def test_store_keeps_writer_event_numbers_with_its_data(tmp_path: Path) -> None:
    table = SegmentTable(tmp_path)
    segment = table.create(SEGMENT)
    assert segment is not None
    table.append(segment, frame_events([b"a", b"b"]), WRITER, 2)
    table.append(segment, frame_events([b"c"]), WRITER, 3)

    again = SegmentTable(tmp_path).get(SEGMENT)
    assert again is not None
    assert again.writers == {WRITER: 3}
    assert bytes(again.data) == frame_events([b"a", b"b", b"c"])

    # A crash after an append reached the data file but before its metadata did: nobody was
    # told it was stored, so its writer sends it again; keeping it would store it twice.
    (data_file,) = tmp_path.glob("*.data")
    with data_file.open("ab") as out:
        out.write(frame_events([b"d"]))
    reloaded = SegmentTable(tmp_path).get(SEGMENT)
    assert reloaded is not None
    assert reloaded.writers == {WRITER: 3}
    assert bytes(reloaded.data) == frame_events([b"a", b"b", b"c"])
    assert data_file.stat().st_size == reloaded.length


# -- 3. stored, but the acknowledgement was lost -----------------------------------------------


def drop_acknowledgements(writer: SegmentWriter) -> None:
    """From now on, DATA_APPENDED never reaches the writer over its current connection."""
    inner = writer.connection.connection
    deliver = inner.on_frame

    def without_acks(frame: frames.Frame) -> None:
        if not isinstance(frame.body, frames.DataAppended):
            deliver(frame)

    inner.on_frame = without_acks


def test_stored_but_unacknowledged_events_are_not_sent_again() -> None:
    async def scenario() -> None:
        store = await start_store()
        await create_segment(store)
        writer = await SegmentWriter.connect(*store.address, SEGMENT, retry=FAST,
                                             options=OPTIONS)
        first = await asyncio.gather(*(writer.write(payload(i)) for i in range(100)))
        assert first == list(range(1, 101))

        drop_acknowledgements(writer)
        futures: list[asyncio.Future[int]] = []
        for start in range(100, 400, CHUNK):  # several appends
            futures += [writer.write(payload(i)) for i in range(start, start + CHUNK)]
            await asyncio.sleep(0)
        await until(lambda: store.table.segments[SEGMENT].writers[writer.writer_id] == 400)
        assert not any(f.done() for f in futures)  # all stored, none acknowledged
        appends = store.received["APPEND_BLOCK_END"]
        writer.connection.connection.abort()

        numbers = await asyncio.wait_for(asyncio.gather(*futures), 5)
        assert numbers == list(range(101, 401))
        assert store.received["APPEND_BLOCK_END"] == appends  # nothing was sent again
        assert store.received["SETUP_APPEND"] == 2
        assert await writer.write(b"after") == 401
        stored = await read_back(store)
        assert stored == [payload(i) for i in range(400)] + [b"after"]
        await writer.close()
        await store.stop()

    run(scenario)


def test_conditional_write_across_reconnects() -> None:
    async def scenario() -> None:
        store = await start_store()
        await create_segment(store)
        writer = await SegmentWriter.connect(*store.address, SEGMENT, retry=FAST,
                                             options=OPTIONS)
        assert await writer.conditional_write(b"first", 0) == 1

        # Stored, its DATA_APPENDED lost: APPEND_SETUP's last event number answers it.
        drop_acknowledgements(writer)
        second = asyncio.create_task(writer.conditional_write(b"second", 13))
        await until(lambda: store.table.segments[SEGMENT].writers[writer.writer_id] == 2)
        writer.connection.connection.abort()
        assert await second == 2

        # Lost before it reached the store (aborted before the end of the turn that wrote
        # it): sent again with the same event number and expected offset.
        third = asyncio.create_task(writer.conditional_write(b"third", 27))
        await asyncio.sleep(0)
        writer.connection.connection.abort()
        assert await third == 3

        assert writer.reconnects == 2
        assert store.received["CONDITIONAL_APPEND"] == 3  # first, second, third's resend
        with pytest.raises(ConditionalCheckFailed):
            await writer.conditional_write(b"stale", 0)
        assert await writer.write(b"plain") == 5
        assert await read_back(store) == [b"first", b"second", b"third", b"plain"]
        await writer.close()
        await store.stop()

    run(scenario)


# -- 4. failures about the segment end the retrying --------------------------------------------


@pytest.mark.parametrize("change", ["seal", "delete"])
def test_segment_sealed_or_deleted_while_disconnected_fails_at_once(change: str) -> None:
    expected = SegmentIsSealed if change == "seal" else NoSuchSegment

    async def scenario() -> None:
        store = await start_store()
        await create_segment(store)
        writer = await SegmentWriter.connect(*store.address, SEGMENT, retry=FAST,
                                             options=OPTIONS)
        assert await asyncio.gather(*(writer.write(payload(i)) for i in range(10))) \
            == list(range(1, 11))
        futures = [writer.write(payload(i)) for i in range(10, 60)]
        writer.connection.connection.abort()
        # The controller changes the segment while the writer is away.
        segment = store.table.get(SEGMENT)
        assert segment is not None
        if change == "seal":
            store.table.seal(segment)
        else:
            store.table.delete(SEGMENT)

        outcomes = await asyncio.wait_for(
            asyncio.gather(*futures, return_exceptions=True), 5)
        assert all(isinstance(o, expected) for o in outcomes), outcomes
        with pytest.raises(expected):
            await writer.write(b"later")
        await asyncio.sleep(0.3)  # it does not keep trying
        assert store.received["SETUP_APPEND"] == 2
        assert writer.reconnects == 0
        await writer.close()
        await store.stop()

    run(scenario)


# -- 5. the retry budget runs out --------------------------------------------------------------


@pytest.mark.parametrize("policy", [
    RetryPolicy(initial_delay=0.02, max_delay=0.1, timeout=0.5),
    RetryPolicy(initial_delay=0.02, max_delay=0.1, max_attempts=4, timeout=None),
], ids=["timeout", "attempts"])
def test_store_down_past_the_retry_budget(policy: RetryPolicy) -> None:
    async def scenario() -> None:
        store = await start_store()
        await create_segment(store)
        writer = await SegmentWriter.connect(*store.address, SEGMENT, retry=policy,
                                             options=OPTIONS)
        assert await asyncio.gather(*(writer.write(payload(i)) for i in range(10))) \
            == list(range(1, 11))
        futures = [writer.write(payload(i)) for i in range(10, 60)]
        loop = asyncio.get_running_loop()
        started = loop.time()
        await store.stop()

        outcomes = await asyncio.wait_for(
            asyncio.gather(*futures, return_exceptions=True), 5)
        assert loop.time() - started < 3.0
        error = outcomes[0]
        assert isinstance(error, StoreUnreachable), error
        assert all(o is error for o in outcomes)
        assert isinstance(error.lost, ConnectionClosed)  # why the connection ended
        if policy.max_attempts is not None:
            assert isinstance(error.__cause__, ConnectionClosed)  # the last attempt: refused
            assert error.attempts == policy.max_attempts
        else:
            # The last attempt is refused, or, on a loaded machine, cut short by the end of
            # the budget, which bounds every attempt.
            assert isinstance(error.__cause__, ConnectionClosed | TimeoutError), error.__cause__
            # Giving up happens at the end of the budget: an attempt it cuts short ends there,
            # give or take the event loop's scheduling (0.5004 s seen under CI load).
            assert policy.timeout is not None
            assert error.attempts >= 2 and error.elapsed < policy.timeout + 0.1
        with pytest.raises(StoreUnreachable):
            await writer.write(b"later")
        await writer.close()

    run(scenario)


def test_a_store_that_drops_every_connection_is_given_up_on() -> None:
    """Each connection gets through SETUP_APPEND and is cut at the first append: connections
    are made, but none acknowledges anything, so the outage goes on and the budget runs
    out instead of the writer reconnecting forever."""

    async def scenario() -> None:
        store = await start_store()
        await create_segment(store)
        # HELLO (16 bytes) and SETUP_APPEND (59) fit in 100 bytes; no append does.
        proxy = FaultProxy(*store.address, seed=3, max_cuts=1000, lifetime=(30.0, 30.0),
                           to_server_bytes=(100, 100))
        await proxy.start()
        policy = RetryPolicy(initial_delay=0.02, max_delay=0.1, timeout=0.6)
        writer = await SegmentWriter.connect("127.0.0.1", proxy.port, SEGMENT, retry=policy,
                                             options=OPTIONS)
        future = writer.write(b"x" * 100)
        with pytest.raises(StoreUnreachable) as info:
            await asyncio.wait_for(future, 5)
        # Set up again and again, each attempt counted against one budget: no progress.
        assert writer.reconnects >= 2
        # Every attempt sets up, except perhaps the last, which the end of the budget may cut
        # short (seen on a loaded machine: 8 attempts, 7 set up).
        assert writer.reconnects <= info.value.attempts <= writer.reconnects + 1
        assert store.table.segments[SEGMENT].length == 0
        await writer.close()
        await proxy.stop()
        await store.stop()

    run(scenario)


def test_first_connection_is_retried_within_the_budget_too() -> None:
    async def scenario() -> None:
        policy = RetryPolicy(initial_delay=0.01, max_delay=0.05, max_attempts=3, timeout=None)
        with pytest.raises(StoreUnreachable) as info:
            await SegmentWriter.connect("127.0.0.1", free_port(), SEGMENT, retry=policy,
                                        options=OPTIONS)
        assert info.value.attempts == 3 and info.value.lost is None

        store = await start_store()  # no such segment: refused at once, not retried
        with pytest.raises(NoSuchSegment):
            await SegmentWriter.connect(*store.address, SEGMENT, retry=FAST, options=OPTIONS)
        assert store.received["SETUP_APPEND"] == 1
        await store.stop()

    run(scenario)


def test_retry_policy_needs_a_bound() -> None:
    with pytest.raises(ValueError):
        RetryPolicy(max_attempts=None, timeout=None)
    with pytest.raises(ValueError):
        RetryPolicy(initial_delay=0)


# -- the store's side: an old connection's append that overlaps held events --------------------


def test_store_keeps_only_the_new_events_of_an_overlapping_append() -> None:
    async def scenario() -> None:
        store = await start_store()
        await create_segment(store)
        old = await PravegaConnection.connect(*store.address, request_timeout=5.0)
        new = await PravegaConnection.connect(*store.address, request_timeout=5.0)
        acks: asyncio.Queue[frames.DataAppended] = asyncio.Queue()

        def on_frame(frame: frames.Frame) -> None:
            if isinstance(frame.body, frames.DataAppended):
                acks.put_nowait(frame.body)

        for connection in (old, new):
            connection.add_listener(on_frame)
            await connection.requests.setup_append(WRITER, SEGMENT, "")

        async def append(connection: PravegaConnection, events: list[bytes], last: int
                         ) -> None:
            data = frame_events(events)
            await connection.send(frames.Frame(body=frames.AppendBlockEnd(
                writer_id=WRITER, size_of_whole_events=len(data), data=data,
                num_events=len(events), last_event_number=last, request_id=1)))
            acked = await asyncio.wait_for(acks.get(), 5)
            assert acked.event_number == last

        # The writer reconnected and stored events 1..3 over the new connection; then the
        # old connection's append of events 1..5 is read. Only 4 and 5 are new.
        await append(new, [b"1", b"2", b"3"], 3)
        await append(old, [b"1", b"2", b"3", b"4", b"5"], 5)
        await append(new, [b"4", b"5"], 5)  # held entirely: acknowledged, not stored
        assert await read_back(store) == [b"1", b"2", b"3", b"4", b"5"]
        await old.close()
        await new.close()
        await store.stop()

    run(scenario)
