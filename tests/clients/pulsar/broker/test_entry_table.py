"""The per-topic entry table (issue 18, "memory bounded by configuration, not by traffic"): a
persisted entry costs a few columns, not Python objects (about 210 bytes an entry before, which
put 1 GB of RSS on a backlog of 4 million entries), and reads back as it was stored."""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
from pathlib import Path

import pytest

from protoframe.clients.pulsar.broker.entries import Entry, EntryTable, key_hash
from protoframe.clients.pulsar.broker.payload_cache import PayloadCache
from protoframe.clients.pulsar.broker.state import BrokerState
from protoframe.clients.pulsar.broker.storage import FileStorage
from protoframe.clients.pulsar.broker.topics import Topic
from protoframe.generated.pulsar.pulsar_api import CommandSend, MessageMetadata

TOPIC = "persistent://public/default/table"


class _Log:
    """A payload source over a bytes object (offsets are indexes into it)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def read_payload(self, offset: int, size: int) -> bytes:
        return self.data[offset:offset + size]

    def read_key(self, offset: int, size: int) -> bytes:
        return self.data[offset:offset + size]


@pytest.mark.slow  # measures memory over many entries
def test_a_stored_entry_costs_at_most_40_bytes() -> None:
    source = _Log(b"")
    table = EntryTable()
    count = 100_000
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for index in range(count):
            table.append_stored(source, 1_000_000_000 + index * 1100, 1024, 10, True,
                                1_700_000_000_000 + index, b"")
        used = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(table) == count
    assert used / count <= 40, f"{used / count:.1f} bytes per entry"


def test_entries_read_back_as_stored_held_or_holes() -> None:
    log = _Log(b"....KEYpayload-one|k2payload-2")
    topic = Topic(name=TOPIC, ledger_id=1)
    topic.add_stored(3, log, 7, 11, 1, False, 100, b"KEY")  # ids 0..2 were never stored
    assert topic.first_id == 3
    held = Entry(6, b"payload-2", 4, True, 50, b"k2")
    topic.add(held, holes=True)  # 4 and 5: holes
    assert [e is None for e in topic.entries] == [False, True, True, False]
    assert topic.entries.hole_ids() == [4, 5]
    stored = topic.entry(3)
    assert stored is not None and (stored.payload, stored.key) == (b"payload-one", b"KEY")
    assert stored.source is log and stored.key_hash == key_hash(b"KEY")
    view = topic.entry(6)
    assert view is not None and view == held and view.source is None
    assert (view.num_messages, view.is_batch, view.publish_time) == (4, True, 50)
    assert topic.find_by_publish_time(60) == 3 and topic.find_by_publish_time(50) == 3
    assert topic.find_by_publish_time(101) == 7
    topic.stored(6, log, 21)  # written: read back from the log from now on
    view = topic.entry(6)
    assert view is not None and view.source is log and view.offset == 21
    assert view == held and view.key_hash == key_hash(b"k2")
    topic.forget(3)
    assert topic.entry(3) is None and topic.size == held.size
    topic.entries[0] = Entry(3, b"again", 1, False, 7, b"")
    again = topic.entry(3)
    assert again is not None and again.payload == b"again"
    del topic.entries[:2]
    topic.first_id += 2
    assert topic.first_id == 5 and [e is None for e in topic.entries] == [True, False]
    assert topic.entries[-1] == topic.entry(6)


def _publish(state: BrokerState, topic: Topic, keys: list[bytes]) -> asyncio.Future[list[int]]:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[list[int]] = loop.create_future()
    ids: list[int] = []

    def receipt(entry_id: int, error: Exception | None) -> None:
        assert error is None
        ids.append(entry_id)
        if len(ids) == len(keys) and not done.done():
            done.set_result(ids)

    for seq, key in enumerate(keys):
        metadata = MessageMetadata(producer_name="p", sequence_id=seq, publish_time=1000 + seq)
        if key:
            metadata.ordering_key = key
        state.publish(topic, "p", CommandSend(producer_id=1, sequence_id=seq), metadata,
                      b"payload-%d" % seq, receipt)
    return done


def test_keys_survive_compactions_that_read_them_from_the_log(tmp_path: Path) -> None:
    keys = [b"alpha", b"", b"k" * 70_000, b"omega"]

    async def write() -> None:
        storage = FileStorage(tmp_path, fsync=False)
        state = BrokerState(storage)
        state.recover()
        await _publish(state, state.topic(TOPIC), keys)
        await storage.close()

    async def restart() -> list[tuple[bytes, int, bytes, int]]:
        storage = FileStorage(tmp_path, fsync=False)
        state = BrokerState(storage)
        state.recover()  # compaction: keys and payloads are copied from the old log
        entries = [e for e in state.topics[TOPIC].entries if e is not None]
        assert all(e.source is storage for e in entries)
        got = [(e.key, e.key_hash, e.payload, e.publish_time) for e in entries]
        await storage.close()
        return got

    asyncio.run(write())
    expected = [(key, key_hash(key), b"payload-%d" % seq, 1000 + seq)
                for seq, key in enumerate(keys)]
    assert asyncio.run(restart()) == expected
    assert asyncio.run(restart()) == expected


@pytest.mark.slow  # measures memory over many items
def test_the_payload_cache_counts_what_its_items_cost() -> None:
    capacity = 4 * 1024 * 1024
    cache = PayloadCache(capacity)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for index in range(100_000):  # far more small payloads than fit
            cache.put(1_000_000_000 + index * 200, index.to_bytes(8, "little") * 16)
        used = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert 0 < cache.size <= capacity
    assert used <= capacity * 1.1, f"{used} bytes for a cache of {capacity}"
    assert cache.get(1_000_000_000 + 99_999 * 200) is not None  # the newest are kept
    assert cache.get(1_000_000_000) is None
