"""Sealed table segments: SEAL_SEGMENT on a table segment, against the embedded segment store
over TCP on 127.0.0.1 and on the store's table data directly.

Covers updates and removals of a sealed table refused with SEGMENT_IS_SEALED (conditional or
not, nothing written), reads, scans and delta reads still served, sealing twice, sealing a
missing table, the segment info of a table segment, and the seal kept across a store restart
on its directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from protoframe.clients.pravega import (
    NOT_EXISTS,
    EmbeddedSegmentStore,
    NoSuchSegment,
    PravegaConnection,
    SegmentIsSealed,
    TableEntry,
    TableSegmentClient,
    segment_info,
)
from protoframe.clients.pravega.store.tables import TableSealed, TableStore
from protoframe.generated.pravega import frames
from tests.support.pravega_store import Scenario, run_in_store

TABLE = "_system/_tables/scope/sealed"


def run(scenario: Scenario, timeout: float = 10.0, **options: Any) -> None:
    run_in_store(scenario, timeout, **options)


async def open_table(store: EmbeddedSegmentStore, *, create: bool = True) -> TableSegmentClient:
    connection = await PravegaConnection.connect(*store.address, request_timeout=5.0)
    if create:
        return await TableSegmentClient.create(connection, TABLE)
    return TableSegmentClient(connection, TABLE)


def test_a_sealed_table_refuses_changes_and_still_answers_reads() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        table = await open_table(store)
        first = await table.put(b"a", b"1")
        second = await table.put(b"b", b"2")
        before = await table.info()
        await table.seal()
        for change in (table.put(b"c", b"3"), table.put(b"a", b"x", version=first),
                       table.put(b"d", b"4", version=NOT_EXISTS), table.remove(b"b"),
                       table.remove(b"a", version=first),
                       table.put_all([(b"e", b"5", None), (b"f", b"6", None)])):
            with pytest.raises(SegmentIsSealed) as refused:
                await change
            reply = refused.value.reply
            assert isinstance(reply, frames.SegmentIsSealed)
            assert (reply.segment, reply.offset) == (TABLE, before.length)
        after = await table.info()
        assert (after.length, after.entry_count) == (before.length, before.entry_count)
        assert await table.get_all([b"a", b"b", b"c"]) == [
            TableEntry(b"a", b"1", first), TableEntry(b"b", b"2", second), None]
        assert [e async for e in table.entries()] == [TableEntry(b"a", b"1", first),
                                                      TableEntry(b"b", b"2", second)]
        assert [k async for k, _ in table.keys()] == [b"a", b"b"]
        changes = await table.changes_since(0)
        assert [e.key for e in changes.entries] == [b"a", b"b"] and changes.reached_end
        info = await segment_info(table.connection, TABLE)
        assert (info.sealed, info.length, info.start_offset) == (True, before.length, 0)
        await table.seal()  # sealing again is no error
        await table.delete()  # a sealed table segment can still be deleted
        with pytest.raises(NoSuchSegment):
            await table.seal()

    run(scenario)


def test_an_open_table_reports_unsealed_and_a_stream_segment_is_unaffected() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        table = await open_table(store)
        await table.put(b"k", b"v")
        info = await segment_info(table.connection, TABLE)
        assert (info.sealed, info.length) == (False, (await table.info()).length)
        other = TableSegmentClient(table.connection, TABLE + "-other")
        with pytest.raises(NoSuchSegment):
            await other.seal()
        await table.put(b"k", b"w")  # the failed seal of another name changed nothing

    run(scenario)


def test_the_seal_survives_a_store_restart(tmp_path: Path) -> None:
    versions: list[int] = []

    async def first(store: EmbeddedSegmentStore) -> None:
        table = await open_table(store)
        versions.append(await table.put(b"k", b"v"))
        await table.seal()

    async def second(store: EmbeddedSegmentStore) -> None:
        table = await open_table(store, create=False)
        assert await table.get(b"k") == TableEntry(b"k", b"v", versions[0])
        with pytest.raises(SegmentIsSealed):
            await table.put(b"k", b"w")
        assert (await segment_info(table.connection, TABLE)).sealed

    run(first, directory=tmp_path)
    run(second, directory=tmp_path)


def test_sealing_writes_one_record_and_moves_no_version(tmp_path: Path) -> None:
    store = TableStore(tmp_path)
    segment = store.create("t")
    assert segment is not None
    store.put(segment, [(b"k", b"v", -1)])
    length = segment.length
    (path,) = tmp_path.glob("*.table")
    size = path.stat().st_size
    store.seal(segment)
    store.seal(segment)
    assert path.stat().st_size > size  # the seal is on disk, once
    sealed_size = path.stat().st_size
    with pytest.raises(TableSealed):
        store.put(segment, [(b"k2", b"v", -1)])
    with pytest.raises(TableSealed):
        store.remove(segment, [(b"k", -1)])
    assert path.stat().st_size == sealed_size and segment.length == length
    reloaded = TableStore(tmp_path).get("t")
    assert reloaded is not None and reloaded.sealed and reloaded.length == length
    assert reloaded.entries == segment.entries
