"""Producer de-duplication: the highest sequence id stored per producer name, per topic.

A SEND whose sequence id is at or below the highest one already stored for its producer name is
a resend (after a reconnect, or by a restarted producer with the same name); it is acknowledged
with the id of the entry that holds the original, and not stored again. The state is rebuilt
from the log on restart, so it survives the broker.

As in Pulsar (``brokerDeduplicationProducerInactivityTimeoutMinutes``), the state of a producer
name that has had no producer connected for ``inactivity_timeout`` seconds is dropped: a client
that makes up a fresh name for every producer would otherwise grow it without end. A producer that
comes back under that name afterwards starts a new sequence.
"""

from __future__ import annotations

import bisect
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

# How many recent entries per producer name are remembered to answer resends with their
# original ids; clients resend only what is still in flight, far fewer than this.
WINDOW = 4096
UNKNOWN_ENTRY = -1
DEFAULT_INACTIVITY_TIMEOUT = 6 * 3600.0


@dataclass(slots=True)
class _ProducerSeq:
    highest: int = -1
    # (first sequence id, highest sequence id, entry id) of recent entries, in order.
    recent: deque[tuple[int, int, int]] = field(default_factory=lambda: deque(maxlen=WINDOW))


class DedupState:
    """Sequence ids of the producers of one topic."""

    def __init__(self, inactivity_timeout: float = DEFAULT_INACTIVITY_TIMEOUT,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._producers: dict[str, _ProducerSeq] = {}
        self.inactivity_timeout = inactivity_timeout
        self._clock = clock
        self._connected: dict[str, int] = {}  # name -> producers connected under it
        # Names without a connected producer, with the time they became inactive. Inserted in
        # time order (a name that goes inactive again moves to the end), so the ones to expire
        # are always at the front.
        self._inactive: dict[str, float] = {}
        # Told of each name that expires, so the log can record it (``storage.dedup_expired``).
        self.on_expire: Callable[[str], None] | None = None

    def __len__(self) -> int:
        """How many producer names have state."""
        return len(self._producers)

    def producer_connected(self, producer_name: str) -> None:
        self._connected[producer_name] = self._connected.get(producer_name, 0) + 1
        self._inactive.pop(producer_name, None)
        self.expire()

    def producer_disconnected(self, producer_name: str) -> None:
        count = self._connected.get(producer_name, 0) - 1
        if count > 0:
            self._connected[producer_name] = count
            return
        self._connected.pop(producer_name, None)
        if producer_name in self._producers:
            self._inactive.pop(producer_name, None)
            self._inactive[producer_name] = self._clock()
        self.expire()

    def expire(self) -> int:
        """Drop the state of names inactive for longer than the timeout; how many went."""
        now = self._clock()
        dropped = 0
        inactive = self._inactive
        while inactive:
            name, since = next(iter(inactive.items()))
            if now - since < self.inactivity_timeout:
                break
            del inactive[name]
            self._producers.pop(name, None)
            dropped += 1
            if self.on_expire is not None:
                self.on_expire(name)
        return dropped

    def forget(self, producer_name: str) -> None:
        """Drop a name's state as its expiry did (replaying the log's record of it)."""
        self._producers.pop(producer_name, None)
        self._inactive.pop(producer_name, None)

    def _new(self, producer_name: str) -> _ProducerSeq:
        seq = self._producers[producer_name] = _ProducerSeq()
        if producer_name not in self._connected:
            # Known from the log (recovery) rather than from a connected producer: inactive
            # from now on.
            self._inactive[producer_name] = self._clock()
        return seq

    def last_sequence_id(self, producer_name: str) -> int:
        """Highest sequence id stored for ``producer_name``; -1 if none."""
        seq = self._producers.get(producer_name)
        return -1 if seq is None else seq.highest

    def duplicate_of(self, producer_name: str, sequence_id: int) -> int | None:
        """None if ``sequence_id`` is new; else the entry id holding the original.

        The entry id is ``UNKNOWN_ENTRY`` when the original is older than the window.
        """
        seq = self._producers.get(producer_name)
        if seq is None or sequence_id > seq.highest:
            return None
        recent = seq.recent
        index = bisect.bisect_right(recent, (sequence_id, 1 << 64, 1 << 64)) - 1
        if index >= 0:
            first, highest, entry_id = recent[index]
            if first <= sequence_id <= highest:
                return entry_id
        return UNKNOWN_ENTRY

    def record(self, producer_name: str, first: int, highest: int, entry_id: int) -> None:
        """Note that ``entry_id`` holds sequence ids ``first..highest`` of ``producer_name``."""
        seq = self._producers.get(producer_name)
        if seq is None:
            seq = self._new(producer_name)
        if highest > seq.highest:
            seq.highest = highest
        if not seq.recent or first > seq.recent[-1][0]:
            seq.recent.append((first, highest, entry_id))

    def snapshot(self) -> list[tuple[str, int, int, int, int]]:
        """(name, highest, first, last, entry id) of every entry each producer has in the
        window, oldest first, for the log: ``restore`` rebuilds the same window, so a resend
        after a second restart still gets its original's id."""
        out = []
        for name, seq in self._producers.items():
            if not seq.recent:
                out.append((name, seq.highest, -1, -1, UNKNOWN_ENTRY))
            for first, highest, entry_id in seq.recent:
                out.append((name, seq.highest, first, highest, entry_id))
        return out

    def restore(self, name: str, highest: int, first: int, last: int, entry_id: int) -> None:
        seq = self._producers.get(name)
        if seq is None:
            seq = self._new(name)
        seq.highest = max(seq.highest, highest)
        if entry_id != UNKNOWN_ENTRY and (not seq.recent or first > seq.recent[-1][0]):
            seq.recent.append((first, last, entry_id))
