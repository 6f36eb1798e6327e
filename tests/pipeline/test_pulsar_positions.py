"""The Pulsar data source's position options and message-id comparisons (no Spark needed)."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

import random  # noqa: E402

from protoframe.clients.pulsar.message import EntryInfo, Message, MessageId  # noqa: E402
from protoframe.generated.pulsar.pulsar_api import MessageMetadata  # noqa: E402
from protoframe.pipeline.pulsar_positions import (  # noqa: E402
    Bounds,
    ReadRange,
    after_start,
    before_end,
    before_last,
    compare,
    entry_span,
    parse_message_id,
    parse_offsets,
    parse_time,
    split_counts,
    split_entries,
    split_range,
)

TOPIC = "persistent://public/default/t-partition-1"


def ids(mid: MessageId) -> tuple[int, int, int, int]:
    return (mid.partition(), mid.ledger_id(), mid.entry_id(), mid.batch_index())


def test_message_id_forms() -> None:
    assert ids(parse_message_id("12:40")) == (-1, 12, 40, -1)
    assert ids(parse_message_id(" 12:40:3 ")) == (-1, 12, 40, 3)
    # The message_id column's text reads back.
    column = str(MessageId(1, 12, 40, 3))
    assert ids(parse_message_id(column)) == (1, 12, 40, 3)
    for bad in ("12", "a:b", "12:40:3:1", "(1,2,3)", ""):
        with pytest.raises(ValueError, match="not a message id"):
            parse_message_id(bad)


def test_offsets_option() -> None:
    assert parse_offsets({}, "starting_offsets", "earliest").named == "earliest"
    assert parse_offsets({"ending_offsets": " LATEST "}, "ending_offsets", "x").named == "latest"
    given = parse_offsets({"starting_offsets": '{"t-partition-1": "5:6:1"}'},
                          "starting_offsets", "earliest")
    assert given.named is None
    assert {k: ids(v) for k, v in given.ids.items()} == {TOPIC: (-1, 5, 6, 1)}
    with pytest.raises(ValueError, match="'earliest', 'latest' or a JSON object"):
        parse_offsets({"starting_offsets": "newest"}, "starting_offsets", "earliest")
    with pytest.raises(ValueError, match="must be a string"):
        parse_offsets({"starting_offsets": '{"t": 5}'}, "starting_offsets", "earliest")


def test_time_option() -> None:
    assert parse_time({}, "starting_time") is None
    assert parse_time({"starting_time": "1700000000123"}, "starting_time") == 1700000000123
    assert parse_time({"t": "2023-11-14T22:13:20.123"}, "t") == 1700000000123
    assert parse_time({"t": "2023-11-14T23:13:20.123+01:00"}, "t") == 1700000000123
    with pytest.raises(ValueError, match="ISO-8601"):
        parse_time({"t": "yesterday"}, "t")


def test_compare_entry_wide_and_batched_ids() -> None:
    whole = MessageId(-1, 5, 6)
    assert compare(MessageId(-1, 5, 6, 3), whole) == 0
    assert compare(MessageId(-1, 5, 7, 0), whole) == 1
    assert compare(MessageId(-1, 4, 99), whole) == -1
    assert compare(MessageId(-1, 5, 6, 3), MessageId(-1, 5, 6, 4)) == -1
    # A start is inclusive or exclusive; an entry-wide exclusive start skips the whole entry.
    assert after_start(MessageId(-1, 5, 6, 4), MessageId(-1, 5, 6, 4), True)
    assert not after_start(MessageId(-1, 5, 6, 4), MessageId(-1, 5, 6, 4), False)
    assert not after_start(MessageId(-1, 5, 6, 9), whole, False)
    assert before_end(MessageId(-1, 5, 6, 3), MessageId(-1, 5, 6, 4))
    assert not before_end(MessageId(-1, 5, 6, 3), whole)


def test_inclusive_last_of_a_batch() -> None:
    last = MessageId(-1, 5, 6, 2)
    assert before_last(MessageId(-1, 5, 6, 1, 4), last) == (True, False)
    assert before_last(MessageId(-1, 5, 6, 2, 4), last) == (True, True)
    assert before_last(MessageId(-1, 5, 7, -1), last) == (False, True)
    # An entry-wide last: every message of the entry, done at its final one.
    whole = MessageId(-1, 5, 6)
    assert before_last(MessageId(-1, 5, 6, 0, 3), whole) == (True, False)
    assert before_last(MessageId(-1, 5, 6, 2, 3), whole) == (True, True)
    assert before_last(MessageId(-1, 5, 6), whole) == (True, True)


# --- splitting a range (min_partitions) -----------------------------------------------------------


def test_split_entries_and_counts() -> None:
    assert split_entries(10, 19, 4) == [10, 12, 15, 17, 20]
    assert split_entries(5, 5, 4) == [5, 6]
    assert split_entries(0, 2, 8) == [0, 1, 2, 3]  # at most one piece per entry
    with pytest.raises(ValueError):
        split_entries(5, 4, 2)
    # Proportional to the sizes, at least one each, at most one per entry.
    assert split_counts([100], 4) == [4]
    assert split_counts([300, 100], 4) == [3, 1]
    assert split_counts([100, 100, 1], 5) == [2, 2, 1]
    assert split_counts([1, 1, 1], 2) == [1, 1, 1]
    assert split_counts([2, 1000], 10) == [1, 9]
    assert split_counts([3], 10) == [3]
    assert sum(split_counts([17, 5, 40, 1], 12)) == 12


def test_entry_span() -> None:
    last = MessageId(-1, 7, 50, 3)
    assert entry_span(Bounds(MessageId(-1, 7, 10, 2), True, last), None) == (7, 10, 50)
    assert entry_span(Bounds(None, True, last), None) is None  # earliest, first unknown
    assert entry_span(Bounds(None, True, last), MessageId(-1, 7, 4, 0)) == (7, 4, 50)
    # Another ledger: not split.
    assert entry_span(Bounds(MessageId(-1, 6, 10), True, last), None) is None
    # An entry-wide end excludes its entry; one with a batch index keeps part of it.
    assert entry_span(Bounds(MessageId(-1, 7, 10), True, last, MessageId(-1, 7, 30)),
                      None) == (7, 10, 29)
    assert entry_span(Bounds(MessageId(-1, 7, 10), True, last, MessageId(-1, 7, 30, 1)),
                      None) == (7, 10, 30)
    assert entry_span(Bounds(MessageId(-1, 7, 10), True, last, MessageId(-1, 7, 10)),
                      None) is None  # empty


def test_split_range_pieces() -> None:
    bounds = Bounds(MessageId(-1, 7, 10, 2), True, MessageId(-1, 7, 19, 1),
                    MessageId(-1, 7, 18, 3))
    pieces = split_range(bounds, None, 3)
    assert [(p.start, p.start_inclusive) for p in pieces][0] == (bounds.start, True)
    assert pieces[-1].last == bounds.last and pieces[-1].end == bounds.end
    shape = [(p.start.entry_id() if p.start else None, p.last.entry_id(),
              p.end.entry_id() if p.end else None) for p in pieces]
    assert shape == [(10, 12, 13), (13, 15, 16), (16, 19, 18)]
    assert all(p.start is not None and p.start.batch_index() == -1 for p in pieces[1:])
    assert split_range(bounds, None, 1) == [bounds]
    assert split_range(Bounds(None, True, bounds.last), None, 3) == [Bounds(None, True,
                                                                           bounds.last)]


def _entry(ledger: int, entry: int, size: int) -> list[Message]:
    """The messages of one entry: a batch of ``size``, or one unbatched message (0)."""
    meta = MessageMetadata(producer_name="p", sequence_id=entry, publish_time=entry * 10)
    info = EntryInfo(ledger, entry, -1, size, meta, 0, None, "t")
    return [Message(b"", index, info, None) for index in (range(size) if size else [-1])]


def _topic(rng: random.Random, ledger: int, first: int, entries: int) -> list[Message]:
    """The messages of a topic: entries ``first..`` of ``ledger``, batched or not."""
    return [m for entry in range(first, first + entries)
            for m in _entry(ledger, entry, rng.choice([0, 0, 1, 3, 5]))]


def _read(stored: list[Message], bounds: Bounds, start_time: int | None,
          end_time: int | None, rng: random.Random) -> list[tuple[int, int]]:
    """What a task keeps: subscribed at the start's entry, messages in random chunks."""
    at = (bounds.start.ledger_id(), bounds.start.entry_id()) if bounds.start else (-1, -1)
    queue = [m for m in stored if (m.entry().ledger_id, m.entry().entry_id) >= at]
    wanted = ReadRange(bounds.start, bounds.start_inclusive, bounds.last, bounds.end,
                       start_time, end_time)
    kept: list[Message] = []
    while True:
        assert queue, "the read would wait for a message that never comes"
        n = rng.randint(1, 7)
        chunk, queue = queue[:n], queue[n:]
        got, done = wanted.select(chunk)
        kept += got
        if done:
            return [(m.entry().entry_id, m.batch_index()) for m in kept]


def test_read_range_entry_wide_piece_ends() -> None:
    """A piece's entry-wide ``last`` ends it at the final message of that entry; an
    entry-wide exclusive ``end`` excludes its whole entry."""
    stored = [m for entry, size in ((4, 3), (5, 0), (6, 2))
              for m in _entry(9, entry, size)]
    piece = ReadRange(MessageId(-1, 9, 4), True, MessageId(-1, 9, 5), MessageId(-1, 9, 6))
    kept, done = piece.select(stored[:4])
    assert [(m.entry().entry_id, m.batch_index()) for m in kept] == [(4, 0), (4, 1), (4, 2),
                                                                    (5, -1)]
    assert done  # without waiting for entry 6
    batched_last = ReadRange(MessageId(-1, 9, 5), True, MessageId(-1, 9, 6),
                             MessageId(-1, 9, 7))
    kept, done = batched_last.select(stored[3:5])
    assert len(kept) == 2 and not done
    kept, done = batched_last.select(stored[5:])
    assert len(kept) == 1 and done
    # Only the exclusive end: done at the first message of its entry, which is not kept.
    ending = ReadRange(MessageId(-1, 9, 4, 1), True, MessageId(-1, 9, 6, 1),
                       MessageId(-1, 9, 6))
    kept, done = ending.select(stored)
    assert [(m.entry().entry_id, m.batch_index()) for m in kept] == [(4, 1), (4, 2), (5, -1)]
    assert done


def _pick(rng: random.Random, ids: list[MessageId]) -> MessageId:
    """One of ``ids`` as an option would give it: with its batch index, or entry-wide."""
    mid = rng.choice(ids)
    if rng.random() < 0.3:
        return MessageId(-1, mid.ledger_id(), mid.entry_id())
    return MessageId(-1, mid.ledger_id(), mid.entry_id(), mid.batch_index())


def test_split_pieces_read_exactly_the_unsplit_range() -> None:
    """Random topics, ranges and piece counts: the pieces, read as tasks read them, keep
    exactly what the whole range keeps, in order, each message once."""
    rng = random.Random(1234)
    split = 0
    for _ in range(400):
        ledger, first = 9, rng.randint(0, 5)
        stored = _topic(rng, ledger, first, rng.randint(1, 25))
        ids = [m.message_id() for m in stored]
        top = ids[-1]
        last = rng.choice([top, MessageId(-1, ledger, top.entry_id(), top.batch_index())])
        start = _pick(rng, ids) if rng.random() < 0.6 else None
        end = _pick(rng, ids) if rng.random() < 0.5 else None
        if start is not None and end is not None and compare(end, start) <= 0:
            end = None
        times = sorted(rng.sample(range(first * 10 - 5, (first + 30) * 10), 2))
        start_time = times[0] if rng.random() < 0.3 else None
        end_time = times[1] if rng.random() < 0.3 else None
        bounds = Bounds(start, rng.random() < 0.7, last, end)
        whole = _read(stored, bounds, start_time, end_time, rng)
        pieces = split_range(bounds, ids[0], rng.randint(2, 9))
        span = entry_span(bounds, ids[0])
        assert (len(pieces) > 1) == (span is not None and span[2] > span[1])
        split += len(pieces) > 1
        parts = [_read(stored, piece, start_time, end_time, rng) for piece in pieces]
        joined = [key for part in parts for key in part]
        assert joined == whole, (bounds, pieces)
        assert len(set(joined)) == len(joined)
    assert split > 200
