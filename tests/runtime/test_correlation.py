"""protoframe.runtime.engine.correlation on its own: the request table and the id allocator."""

from __future__ import annotations

import asyncio

import pytest

from protoframe.runtime.engine.correlation import IdAllocator, RequestTable
from protoframe.runtime.errors import ConnectionClosed, RequestTimeout, StreamOverflow


def test_answers_complete_requests_by_key_oldest_first() -> None:
    async def main() -> None:
        table = RequestTable()
        first, second = table.expect(("GET", 1)), table.expect(("GET", 1))
        other = table.expect(("GET", 2))
        assert len(table) == 3
        assert table.answer(("GET", 2), "two")
        assert table.answer(("GET", 1), "a") and table.answer(("GET", 1), "b")
        assert (await first, await second, await other) == ("a", "b", "two")
        assert len(table) == 0
        assert not table.answer(("GET", 1), "late")  # nobody waits any more

    asyncio.run(main())


def test_an_answer_skips_requests_already_done() -> None:
    async def main() -> None:
        table = RequestTable()
        cancelled, waiting = table.expect("k"), table.expect("k")
        cancelled.cancel()
        assert table.answer("k", 42)
        assert await waiting == 42 and len(table) == 0

    asyncio.run(main())


def test_wait_times_out_with_the_requests_name_and_forgets_it() -> None:
    async def main() -> None:
        table = RequestTable()
        future = table.expect("k")
        with pytest.raises(RequestTimeout, match=r"LOOKUP: no answer within 0.01 s"):
            await table.wait("k", future, 0.01, "LOOKUP")
        assert len(table) == 0
        assert not table.answer("k", "too late")

    asyncio.run(main())


def test_a_cancelled_wait_forgets_the_request() -> None:
    async def main() -> None:
        table = RequestTable()
        future = table.expect("k")
        task = asyncio.create_task(table.wait("k", future, None, "GET"))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert len(table) == 0

    asyncio.run(main())


def test_forget_removes_only_that_request() -> None:
    async def main() -> None:
        table = RequestTable()
        gone, kept = table.expect("k"), table.expect("k")
        table.forget("k", gone)
        table.forget("k", gone)  # twice is harmless
        table.forget("other", kept)  # a key it is not under: nothing happens
        assert table.answer("k", 1) and await kept == 1 and not gone.done()

    asyncio.run(main())


def test_fail_all_fails_pending_requests_and_refuses_new_ones() -> None:
    async def main() -> None:
        table = RequestTable()
        pending = [table.expect(k) for k in ("a", "b", "b")]
        done = table.expect("c")
        table.answer("c", "ok")
        table.fail_all(ConnectionClosed("peer went away"))
        for future in pending:
            with pytest.raises(ConnectionClosed, match="peer went away"):
                await future
        assert await done == "ok" and len(table) == 0
        with pytest.raises(ConnectionClosed, match="peer went away"):
            table.expect("d")

    asyncio.run(main())


@pytest.mark.parametrize("limit", [1, 3, 2**32])
def test_id_allocator_counts_from_zero_and_wraps_at_its_limit(limit: int) -> None:
    allocate = IdAllocator(limit)
    ids = [allocate() for _ in range(7)]
    assert ids == [i % limit for i in range(7)]
    assert IdAllocator()() == 0


def test_id_allocator_starts_where_told_and_wraps_to_zero() -> None:
    allocate = IdAllocator(4, start=2)
    assert [allocate() for _ in range(6)] == [2, 3, 0, 1, 2, 3]


@pytest.mark.parametrize(("limit", "start", "expected"), [
    (3, 0, [1, 2, 1, 2, 1]),
    (3, 2, [2, 1, 2, 1, 2]),
    (2**16, 2**16 - 2, [2**16 - 2, 2**16 - 1, 1, 2, 3]),
])
def test_id_allocator_skipping_zero_never_gives_it(limit: int, start: int,
                                                   expected: list[int]) -> None:
    allocate = IdAllocator(limit, start=start, skip_zero=True)
    assert [allocate() for _ in range(5)] == expected


@pytest.mark.parametrize(("limit", "start", "skip_zero"), [(4, 4, False), (4, -1, False),
                                                           (1, 0, True)])
def test_id_allocator_refuses_a_range_it_cannot_number(limit: int, start: int,
                                                       skip_zero: bool) -> None:
    with pytest.raises(ValueError):
        IdAllocator(limit, start=start, skip_zero=skip_zero)


def test_a_streamed_answer_is_collected_until_its_last_message() -> None:
    async def main() -> None:
        table = RequestTable()
        first = table.expect("q", until=lambda v: v[0] in ("DONE", "FAILED"))
        second = table.expect("q", until=lambda v: v[0] in ("DONE", "FAILED"))
        for value in [("ROW", 1), ("ERROR", "bad row"), ("ROW", 2), ("DONE", 2)]:
            assert table.answer("q", value)
        assert first.done() and not second.done()
        assert await first == [("ROW", 1), ("ERROR", "bad row"), ("ROW", 2), ("DONE", 2)]
        # The next request gets only what came after the first one's last message.
        assert table.answer("q", ("DONE", 0))
        assert await second == [("DONE", 0)] and len(table) == 0

    asyncio.run(main())


def test_a_stream_that_timed_out_swallows_the_rest_of_its_stream() -> None:
    async def main() -> None:
        table = RequestTable()
        stale = table.expect("q", until=lambda v: v == "DONE")
        assert table.answer("q", "ROW 1")
        with pytest.raises(RequestTimeout):
            await table.wait("q", stale, 0.01, "QUERY")
        assert len(table) == 0  # nobody waits for it any more
        fresh = table.expect("q", until=lambda v: v == "DONE")
        # The stale query's last rows and its end still arrive first (one connection keeps
        # order): they are swallowed, not given to the fresh query.
        assert table.answer("q", "ROW 2") and table.answer("q", "DONE")
        assert not fresh.done()
        assert table.answer("q", "ROW A") and table.answer("q", "DONE")
        assert await fresh == ["ROW A", "DONE"]
        assert len(table) == 0 and not table._streams and not table._abandoned

    asyncio.run(main())


def test_a_cancelled_stream_swallows_the_rest_of_its_stream_too() -> None:
    async def main() -> None:
        table = RequestTable()
        stale = table.expect("q", until=lambda v: v == "DONE")
        waiter = asyncio.ensure_future(table.wait("q", stale, None, "QUERY"))
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        fresh = table.expect("q", until=lambda v: v == "DONE")
        assert table.answer("q", "DONE")  # the cancelled one's end
        assert table.answer("q", "DONE")
        assert await fresh == ["DONE"]

    asyncio.run(main())


def test_abandoned_streams_are_bounded() -> None:
    async def main() -> None:
        table = RequestTable()
        for i in range(RequestTable.MAX_ABANDONED + 10):
            future = table.expect(("q", i), until=lambda v: v == "DONE")
            with pytest.raises(RequestTimeout):
                await table.wait(("q", i), future, 0, "QUERY")
        assert len(table._abandoned) == RequestTable.MAX_ABANDONED
        assert len(table._streams) == RequestTable.MAX_ABANDONED
        # The oldest were forgotten: their keys are free again.
        assert not table.answer(("q", 0), "DONE")
        assert table.answer(("q", 10), "DONE")  # the oldest kept one ends its stream
        assert len(table._abandoned) == RequestTable.MAX_ABANDONED - 1

    asyncio.run(main())


def _ends(value: str) -> bool:
    return value == "DONE"


def test_a_stream_read_as_it_arrives_gives_each_message_then_ends() -> None:
    async def main() -> None:
        table = RequestTable()
        stream = table.stream("q", _ends, 8, None, "QUERY")
        second = table.expect("q", until=_ends)
        got: list[str] = []

        async def read() -> None:
            async for value in stream:
                got.append(value)

        reader = asyncio.ensure_future(read())
        for value in ["ROW 1", "ROW 2"]:
            assert table.answer("q", value)
            await asyncio.sleep(0)
            assert got[-1] == value  # given as it arrived, before the stream ended
        assert table.answer("q", "DONE")
        await reader
        assert got == ["ROW 1", "ROW 2", "DONE"]  # the last message included, as in a list
        # Nothing of the stream went to the request after it.
        assert not second.done() and table.answer("q", "DONE")
        assert await second == ["DONE"] and len(table) == 0 and not table._streams

    asyncio.run(main())


def test_a_stream_whose_reader_falls_behind_overflows_and_is_swallowed() -> None:
    async def main() -> None:
        table = RequestTable()
        stream = table.stream("q", _ends, 3, None, "QUERY")
        for i in range(3):
            assert table.answer("q", f"ROW {i}")
        assert len(stream) == 3
        assert table.answer("q", "ROW 3")  # one more than the buffer holds: abandoned
        assert len(stream) == 3 and len(table) == 0 and table._abandoned
        fresh = table.expect("q", until=_ends)
        # The rest of the stream, however long, is swallowed, not buffered.
        for i in range(4, 1000):
            assert table.answer("q", f"ROW {i}")
        assert len(stream) == 3
        assert table.answer("q", "DONE")
        assert not fresh.done() and not table._abandoned
        # What was buffered is still read, then the overflow is raised.
        got = []
        with pytest.raises(StreamOverflow):
            async for value in stream:
                got.append(value)
        assert got == ["ROW 0", "ROW 1", "ROW 2"]
        assert table.answer("q", "DONE")
        assert await fresh == ["DONE"]

    asyncio.run(main())


def test_a_full_buffer_still_takes_the_last_message() -> None:
    async def main() -> None:
        table = RequestTable()
        stream = table.stream("q", _ends, 2, None, "QUERY")
        for value in ["ROW 1", "ROW 2", "DONE"]:
            assert table.answer("q", value)
        assert [value async for value in stream] == ["ROW 1", "ROW 2", "DONE"]
        assert len(table) == 0 and not table._streams and not table._abandoned

    asyncio.run(main())


def test_a_stream_waiting_longer_than_its_timeout_raises_and_swallows_the_rest() -> None:
    async def main() -> None:
        table = RequestTable()
        stream = table.stream("q", _ends, 8, 0.01, "QUERY")
        assert table.answer("q", "ROW 1")
        got = []
        with pytest.raises(RequestTimeout, match="QUERY: no message of the stream"):
            async for value in stream:
                got.append(value)
        assert got == ["ROW 1"] and len(table) == 0
        fresh = table.expect("q", until=_ends)
        assert table.answer("q", "ROW 2") and table.answer("q", "DONE")  # the stale one's
        assert not fresh.done() and len(stream) == 0
        assert table.answer("q", "DONE")
        assert await fresh == ["DONE"]

    asyncio.run(main())


def test_closing_a_stream_early_swallows_the_rest_of_it() -> None:
    async def main() -> None:
        table = RequestTable()
        stream = table.stream("q", _ends, 8, None, "QUERY")
        assert table.answer("q", "ROW 1") and table.answer("q", "ROW 2")
        async for value in stream:
            assert value == "ROW 1"
            break
        stream.close()
        assert len(stream) == 0 and len(table) == 0
        assert [value async for value in stream] == []  # closed: nothing more
        fresh = table.expect("q", until=_ends)
        assert table.answer("q", "ROW 3") and table.answer("q", "DONE")
        assert table.answer("q", "DONE")
        assert await fresh == ["DONE"] and not table._abandoned

    asyncio.run(main())


def test_a_cancelled_reader_abandons_its_stream() -> None:
    async def main() -> None:
        table = RequestTable()
        stream = table.stream("q", _ends, 8, None, "QUERY")
        reader = asyncio.ensure_future(stream.__anext__())
        await asyncio.sleep(0)
        reader.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reader
        assert len(table) == 0 and table._abandoned
        assert table.answer("q", "DONE") and not table._waiting

    asyncio.run(main())


def test_a_lost_connection_ends_a_stream_after_what_it_buffered() -> None:
    async def main() -> None:
        table = RequestTable()
        stream = table.stream("q", _ends, 8, None, "QUERY")
        assert table.answer("q", "ROW 1")
        reader = asyncio.ensure_future(stream.__anext__())
        assert await reader == "ROW 1"
        reader = asyncio.ensure_future(stream.__anext__())
        await asyncio.sleep(0)
        table.fail_all(ConnectionClosed("gone"))
        with pytest.raises(ConnectionClosed, match="gone"):
            await reader
        with pytest.raises(ConnectionClosed):
            table.stream("q", _ends, 8, None, "QUERY")

    asyncio.run(main())


def test_a_stream_buffer_holds_at_least_one_message() -> None:
    async def main() -> None:
        with pytest.raises(ValueError, match="at least one message"):
            RequestTable().stream("q", _ends, 0, None, "QUERY")

    asyncio.run(main())
