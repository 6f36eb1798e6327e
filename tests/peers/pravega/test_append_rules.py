"""The append block rules: hand-built byte sequences against the embedded segment store.

Every frame here is written with struct.pack from the reference's layouts, not with our
encoders. Valid sequences (a block ended by PADDING, a block cutting an event with a
PARTIAL_EVENT, a lone APPEND_BLOCK_END) store exactly the events; each broken rule closes the
connection that broke it with a typed error while another connection keeps working.
"""

from __future__ import annotations

import asyncio
import struct
from uuid import UUID

import pytest

from protoframe.clients.pravega import (
    AppendRuleViolation,
    EmbeddedSegmentStore,
    PravegaConnection,
    SegmentReader,
    SegmentWriter,
    UnexpectedCommand,
)
from protoframe.clients.pravega.appends import AppendAssembler, split_into_block
from protoframe.generated.pravega import frames
from protoframe.runtime.errors import DecodeError

SEGMENT = "s/t/0.#epoch.0"
WRITER = UUID("00112233-4455-6677-8899-aabbccddeeff")
OTHER = UUID(int=7)


def command(code: int, payload: bytes) -> bytes:
    return struct.pack(">ii", code, len(payload)) + payload


def utf(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">H", len(data)) + data


def event(data: bytes) -> bytes:
    return struct.pack(">ii", 0, len(data)) + data


HELLO = command(-127, struct.pack(">ii", 17, 5))
KEEP_ALIVE = command(100, b"")


def setup_append(request_id: int = 1, writer: UUID = WRITER) -> bytes:
    return command(1, struct.pack(">q", request_id) + writer.bytes + utf(SEGMENT) + utf(""))


def append_block(data: bytes, writer: UUID = WRITER) -> bytes:
    return command(3, writer.bytes + data)


def block_end(whole: int, data: bytes, num_events: int, last: int, request_id: int = 9,
              writer: UUID = WRITER) -> bytes:
    return command(4, writer.bytes + struct.pack(">ii", whole, len(data)) + data
                   + struct.pack(">iqq", num_events, last, request_id))


def padding(n: int) -> bytes:
    return struct.pack(">ii", -1, n) + bytes(n)


def partial(data: bytes) -> bytes:
    return struct.pack(">ii", -2, len(data)) + data


async def exchange(store: EmbeddedSegmentStore, *chunks: bytes) -> tuple[list[frames.Frame], bool]:
    """Send the chunks on a fresh connection; return the replies and whether it was closed."""
    reader, writer = await asyncio.open_connection(*store.address)
    try:
        for chunk in chunks:
            writer.write(chunk)
        await writer.drain()
        decoder = frames.StreamDecoder()
        replies: list[frames.Frame] = []
        closed = False
        try:
            while True:
                data = await asyncio.wait_for(reader.read(65536), 0.5)
                if not data:
                    closed = True
                    break
                replies += decoder.feed(data)
        except TimeoutError:
            pass
        return replies, closed
    finally:
        writer.close()


def run(scenario: object) -> None:
    async def main() -> None:
        async with EmbeddedSegmentStore() as store:
            store.table.create(SEGMENT)
            await asyncio.wait_for(scenario(store), 10)  # type: ignore[operator]

    asyncio.run(main())


def stored_events(store: EmbeddedSegmentStore) -> list[bytes]:
    return [e.data for e in frames.EventRun.decode(bytes(store.table.segments[SEGMENT].data))
            .events]


# -- what the rules allow -----------------------------------------------------------------------


def test_block_ended_by_padding() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        block = event(b"one") + event(b"two") + padding(5)
        replies, closed = await exchange(
            store, HELLO, setup_append(), append_block(block),
            block_end(len(event(b"one") + event(b"two")), b"", 2, 2))
        assert not closed
        assert [type(r.body) for r in replies] == [frames.Hello, frames.AppendSetup,
                                                   frames.DataAppended]
        acked = replies[2].body
        assert isinstance(acked, frames.DataAppended)
        assert (acked.writer_id, acked.event_number, acked.request_id) == (WRITER, 2, 9)
        assert stored_events(store) == [b"one", b"two"]

    run(scenario)


def test_block_cutting_an_event_with_a_partial_event() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        cut = event(b"three")
        block = event(b"one") + partial(cut[:6])
        end_data = cut[6:] + event(b"four")
        replies, closed = await exchange(
            store, HELLO, setup_append(), append_block(block),
            block_end(len(event(b"one")), end_data, 3, 3))
        assert not closed and isinstance(replies[-1].body, frames.DataAppended)
        assert stored_events(store) == [b"one", b"three", b"four"]

    run(scenario)


def test_lone_block_end_as_the_rust_client_sends() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        data = event(b"a") + event(b"bb")
        replies, closed = await exchange(store, HELLO, setup_append(),
                                         block_end(len(data), data, 2, 2))
        assert not closed and isinstance(replies[-1].body, frames.DataAppended)
        assert stored_events(store) == [b"a", b"bb"]

    run(scenario)


def test_split_into_block_matches_hand_built_bytes() -> None:
    data = event(b"one") + event(b"three")
    block, end = split_into_block(WRITER, data, 2, 2, block_size=24, request_id=9)
    # 24-byte block: "one" (11 bytes) whole, then a PARTIAL_EVENT header and 5 bytes of "three".
    assert frames.Frame(body=block).encode() == append_block(event(b"one") + partial(data[11:16]))
    assert frames.Frame(body=end).encode() == block_end(11, data[16:], 2, 2)
    block, end = split_into_block(WRITER, data, 2, 2, block_size=40)
    assert frames.Frame(body=block).encode() == append_block(data + padding(40 - 8 - len(data)))
    assert frames.Frame(body=end).encode() == block_end(len(data), b"", 2, 2, request_id=-1)
    with pytest.raises(ValueError):
        split_into_block(WRITER, data, 2, 2, block_size=7)


def test_assembler_reassembles_what_split_into_block_cuts() -> None:
    payloads = [bytes([i]) * i for i in range(1, 30)]
    data = b"".join(event(p) for p in payloads)
    for size in range(8, len(data) + 16, 5):
        assembler = AppendAssembler()
        assembler.setup(WRITER, -(1 << 63))
        block, end = split_into_block(WRITER, data, len(payloads), 29, block_size=size)
        assembler.block(block)
        assert assembler.block_end(end).data == data, size


# -- what they forbid: each closes only that connection ------------------------------------------

VIOLATIONS = {
    "command between block and end": [append_block(event(b"x") + padding(0)), KEEP_ALIVE],
    "second block before the end": [append_block(padding(0)), append_block(padding(0))],
    "negative size of whole events": [append_block(event(b"x") + padding(0)),
                                      block_end(-1, b"", 1, 1)],
    "size of whole events past the block": [append_block(event(b"x") + padding(0)),
                                            block_end(100, b"", 1, 1)],
    "block rest is an event": [append_block(event(b"x") + event(b"y")),
                               block_end(9, b"", 2, 2)],
    "block rest is two records": [append_block(event(b"x") + padding(0) + padding(0)),
                                  block_end(9, b"", 1, 1)],
    "block rest is cut short": [append_block(event(b"x") + partial(b"abc")[:-1]),
                                block_end(9, b"", 1, 1)],
    "data after padding": [append_block(event(b"x") + padding(2)),
                           block_end(9, event(b"y"), 2, 2)],
    "no events": [block_end(0, b"", 0, 1)],
    "event number backwards": [block_end(9, event(b"x"), 1, 5), block_end(9, event(b"y"), 1, 4)],
    "block end of another writer": [append_block(event(b"x") + padding(0)),
                                    block_end(9, b"", 1, 1, writer=OTHER)],
}


@pytest.mark.parametrize("sequence", list(VIOLATIONS.values()), ids=list(VIOLATIONS))
def test_rule_violations_close_only_that_connection(sequence: list[bytes]) -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        async with await PravegaConnection.connect(*store.address) as bystander:
            writer = await SegmentWriter.open(bystander, SEGMENT, writer_id=OTHER)
            replies, closed = await exchange(store, HELLO, setup_append(), *sequence)
            assert closed
            assert not any(isinstance(r.body, frames.ErrorMessage) for r in replies)
            reason = store.closed_reasons[-1]
            assert isinstance(reason.__cause__, AppendRuleViolation), reason
            # The store and the other connection carry on.
            assert bystander.is_open
            assert await writer.write(b"still here") == 1
            assert [e.data for e in await SegmentReader(bystander, SEGMENT).read_all()][-1] == \
                b"still here"

    run(scenario)


def test_appends_without_setup_append_close_the_connection() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        for sequence in ([block_end(9, event(b"x"), 1, 1)],
                         [append_block(event(b"x") + padding(0))],
                         [command(5, WRITER.bytes + struct.pack(">qq", 1, 0) + event(b"x"))]):
            _, closed = await exchange(store, HELLO, *sequence)
            assert closed
            assert isinstance(store.closed_reasons[-1].__cause__, AppendRuleViolation)
        assert store.table.segments[SEGMENT].length == 0

    run(scenario)


def test_server_only_commands_and_undecodable_frames_close_the_connection() -> None:
    async def scenario(store: EmbeddedSegmentStore) -> None:
        data_appended = command(7, WRITER.bytes + struct.pack(">q", 1))
        _, closed = await exchange(store, HELLO, data_appended)
        assert closed and isinstance(store.closed_reasons[-1].__cause__, UnexpectedCommand)
        _, closed = await exchange(store, HELLO, command(999, b""))
        assert closed and isinstance(store.closed_reasons[-1].__cause__, DecodeError)
        _, closed = await exchange(store, struct.pack(">ii", 100, 0x01000000))  # oversize
        assert closed and isinstance(store.closed_reasons[-1].__cause__, DecodeError)
        replies, closed = await exchange(store, HELLO, KEEP_ALIVE)
        assert not closed and [type(r.body) for r in replies] == [frames.Hello, frames.KeepAlive]

    run(scenario)
