"""Where a Pulsar read starts and ends: the position options and message-id comparisons.

A position in one topic partition is a message id compared entry first, then batch index.
An id whose batch index is -1 stands for its whole entry (a message that was not batched,
or an id the broker gave at entry granularity), so it compares equal to every message of
that entry; the functions here decide what that means at a start and at an end.

Options (batch reads):

``starting_offsets``
    "earliest" (default), "latest", or a JSON object from topic partition name to the
    message id to start at, inclusive: ``{"persistent://public/default/t-partition-0":
    "12:40:3"}``. Partitions the object does not name start at the earliest message.
``ending_offsets``
    "latest" (default: what is stored when the read is planned), "earliest", or a JSON
    object from partition name to the message id to stop before (exclusive, like Spark's
    Kafka source). Partitions it does not name end at "latest".
``starting_time`` / ``ending_time``
    publish-time bounds, inclusive start and exclusive end, as milliseconds since the
    epoch or an ISO-8601 timestamp (UTC unless it names a zone). They filter on each
    message's publish time, so they are exact even when producers' clocks disagree.

A message id is written ``ledger:entry``, ``ledger:entry:batch_index``, or as the
``message_id`` column shows it, ``(ledger,entry,partition,batch_index)``.

Splitting a range (``min_partitions``): ``split_range`` cuts one topic partition's range
into consecutive runs of whole entries of one ledger. Every piece but the first starts
inclusively at its first entry (an entry-wide id); every piece but the last ends with an
entry-wide inclusive ``last`` (its final entry) and an entry-wide exclusive ``end`` (the
next piece's first entry), so the pieces together keep exactly the messages of the range,
including those of a batch entry the original start or end cuts through (the first and
last pieces keep the original ids). ``split_counts`` shares a number of pieces among
ranges in proportion to their entry counts.
"""

from __future__ import annotations

import datetime as dt
import heapq
import json
import re
from dataclasses import dataclass
from itertools import groupby

from protoframe.clients.pulsar.lookup import TopicName
from protoframe.clients.pulsar.message import EntryInfo, Message, MessageId

EARLIEST = "earliest"
LATEST = "latest"

_COLON_ID = re.compile(r"^\s*(-?\d+):(-?\d+)(?::(-?\d+))?\s*$")
_COLUMN_ID = re.compile(r"^\s*\(\s*(-?\d+)\s*,\s*(-?\d+)\s*,\s*(-?\d+)\s*,\s*(-?\d+)\s*\)\s*$")


@dataclass(frozen=True)
class Offsets:
    """A parsed ``starting_offsets``/``ending_offsets``: a named end, or ids per partition."""

    named: str | None
    ids: dict[str, MessageId]


def parse_message_id(text: str) -> MessageId:
    """A message id from its ``ledger:entry[:batch_index]`` or ``message_id`` column text."""
    match = _COLON_ID.match(text)
    if match:
        ledger, entry, index = match.groups()
        return MessageId(-1, int(ledger), int(entry), int(index) if index else -1)
    match = _COLUMN_ID.match(text)
    if match:
        ledger, entry, partition, index = (int(g) for g in match.groups())
        return MessageId(partition, ledger, entry, index)
    raise ValueError(f"{text!r} is not a message id (write ledger:entry[:batch_index])")


def parse_offsets(options: dict[str, str], name: str, default: str) -> Offsets:
    """The option ``name``: "earliest", "latest" or a JSON object of message ids."""
    raw = options.get(name, default).strip()
    if raw.lower() in (EARLIEST, LATEST):
        return Offsets(raw.lower(), {})
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise ValueError(f"{name} must be 'earliest', 'latest' or a JSON object from topic "
                         f"partition to message id, not {raw!r}")
    ids: dict[str, MessageId] = {}
    for topic, position in value.items():
        if not isinstance(position, str):
            raise ValueError(f"{name}: the position of {topic!r} must be a string such as "
                             f"\"12:40\", not {position!r}")
        ids[str(TopicName.parse(topic))] = parse_message_id(position)
    return Offsets(None, ids)


def parse_time(options: dict[str, str], name: str) -> int | None:
    """The option ``name`` as milliseconds since the epoch, or None when it is not set."""
    raw = options.get(name, "").strip()
    if not raw:
        return None
    if re.fullmatch(r"-?\d+", raw):
        return int(raw)
    try:
        when = dt.datetime.fromisoformat(raw)
    except ValueError:
        raise ValueError(f"{name} must be milliseconds since the epoch or an ISO-8601 "
                         f"timestamp, not {raw!r}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    delta = when - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def compare(msg_id: MessageId, ref: MessageId) -> int:
    """-1, 0 or 1: ``msg_id`` before, in (an entry-wide ``ref``), or after ``ref``."""
    here = (msg_id.ledger_id(), msg_id.entry_id())
    there = (ref.ledger_id(), ref.entry_id())
    if here != there:
        return -1 if here < there else 1
    a, b = msg_id.batch_index(), ref.batch_index()
    if a < 0 or b < 0 or a == b:
        return 0
    return -1 if a < b else 1


def after_start(msg_id: MessageId, start: MessageId, inclusive: bool) -> bool:
    """Is ``msg_id`` past the start (at it, when ``inclusive``)?"""
    order = compare(msg_id, start)
    return order > 0 or (order == 0 and inclusive)


def _last_of_entry(msg_id: MessageId) -> bool:
    return msg_id.batch_index() < 0 or msg_id.batch_index() >= msg_id.batch_size() - 1


def before_last(msg_id: MessageId, last: MessageId) -> tuple[bool, bool]:
    """(take it, done) against the inclusive end ``last``.

    Done once ``msg_id`` is ``last`` (for an entry-wide ``last``: the final message of
    that entry) or anything after it.
    """
    order = compare(msg_id, last)
    if order < 0:
        return True, False
    if order > 0:
        return False, True
    if last.batch_index() < 0:
        return True, _last_of_entry(msg_id)
    return True, True


def before_end(msg_id: MessageId, end: MessageId) -> bool:
    """Is ``msg_id`` before the exclusive end ``end`` (an entry-wide ``end`` excludes it all)?"""
    return compare(msg_id, end) < 0


def entry_of(msg_id: MessageId) -> MessageId:
    """The start position that makes the broker deliver ``msg_id``'s entry first."""
    return MessageId(-1, msg_id.ledger_id(), msg_id.entry_id())


class ReadRange:
    """The messages one task keeps: between its start and end ids and publish times.

    ``select`` takes messages in the order they arrive. Whole entries strictly inside the
    id range are decided once per entry; only the entries holding the start or the end are
    looked at message by message.
    """

    def __init__(self, start: MessageId | None, start_inclusive: bool, last: MessageId,
                 end: MessageId | None = None, start_time: int | None = None,
                 end_time: int | None = None) -> None:
        self.start = start
        self.start_inclusive = start_inclusive
        self.last = last
        self.end = end
        self.start_time = start_time
        self.end_time = end_time
        self._low = (start.ledger_id(), start.entry_id()) if start is not None else None
        high = (last.ledger_id(), last.entry_id())
        if end is not None:
            high = min(high, (end.ledger_id(), end.entry_id()))
        self._high = high

    def _published_in_range(self, published: int) -> bool:
        return ((self.start_time is None or published >= self.start_time)
                and (self.end_time is None or published < self.end_time))

    def _one(self, msg: Message) -> tuple[bool, bool]:
        """(keep it, done) for a message of an entry at the edge of the range."""
        mid = msg.message_id()
        if self.end is not None and not before_end(mid, self.end):
            return False, True
        take, done = before_last(mid, self.last)
        if self.start is not None and not after_start(mid, self.start, self.start_inclusive):
            take = False
        return take, done

    def takes_whole(self, entry: EntryInfo) -> bool:
        """Is every message of ``entry`` in range (so it needs no look message by message)?"""
        key = (entry.ledger_id, entry.entry_id)
        return ((self._low is None or key > self._low) and key < self._high
                and self._published_in_range(entry.metadata.publish_time))

    def select(self, msgs: list[Message]) -> tuple[list[Message], bool]:
        """The messages of ``msgs`` in range, and whether the range's end has been reached."""
        kept: list[Message] = []
        for entry, group in groupby(msgs, Message.entry):
            published = self._published_in_range(entry.metadata.publish_time)
            key = (entry.ledger_id, entry.entry_id)
            if (self._low is None or key > self._low) and key < self._high:
                if published:
                    kept.extend(group)
                continue
            for msg in group:
                take, done = self._one(msg)
                if take and published:
                    kept.append(msg)
                if done:
                    return kept, True
        return kept, False


# --- splitting a range into pieces ----------------------------------------------------------------


@dataclass(frozen=True)
class Bounds:
    """One read's ids: ``start`` (None: the earliest message), ``last`` (inclusive), ``end``
    (exclusive, when set), as ``ReadRange`` takes them."""

    start: MessageId | None
    start_inclusive: bool
    last: MessageId
    end: MessageId | None = None


def entry_span(bounds: Bounds, first: MessageId | None) -> tuple[int, int, int] | None:
    """(ledger, first entry, last entry) of the entries ``bounds`` may read, when they lie in
    one ledger; None when they span ledgers, are empty, or the start is unknown.

    ``first`` is the first message still stored, needed when ``bounds.start`` is None.
    """
    low = bounds.start if bounds.start is not None else first
    if low is None:
        return None
    high = (bounds.last.ledger_id(), bounds.last.entry_id())
    end = bounds.end
    if end is not None:
        # An entry-wide end excludes its entry; one with a batch index keeps part of it.
        end_key = (end.ledger_id(), end.entry_id() - (1 if end.batch_index() < 0 else 0))
        high = min(high, end_key)
    ledger, low_entry = low.ledger_id(), low.entry_id()
    if ledger != high[0] or ledger < 0 or low_entry < 0 or high[1] < low_entry:
        return None
    return ledger, low_entry, high[1]


def split_entries(low: int, high: int, pieces: int) -> list[int]:
    """Boundaries ``b[0] = low < b[1] < ... < b[k] = high + 1`` cutting the entries
    ``low..high`` into ``k = min(pieces, entries)`` runs ``b[i]..b[i+1]-1`` of nearly
    equal length."""
    count = high - low + 1
    if count < 1:
        raise ValueError(f"no entries between {low} and {high}")
    pieces = max(1, min(pieces, count))
    return [low + count * i // pieces for i in range(pieces + 1)]


def split_counts(sizes: list[int], total: int) -> list[int]:
    """How many pieces each range of ``sizes`` entries is cut into so that there are
    ``total`` pieces in all, as near proportional to the sizes as whole numbers allow.

    Every range gets at least one piece (so the sum exceeds ``total`` when there are more
    ranges than that) and at most one per entry (so it is short of ``total`` when there
    are fewer entries). Each further piece goes to the range whose pieces are largest.
    """
    counts = [1] * len(sizes)
    heap: list[tuple[float, int]] = [(-float(size), index)
                                     for index, size in enumerate(sizes) if size > 1]
    heapq.heapify(heap)
    spare = total - len(sizes)
    while spare > 0 and heap:
        _, index = heapq.heappop(heap)
        counts[index] += 1
        spare -= 1
        if counts[index] < sizes[index]:
            heapq.heappush(heap, (-sizes[index] / counts[index], index))
    return counts


def split_range(bounds: Bounds, first: MessageId | None, pieces: int) -> list[Bounds]:
    """``bounds`` cut into up to ``pieces`` consecutive reads of whole entries (module
    docstring); ``[bounds]`` when ``entry_span`` finds no single-ledger span to cut."""
    span = entry_span(bounds, first)
    if span is None or pieces <= 1:
        return [bounds]
    ledger, low, high = span
    cuts = split_entries(low, high, pieces)
    out: list[Bounds] = []
    for i in range(len(cuts) - 1):
        start, inclusive = ((bounds.start, bounds.start_inclusive) if i == 0
                            else (MessageId(-1, ledger, cuts[i]), True))
        if i == len(cuts) - 2:
            out.append(Bounds(start, inclusive, bounds.last, bounds.end))
        else:
            out.append(Bounds(start, inclusive, MessageId(-1, ledger, cuts[i + 1] - 1),
                              MessageId(-1, ledger, cuts[i + 1])))
    return out
