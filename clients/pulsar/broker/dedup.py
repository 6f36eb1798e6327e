"""Producer de-duplication: the highest sequence id stored per producer name, per topic.

A SEND whose sequence id is at or below the highest one already stored for its producer name is
a resend (after a reconnect, or by a restarted producer with the same name); it is acknowledged
with the id of the entry that holds the original, and not stored again. The state is rebuilt
from the log on restart, so it survives the broker.
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass, field

# How many recent entries per producer name are remembered to answer resends with their
# original ids; clients resend only what is still in flight, far fewer than this.
WINDOW = 4096
UNKNOWN_ENTRY = -1


@dataclass(slots=True)
class _ProducerSeq:
    highest: int = -1
    # (first sequence id, highest sequence id, entry id) of recent entries, in order.
    recent: deque[tuple[int, int, int]] = field(default_factory=lambda: deque(maxlen=WINDOW))


class DedupState:
    """Sequence ids of the producers of one topic."""

    def __init__(self) -> None:
        self._producers: dict[str, _ProducerSeq] = {}

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
            seq = self._producers[producer_name] = _ProducerSeq()
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
            seq = self._producers[name] = _ProducerSeq()
        seq.highest = max(seq.highest, highest)
        if entry_id != UNKNOWN_ENTRY and (not seq.recent or first > seq.recent[-1][0]):
            seq.recent.append((first, last, entry_id))
