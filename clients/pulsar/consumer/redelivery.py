"""The ack timeout: entries handed to the application and not acknowledged within
``unacked_messages_timeout_ms`` are asked for again.

As in the official clients the clock starts when the application takes a message (not when it
is queued), the check runs every ``tick`` (so a message comes back between ``timeout`` and
``timeout + tick`` after it was taken), and an acknowledgement cancels it. What to do with the
expired entries (dead letters, REDELIVER_UNACKNOWLEDGED_MESSAGES) is the ``expired``
callback's: this module only keeps time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

from protoframe.clients.pulsar.acks import Position
from protoframe.clients.pulsar.message import EntryOwner, Message

__all__ = ["Expired", "UnackedTracker"]

# Per topic consumer: its expired entries and the messages of each handed out.
Expired = dict[EntryOwner, dict[Position, list[Message[Any]]]]


class UnackedTracker:
    """Entries taken and not acknowledged, with the time each was first taken."""

    def __init__(self, timeout: float, tick: float,
                 expired: Callable[[Expired], None]) -> None:
        self.timeout = timeout
        self.tick = max(min(tick, timeout), 0.001)
        self._expired = expired
        self._due: dict[EntryOwner, dict[Position, tuple[float, list[Message[Any]]]]] = {}
        self._timer: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        return sum(len(entries) for entries in self._due.values())

    def add(self, msg: Message[Any]) -> None:
        info = msg._entry
        owner = info.consumer
        if owner is None:
            return
        entries = self._due.setdefault(owner, {})
        key = (info.ledger_id, info.entry_id)
        known = entries.get(key)
        if known is not None:
            known[1].append(msg)
            return
        loop = asyncio.get_running_loop()
        entries[key] = (loop.time() + self.timeout, [msg])
        if self._timer is None:
            self._timer = loop.call_later(self.tick, self._on_tick)

    def acked(self, owner: EntryOwner, positions: Iterable[Position]) -> None:
        entries = self._due.get(owner)
        if entries:
            for pos in positions:
                entries.pop(pos, None)

    def acked_upto(self, owner: EntryOwner, position: Position) -> None:
        entries = self._due.get(owner)
        if entries:
            for pos in [p for p in entries if p <= position]:
                del entries[pos]

    def clear(self, owner: EntryOwner | None = None) -> None:
        """Forget ``owner``'s entries (all of them without one): they come again anyway."""
        if owner is None:
            self._due.clear()
        else:
            self._due.pop(owner, None)
        if not any(self._due.values()) and self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _on_tick(self) -> None:
        self._timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        expired: Expired = {}
        for owner, entries in self._due.items():
            late = [pos for pos, (due, _) in entries.items() if due <= now]
            if late:
                expired[owner] = {pos: entries.pop(pos)[1] for pos in late}
        if any(self._due.values()):
            self._timer = loop.call_later(self.tick, self._on_tick)
        if expired:
            self._expired(expired)
