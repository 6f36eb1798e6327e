"""The Pulsar data source's position options and message-id comparisons (no Spark needed)."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from clients.pulsar.message import MessageId  # noqa: E402
from pipeline.pulsar_positions import (  # noqa: E402
    after_start,
    before_end,
    before_last,
    compare,
    parse_message_id,
    parse_offsets,
    parse_time,
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
