"""Acknowledgement grouping and negative-acknowledgement timing for one consumer.

``AckGroupingTracker`` collects acknowledgements and sends them together, like the official
clients: at the latest ``max_delay`` seconds after the first one (100 ms) or as soon as
``max_size`` (1000) are waiting; with ``max_delay`` 0 each one goes at once. Individual acks
of whole entries go as one ACK command listing every id; partial acks of batches go with an
``ack_set`` (the bits of the batch positions still unacknowledged) when batch-index
acknowledgement is on; a cumulative ack keeps only the highest position.

``NegativeAckTracker`` remembers negatively acknowledged entries and asks for their
redelivery (REDELIVER_UNACKNOWLEDGED_MESSAGES with their ids) once ``delay`` has passed.

Both are sans-IO apart from the event loop's timer: they call a ``send`` function with what to
send and never touch a connection themselves.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from protoframe.generated.pulsar import pulsar_api as pb

__all__ = ["AckGroupingTracker", "NegativeAckTracker", "ack_set_words"]

Position = tuple[int, int]  # (ledger id, entry id)
# Individual entries, partial batch acks as (ledger, entry) -> ack_set words, cumulative ack.
SendAcks = Callable[
    [list[Position], dict[Position, list[int]], "tuple[int, int, list[int]] | None"], None]


def ack_set_words(unacked: bytearray | None, size: int) -> list[int]:
    """The ``ack_set`` of a batch: bit i set while position i is still unacknowledged.

    ``unacked`` holds one flag per position, nonzero once that position is acknowledged
    (None: nothing acknowledged yet). Words are signed 64-bit, least significant bit first,
    as Java's ``BitSet.toLongArray`` gives them.
    """
    bits = 0
    for i in range(size):
        if unacked is None or not unacked[i]:
            bits |= 1 << i
    words: list[int] = []
    while bits:
        word = bits & 0xFFFF_FFFF_FFFF_FFFF
        words.append(word - (1 << 64) if word >= 1 << 63 else word)
        bits >>= 64
    return words


class AckGroupingTracker:
    """Collects acks for one consumer and hands them to ``send`` in groups."""

    def __init__(self, send: SendAcks, *, max_size: int = 1000, max_delay: float = 0.1) -> None:
        self._send = send
        self.max_size = max_size
        self.max_delay = max_delay
        self._individual: list[Position] = []
        self._partial: dict[Position, tuple[bytearray, int]] = {}
        self._cumulative: tuple[int, int, list[int]] | None = None
        self._last_cumulative: tuple[int, int] = (-1, -1)
        self._timer: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        return len(self._individual) + len(self._partial) + (self._cumulative is not None)

    def add(self, ledger_id: int, entry_id: int) -> None:
        """Acknowledge a whole entry."""
        individual = self._individual
        individual.append((ledger_id, entry_id))
        if len(individual) >= self.max_size:
            self.flush()
        elif self._timer is None:
            self._schedule()

    def add_partial(self, ledger_id: int, entry_id: int, acked: bytearray, size: int) -> None:
        """Acknowledge some positions of a batch: ``acked`` holds a flag per position (read
        when the group is sent, so later acks of the same batch cost nothing more)."""
        self._partial[(ledger_id, entry_id)] = (acked, size)
        if len(self) >= self.max_size:
            self.flush()
        elif self._timer is None:
            self._schedule()

    def add_cumulative(self, ledger_id: int, entry_id: int, ack_set: list[int] | None = None
                       ) -> None:
        """Acknowledge everything up to and including an entry (or, with ``ack_set``, up to
        some positions of it)."""
        current = self._cumulative
        if current is None or (ledger_id, entry_id) >= current[:2]:
            self._cumulative = (ledger_id, entry_id, ack_set or [])
        if self._timer is None:
            self._schedule()

    def is_duplicate(self, ledger_id: int, entry_id: int) -> bool:
        """True if a cumulative ack already covers this entry."""
        return (ledger_id, entry_id) <= self._last_cumulative

    def _schedule(self) -> None:
        if self.max_delay <= 0:
            # No group time, as in the official clients: every acknowledgement goes at once.
            self.flush()
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._timer = loop.call_later(self.max_delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self.flush()

    def flush(self) -> None:
        """Send everything collected now."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        individual, partial, cumulative = self._individual, self._partial, self._cumulative
        if not individual and not partial and cumulative is None:
            return
        self._individual, self._partial, self._cumulative = [], {}, None
        for pos in individual:
            partial.pop(pos, None)
        ack_sets = {pos: ack_set_words(acked, size) for pos, (acked, size) in partial.items()}
        if cumulative is not None and cumulative[:2] > self._last_cumulative and \
                not cumulative[2]:
            self._last_cumulative = cumulative[:2]
        self._send(individual, ack_sets, cumulative)

    def clear(self) -> None:
        """Drop everything collected (after a seek, for instance)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._individual, self._partial, self._cumulative = [], {}, None
        self._last_cumulative = (-1, -1)


def build_ack_commands(consumer_id: int, individual: list[Position],
                       partial: dict[Position, list[int]],
                       cumulative: tuple[int, int, list[int]] | None,
                       partition: int = -1) -> list[pb.CommandAck]:
    """The ACK command bodies for one flush of an ``AckGroupingTracker``."""
    out: list[pb.CommandAck] = []
    ids = [pb.MessageIdData(ledgerId=ledger, entryId=entry) for ledger, entry in individual]
    ids.extend(pb.MessageIdData(ledgerId=ledger, entryId=entry, ack_set=words)
               for (ledger, entry), words in partial.items())
    if ids:
        out.append(pb.CommandAck(consumer_id=consumer_id,
                                 ack_type=pb.CommandAck.AckType.Individual, message_id=ids))
    if cumulative is not None:
        ledger, entry, words = cumulative
        out.append(pb.CommandAck(
            consumer_id=consumer_id, ack_type=pb.CommandAck.AckType.Cumulative,
            message_id=[pb.MessageIdData(ledgerId=ledger, entryId=entry, ack_set=words or None)]))
    return out


class NegativeAckTracker:
    """Entries to redeliver after ``delay`` seconds; ``send`` gets their positions."""

    def __init__(self, send: Callable[[list[Position]], None], delay: float = 60.0) -> None:
        self._send = send
        self.delay = delay
        self._due: dict[Position, float] = {}
        self._timer: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        return len(self._due)

    def add(self, ledger_id: int, entry_id: int, delay: float | None = None) -> None:
        """Redeliver after ``delay`` seconds (a backoff's), or after the tracker's own."""
        loop = asyncio.get_running_loop()
        wait = self.delay if delay is None else delay
        due = loop.time() + wait
        self._due[(ledger_id, entry_id)] = due
        if self._timer is None:
            self._timer = loop.call_later(wait, self._on_timer)
        elif due < self._timer.when():
            # A shorter backoff than the one the timer waits for.
            self._timer.cancel()
            self._timer = loop.call_later(wait, self._on_timer)

    def remove(self, ledger_id: int, entry_id: int) -> None:
        self._due.pop((ledger_id, entry_id), None)

    def _on_timer(self) -> None:
        self._timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        # Entries due within a third of the delay go now too, as the Java client's timer does.
        slack = min(self.delay / 3, 0.1)
        ready = [pos for pos, due in self._due.items() if due <= now + slack]
        for pos in ready:
            del self._due[pos]
        if self._due:
            soonest = min(self._due.values())
            self._timer = loop.call_later(max(soonest - now, 0.001), self._on_timer)
        if ready:
            self._send(ready)

    def flush(self) -> None:
        """Ask for every remembered entry now."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        ready, self._due = list(self._due), {}
        if ready:
            self._send(ready)

    def clear(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._due.clear()
