"""Our table-segment client against the embedded segment store, over TCP on 127.0.0.1.

Covers creating and deleting table segments, unconditional and conditional puts and removals
(with the typed refusals, which change nothing, batches included), reads of present and
absent keys, paged scans of keys and entries with continuation tokens, delta reads, the
bounds on a request's memory, and a store restart on its directory.
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
    SegmentAlreadyExists,
    SegmentIsTruncated,
    ServerError,
    TableEntry,
    TableKeyBadVersion,
    TableKeyDoesNotExist,
    TableSegmentClient,
    TableSegmentNotEmpty,
)
from protoframe.clients.pravega.store.tables import record_size
from tests.support.pravega_store import Scenario, run_in_store

TABLE = "_system/_tables/scope/readerGroup"
def run(scenario: Scenario, timeout: float = 10.0, **options: Any) -> None:
    run_in_store(scenario, timeout, **options)


async def open_table(store: EmbeddedSegmentStore, *, create: bool = True,
                     **options: Any) -> TableSegmentClient:
    connection = await PravegaConnection.connect(*store.address, request_timeout=5.0)
    if create:
        table = await TableSegmentClient.create(connection, TABLE)
        table.page_size = options.get("page_size", table.page_size)
        return table
    return TableSegmentClient(connection, TABLE, **options)


def test_put_get_and_versions() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        table = await open_table(store)
        first = await table.put(b"k", b"v1")
        assert await table.get(b"k") == TableEntry(b"k", b"v1", first)
        second = await table.put(b"k", b"v2")
        assert second == first + record_size(b"k", b"v1")  # a version is an offset
        assert await table.get(b"k") == TableEntry(b"k", b"v2", second)
        assert await table.get(b"absent") is None
        assert await table.get_all([b"absent", b"k"]) == [None, TableEntry(b"k", b"v2", second)]
        info = await table.info()
        assert (info.entry_count, info.length) == (1, second + record_size(b"k", b"v2"))

    run(scenario)


def test_conditional_puts() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        table = await open_table(store)
        version = await table.put(b"k", b"v1", version=NOT_EXISTS)
        with pytest.raises(TableKeyBadVersion):
            await table.put(b"k", b"again", version=NOT_EXISTS)  # exists already
        with pytest.raises(TableKeyBadVersion):
            await table.put(b"k", b"stale", version=version + 1)
        with pytest.raises(TableKeyDoesNotExist):
            await table.put(b"other", b"x", version=version)
        newer = await table.put(b"k", b"v2", version=version)
        assert newer > version
        with pytest.raises(TableKeyBadVersion):
            await table.put(b"k", b"v3", version=version)  # the version it had before
        assert await table.get(b"k") == TableEntry(b"k", b"v2", newer)
        assert await table.get(b"other") is None

    run(scenario)


def test_a_refused_batch_writes_nothing() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        table = await open_table(store)
        version = await table.put(b"a", b"1")
        length = (await table.info()).length
        with pytest.raises(TableKeyBadVersion):
            await table.put_all([(b"b", b"2", None), (b"a", b"x", version + 1)])
        assert await table.get_all([b"a", b"b"]) == [TableEntry(b"a", b"1", version), None]
        assert (await table.info()).length == length
        versions = await table.put_all([(b"b", b"2", NOT_EXISTS), (b"a", b"3", version)])
        assert versions[0] < versions[1]
        assert [e.value for e in await table.get_all([b"a", b"b"]) if e] == [b"3", b"2"]

    run(scenario)


def test_removals() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        table = await open_table(store)
        version = await table.put(b"k", b"v")
        await table.remove(b"absent")  # unconditional: nothing to do, no error
        with pytest.raises(TableKeyDoesNotExist):
            await table.remove(b"absent", version=3)
        with pytest.raises(TableKeyBadVersion):
            await table.remove(b"k", version=version + 1)
        assert await table.get(b"k") is not None
        await table.put_all([(b"j", b"1", None), (b"l", b"2", None)])
        await table.remove(b"k", version=version)
        assert await table.get(b"k") is None
        assert [k async for k, _ in table.keys()] == [b"j", b"l"]  # scans skip it too
        await table.remove_all([(b"j", None), (b"l", None)])
        assert (await table.info()).entry_count == 0
        assert [k async for k, _ in table.keys()] == []

    run(scenario)


def test_table_segment_offset_condition() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        table = await open_table(store)
        await table.put_all([(b"a", b"1", None)], table_segment_offset=0)
        with pytest.raises(SegmentIsTruncated):
            await table.put_all([(b"b", b"2", None)], table_segment_offset=0)
        length = (await table.info()).length
        await table.remove_all([(b"a", None)], table_segment_offset=length)
        assert await table.get(b"a") is None

    run(scenario)


def test_create_and_delete() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        table = await open_table(store)
        with pytest.raises(SegmentAlreadyExists):
            await TableSegmentClient.create(table.connection, TABLE)
        await table.connection.requests.create_segment("scope/stream/0", 0, 0, "")
        with pytest.raises(SegmentAlreadyExists):  # one namespace for both kinds
            await TableSegmentClient.create(table.connection, "scope/stream/0")
        await table.put(b"k", b"v")
        with pytest.raises(TableSegmentNotEmpty):
            await table.delete(must_be_empty=True)
        await table.remove(b"k")
        await table.delete(must_be_empty=True)
        with pytest.raises(NoSuchSegment):
            await table.get(b"k")
        with pytest.raises(NoSuchSegment):
            await table.delete()

    run(scenario)


def test_paged_scans_follow_the_continuation_token() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        table = await open_table(store, page_size=3)
        keys = [f"key-{i:02}".encode() for i in range(10)]
        versions = await table.put_all([(k, k.upper(), None) for k in keys])
        page, token = await table.keys_page()
        assert page == list(zip(keys[:3], versions[:3], strict=True))
        page, token = await table.keys_page(token)
        assert [k for k, _ in page] == keys[3:6]
        assert [k async for k, _ in table.keys()] == keys
        assert [e async for e in table.entries()] == [
            TableEntry(k, k.upper(), v) for k, v in zip(keys, versions, strict=True)]
        # A key added behind the scan's position is not seen; one ahead of it is.
        _, token = await table.entries_page(b"", 5)
        await table.put(b"a-first", b"x")
        await table.put(b"key-99", b"y")
        rest, token = await table.entries_page(token, 100)
        assert [e.key for e in rest] == [*keys[5:], b"key-99"]
        assert await table.entries_page(token, 100) == ([], token)  # the end, and stays

    run(scenario)


def test_a_token_we_did_not_issue_is_refused() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        table = await open_table(store)
        with pytest.raises(ServerError, match="continuation token"):
            await table.keys_page(b"\x07bogus")

    run(scenario)


def test_pages_stop_at_the_read_size() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        table = await open_table(store, page_size=100)
        await table.put_all([(bytes([65 + i]), bytes(300), None) for i in range(10)])
        page, token = await table.entries_page()
        assert 1 <= len(page) <= 4  # 1 KiB of entries: at most the page that reaches it
        assert len([e async for e in table.entries()]) == 10

    run(scenario, max_read_size=1024)


def test_a_read_whose_answer_would_not_fit_in_a_frame_is_refused() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        table = await open_table(store)
        await table.put(b"big", bytes(3000))
        with pytest.raises(ServerError, match="do not fit"):
            await table.get_all([b"big", b"big"])
        assert (await table.get(b"big")) is not None

    run(scenario, max_frame_size=4096)


def test_empty_and_mis_sized_keys() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        table = await open_table(store)
        with pytest.raises(ValueError, match="empty"):
            await table.put(b"", b"v")
        fixed = await TableSegmentClient.create(table.connection, "fixed", key_length=4)
        await fixed.put(b"abcd", b"v")
        with pytest.raises(ServerError, match="4 bytes"):
            await fixed.put(b"abc", b"v")
        assert (await fixed.info()).key_length == 4

    run(scenario)


def test_delta_reads() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        table = await open_table(store, page_size=2)
        va = await table.put(b"a", b"1")
        await table.put(b"b", b"1")
        await table.put(b"c", b"1")
        vb = await table.put(b"b", b"2")
        await table.remove(b"c")
        changes = await table.changes_since(0)
        assert [(e.key, e.value) for e in changes.entries] == [(b"a", b"1"), (b"b", b"2")]
        assert changes.reached_end  # the removal of c is read past, reported as nothing
        assert changes.next_position == (await table.info()).length
        assert not changes.should_clear
        later = await table.changes_since(va + 1)
        assert [(e.key, e.version) for e in later.entries] == [(b"b", vb)]
        one = await table.changes_since(0, 1)
        assert [e.key for e in one.entries] == [b"a"]
        assert not one.reached_end
        rest = await table.changes_since(one.next_position)
        assert [e.key for e in rest.entries] == [b"b"]
        with pytest.raises(ServerError, match="outside"):
            await table.changes_since(changes.next_position + 1)

    run(scenario)


def test_store_keeps_table_segments_in_its_directory(tmp_path: Path) -> None:
    versions: list[int] = []

    async def write(store: EmbeddedSegmentStore) -> None:
        table = await open_table(store)
        versions.extend(await table.put_all([(b"a", b"1", None), (b"b", b"2", None)]))
        await table.remove(b"a")
        versions.append(await table.put(b"c", b"3"))

    async def read(store: EmbeddedSegmentStore) -> None:
        table = await open_table(store, create=False)
        assert [e async for e in table.entries()] == [
            TableEntry(b"b", b"2", versions[1]), TableEntry(b"c", b"3", versions[2])]
        # Versions keep growing from where they were: a stale one is still refused.
        with pytest.raises(TableKeyBadVersion):
            await table.put(b"c", b"x", version=versions[1])
        assert await table.put(b"b", b"4", version=versions[1]) > versions[2]

    run(write, directory=tmp_path)
    run(read, directory=tmp_path)
    # A record cut short by a crash was never acknowledged: loading drops it.
    (log,) = (tmp_path / "tables").glob("*.table")
    log.write_bytes(log.read_bytes() + b"\x01\x00\x00")
    run(_only_b_and_c, directory=tmp_path)


async def _only_b_and_c(store: EmbeddedSegmentStore) -> None:
    table = await open_table(store, create=False)
    assert [e.key async for e in table.entries()] == [b"b", b"c"]


def test_a_fixed_key_length_survives_a_restart(tmp_path: Path) -> None:
    async def create(store: EmbeddedSegmentStore) -> None:
        connection = await PravegaConnection.connect(*store.address, request_timeout=5.0)
        fixed = await TableSegmentClient.create(connection, "fixed", key_length=2)
        await fixed.put(b"ab", b"v")

    async def check(store: EmbeddedSegmentStore) -> None:
        connection = await PravegaConnection.connect(*store.address, request_timeout=5.0)
        fixed = TableSegmentClient(connection, "fixed")
        assert (await fixed.info()).key_length == 2
        assert (await fixed.get(b"ab")) is not None
        with pytest.raises(ServerError, match="2 bytes"):
            await fixed.put(b"abc", b"v")

    run(create, directory=tmp_path)
    run(check, directory=tmp_path)
