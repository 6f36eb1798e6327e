"""Subscriptions: cursors (mark-delete position plus individually acknowledged entries), the
consumers attached to them, and dispatch under FLOW permits.

Positions are entry ids within the topic's single ledger. ``mark_delete`` is the highest entry
id up to which everything is acknowledged; ``acked`` holds the entries above it acknowledged
out of order and ``partial`` the batches acknowledged message by message (bit set = still to
be acknowledged, as Pulsar's ack_set words have it).
"""

from __future__ import annotations

import asyncio
import heapq
import struct
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from protoframe.generated.pulsar.pulsar_api import CommandSubscribe

from .delayed import DelayedIndex, deliver_at_of
from .entries import Entry, EntryLog
from .key_shared import HashRing, StickyRanges

SubType = CommandSubscribe.SubType
_WORD = (1 << 64) - 1


class ConsumerBusy(Exception):
    """The subscription cannot take another consumer (exclusive, or of another type)."""


class DeliverySink(Protocol):
    """Where a consumer's messages go: the session of the connection it lives on."""

    def deliver(self, consumer: Consumer, entry: Entry, redelivery_count: int,
                ack_set: list[int]) -> None: ...

    def active_consumer_change(self, consumer: Consumer, is_active: bool) -> None: ...

    def force_close(self, consumer: Consumer) -> None:
        """Close the consumer from the broker's side (CLOSE_CONSUMER); the client reconnects."""


@dataclass(eq=False)
class Consumer:
    """A consumer as the broker sees it: one (connection, consumer_id) on a subscription."""

    sink: DeliverySink
    consumer_id: int
    subscription: Subscription
    name: str = ""
    priority: int = 0
    permits: int = 0
    pending: set[int] = field(default_factory=set)  # entry ids delivered and not acked
    hash_ranges: list[tuple[int, int]] = field(default_factory=list)  # Key_Shared STICKY
    sticky: bool = False  # Key_Shared: STICKY (its own ranges), else AUTO_SPLIT (the ring)
    active: bool = False  # Failover: this consumer is the one receiving
    # Its connection's output buffer is over the high-water mark: no dispatch to it, permits
    # or not, until the session says the buffer has drained (and dispatches again).
    paused: bool = False

    @property
    def ready(self) -> bool:
        return self.permits > 0 and not self.paused


def _now_ms() -> int:
    return int(time.time() * 1000)


def words_for(num_messages: int) -> int:
    """How many 64-bit ack-set words a batch of ``num_messages`` needs."""
    return (num_messages + 63) // 64


def words_to_mask(words: Iterable[int]) -> int:
    """The bit set an ack set's words (int64 on the wire, least significant word first) stand
    for. Linear in the number of words: they are packed once and read as one integer (ORing
    each word in at its shift costs a copy of the growing integer per word)."""
    words = list(words)
    return int.from_bytes(struct.pack(f"<{len(words)}Q", *(w & _WORD for w in words)),
                          "little")


def mask_to_words(mask: int) -> list[int]:
    """The ack-set words of a bit set, as int64, with no trailing zero words."""
    count = words_for(mask.bit_length())
    return list(struct.unpack(f"<{count}q", mask.to_bytes(8 * count, "little")))


class Subscription:
    """One subscription on one topic."""

    def __init__(self, topic: EntryLog, name: str, sub_type: SubType, mark_delete: int,
                 *, durable: bool = True) -> None:
        self.topic = topic
        self.name = name
        self.sub_type = sub_type
        self.durable = durable
        self.mark_delete = mark_delete
        self.acked: set[int] = set()
        self.partial: dict[int, int] = {}
        self.read_pos = mark_delete + 1
        self._replay: list[int] = []  # heap of entry ids to deliver again
        self._replay_set: set[int] = set()
        self.consumers: list[Consumer] = []
        self.pending: dict[int, Consumer] = {}
        self.redelivery: dict[int, int] = {}
        # SUBSCRIBE's subscription_properties, kept from the subscribe that created it.
        self.properties: dict[str, str] = {}
        self._rr = 0
        self._dispatching = False
        self._ring: HashRing[Consumer] = HashRing()
        self.delayed = DelayedIndex()  # Shared, Key_Shared: entries held until their time
        self._due: deque[int] = deque()  # held entries whose time came, in that order
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0
        self._sticky: StickyRanges[Consumer] = StickyRanges()

    # --- consumers -------------------------------------------------------------------------

    def check_consumer(self, sub_type: SubType) -> None:
        """Raise ``ConsumerBusy`` if a consumer of ``sub_type`` cannot attach now."""
        if self.consumers:
            if sub_type != self.sub_type:
                raise ConsumerBusy(f"subscription {self.name!r} is of type "
                                   f"{self.sub_type.name}, not {sub_type.name}")
            if sub_type == SubType.Exclusive:
                raise ConsumerBusy(f"exclusive consumer is already connected to {self.name!r}")

    def check_key_shared(self, sticky: bool, ranges: list[tuple[int, int]]) -> None:
        """Raise ``ConsumerBusy`` if a Key_Shared consumer of the other mode is attached, or
        ``AssignError`` if STICKY ``ranges`` are empty, malformed or taken."""
        if self.sub_type != SubType.Key_Shared or not self.consumers:
            if sticky:
                StickyRanges[Consumer]().check(ranges)
            return
        if any(c.sticky != sticky for c in self.consumers):
            raise ConsumerBusy(f"subscription {self.name!r} has Key_Shared consumers of "
                               f"another mode than {'STICKY' if sticky else 'AUTO_SPLIT'}")
        if sticky:
            self._sticky.check(ranges)

    def add_consumer(self, consumer: Consumer, sub_type: SubType) -> None:
        """Attach a consumer (after ``check_consumer`` and after its SUCCESS went out)."""
        self.check_consumer(sub_type)
        if sub_type == SubType.Key_Shared:
            self.check_key_shared(consumer.sticky, consumer.hash_ranges)
            if consumer.sticky:
                self._sticky.add(consumer, consumer.name, consumer.hash_ranges)
            else:
                self._ring.add(consumer, consumer.name)
        self.sub_type = sub_type
        self.consumers.append(consumer)
        if sub_type == SubType.Failover:
            self._elect()

    def remove_consumer(self, consumer: Consumer) -> None:
        """Detach a consumer; what it had not acknowledged is delivered again (to others)."""
        if consumer not in self.consumers:
            return
        self.consumers.remove(consumer)
        self._ring.remove(consumer)
        self._sticky.remove(consumer)
        self._return_pending(consumer, list(consumer.pending), count=True)
        consumer.permits = 0
        if self.sub_type == SubType.Failover:
            self._elect()
        self.dispatch()

    @property
    def active_consumer(self) -> Consumer | None:
        if not self.consumers:
            return None
        if self.sub_type == SubType.Failover:
            for consumer in self.consumers:
                if consumer.active:
                    return consumer
            return None
        return self.consumers[0]

    def _elect(self) -> None:
        """Failover: pick the active consumer by priority, then name, spread over partitions."""
        if not self.consumers:
            return
        ordered = sorted(self.consumers, key=lambda c: (c.priority, c.name))
        chosen = ordered[max(self.topic.partition, 0) % len(ordered)]
        for consumer in self.consumers:
            was = consumer.active
            consumer.active = consumer is chosen
            if was and not consumer.active:
                # The consumer that lost the active role gives back what it did not acknowledge.
                self._return_pending(consumer, list(consumer.pending), count=False)
        for consumer in self.consumers:
            consumer.sink.active_consumer_change(consumer, consumer.active)

    # --- flow and dispatch -----------------------------------------------------------------

    def flow(self, consumer: Consumer, permits: int) -> None:
        consumer.permits += permits
        self.dispatch()

    def dispatch(self) -> None:
        """Send what consumers have permits for: redeliveries first, then new entries."""
        if self._dispatching or not self.consumers:
            return
        self._dispatching = True
        try:
            if len(self.delayed):
                self._due.extend(self.delayed.due(_now_ms()))
            if self.sub_type == SubType.Shared:
                self._dispatch_shared()
            elif self.sub_type == SubType.Key_Shared:
                self._dispatch_key_shared()
            else:
                consumer = self.active_consumer
                while consumer is not None and consumer.ready:
                    entry = self._next_entry()
                    if entry is None:
                        break
                    self._deliver(consumer, entry)
        finally:
            self._dispatching = False
        if len(self.delayed):
            self._arm_timer()

    def _arm_timer(self) -> None:
        """Dispatch again when the first held entry falls due."""
        due = self.delayed.next_due
        if due is None or (self._timer is not None and self._timer_at <= due):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a unit test driving dispatch by hand): the next dispatch sees it
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = due
        self._timer = loop.call_later(max(0.0, (due - _now_ms()) / 1000), self._timer_fired)

    def _timer_fired(self) -> None:
        # With no consumer the timer stops: the next consumer's FLOW dispatches (and re-arms).
        self._timer = None
        self.dispatch()

    def _dispatch_shared(self) -> None:
        ready = [c for c in self.consumers if c.ready]
        while ready:
            entry = self._next_entry()
            if entry is None:
                return
            consumer = ready[self._rr % len(ready)]
            self._rr += 1
            self._deliver(consumer, entry)
            if not consumer.ready:
                ready.remove(consumer)

    def _dispatch_key_shared(self) -> None:
        while True:
            entry = self._peek_entry()
            if entry is None:
                return
            consumer = self.consumer_for_key_hash(entry.key_hash)
            if consumer is None or not consumer.ready:
                return  # keep per-key order: wait for that consumer's permits (or buffer)
            self._take(entry)
            self._deliver(consumer, entry)

    def consumer_for_key_hash(self, key_hash: int) -> Consumer | None:
        """The Key_Shared consumer a key with this hash (``key_shared.sticky_key_hash``) goes
        to (None: no consumer's STICKY ranges hold it)."""
        if len(self._sticky):
            return self._sticky.select(key_hash)
        return self._ring.select(key_hash)

    def _skip(self, entry_id: int) -> bool:
        return entry_id <= self.mark_delete or entry_id in self.acked or entry_id in self.pending

    def _peek_entry(self) -> Entry | None:
        topic = self.topic
        while self._due:
            entry_id = self._due[0]
            entry = None if self._skip(entry_id) else topic.entry(entry_id)
            if entry is not None:
                return entry
            self._due.popleft()
        while self._replay:
            entry_id = self._replay[0]
            entry = None if self._skip(entry_id) else topic.entry(entry_id)
            if entry is not None:
                return entry
            heapq.heappop(self._replay)
            self._replay_set.discard(entry_id)
        if self.read_pos < topic.first_id:
            self.read_pos = topic.first_id
        delays = self.sub_type in (SubType.Shared, SubType.Key_Shared)
        while self.read_pos <= topic.durable_id:
            entry_id = self.read_pos
            entry = None if self._skip(entry_id) else topic.entry(entry_id)
            if entry is not None:
                deliver_at = deliver_at_of(entry) if delays else 0
                if not deliver_at or deliver_at <= _now_ms():
                    return entry
                if not self.delayed.hold(entry_id, deliver_at):
                    return None  # the index is full: read on once held entries fall due
            self.read_pos += 1
        return None

    def _next_entry(self) -> Entry | None:
        entry = self._peek_entry()
        if entry is not None:
            self._take(entry)
        return entry

    def _take(self, entry: Entry) -> None:
        """Move past the entry ``_peek_entry`` gave."""
        if self._due and self._due[0] == entry.entry_id:
            self._due.popleft()
        elif self._replay and self._replay[0] == entry.entry_id:
            heapq.heappop(self._replay)
            self._replay_set.discard(entry.entry_id)
        else:
            self.read_pos = entry.entry_id + 1

    def _deliver(self, consumer: Consumer, entry: Entry) -> None:
        entry_id = entry.entry_id
        remaining = self.partial.get(entry_id)
        if remaining is None:
            ack_set: list[int] = []
            consumer.permits -= entry.num_messages
        else:
            ack_set = mask_to_words(remaining)
            consumer.permits -= remaining.bit_count()
        self.pending[entry_id] = consumer
        consumer.pending.add(entry_id)
        consumer.sink.deliver(consumer, entry, self.redelivery.get(entry_id, 0), ack_set)

    def _return_pending(self, consumer: Consumer, entry_ids: Iterable[int], *,
                        count: bool) -> None:
        for entry_id in entry_ids:
            if self.pending.get(entry_id) is consumer:
                del self.pending[entry_id]
            consumer.pending.discard(entry_id)
            if self._skip(entry_id):
                continue
            if count:
                self.redelivery[entry_id] = self.redelivery.get(entry_id, 0) + 1
            if entry_id not in self._replay_set and entry_id < self.read_pos:
                heapq.heappush(self._replay, entry_id)
                self._replay_set.add(entry_id)

    def redeliver(self, consumer: Consumer, entry_ids: list[int] | None) -> None:
        """REDELIVER_UNACKNOWLEDGED_MESSAGES: the listed entries, or all the consumer holds."""
        if entry_ids is None or self.sub_type not in (SubType.Shared, SubType.Key_Shared):
            entry_ids = sorted(consumer.pending)
        else:
            entry_ids = [e for e in entry_ids if e in consumer.pending]
        self._return_pending(consumer, entry_ids, count=True)
        self.dispatch()

    # --- acknowledgements ------------------------------------------------------------------

    def ack(self, consumer: Consumer | None, entry_id: int, ack_set: list[int]) -> bool:
        """Individual ack of one entry (or of some messages of a batch); True if it changed."""
        if entry_id <= self.mark_delete or entry_id in self.acked:
            return False
        if entry_id > self.topic.durable_id:
            return False  # not a message this topic has delivered
        if ack_set and any(ack_set):
            entry = self.topic.entry(entry_id)
            if entry is not None and entry.is_batch:
                full = (1 << entry.num_messages) - 1
                remaining = self.partial.get(entry_id, full) & words_to_mask(ack_set) & full
                if remaining:
                    self.partial[entry_id] = remaining
                    return True
        self._acked(entry_id)
        self._advance()
        return True

    def ack_cumulative(self, entry_id: int, ack_set: list[int]) -> bool:
        """Cumulative ack: everything up to ``entry_id`` (that entry partly, with an ack_set)."""
        entry_id = min(entry_id, self.topic.durable_id)
        if entry_id <= self.mark_delete:
            return False
        upto = entry_id
        if ack_set and any(ack_set):
            upto = entry_id - 1
            self.ack(None, entry_id, ack_set)
        for acked in [e for e in self.pending if e <= upto]:
            self._release(acked)
        for acked in [e for e in self.acked if e <= upto]:
            self.acked.discard(acked)
        for acked in [e for e in self.partial if e <= upto]:
            del self.partial[acked]
        for acked in [e for e in self.redelivery if e <= upto]:
            del self.redelivery[acked]
        if upto > self.mark_delete:
            self.mark_delete = upto
        self._advance()
        return True

    def _release(self, entry_id: int) -> None:
        holder = self.pending.pop(entry_id, None)
        if holder is not None:
            holder.pending.discard(entry_id)

    def _acked(self, entry_id: int) -> None:
        self.acked.add(entry_id)
        self.partial.pop(entry_id, None)
        self.redelivery.pop(entry_id, None)
        self._release(entry_id)

    def _advance(self) -> None:
        acked = self.acked
        mark = self.mark_delete
        while mark + 1 in acked:
            mark += 1
            acked.discard(mark)
        self.mark_delete = mark
        if self.read_pos <= mark:
            self.read_pos = mark + 1

    # --- seek and restore ------------------------------------------------------------------

    def reset(self, entry_id: int) -> None:
        """Move the cursor so that ``entry_id`` is the next entry delivered (SEEK)."""
        entry_id = max(entry_id, self.topic.first_available_id)
        self.mark_delete = entry_id - 1
        self.read_pos = entry_id
        self.acked.clear()
        self.partial.clear()
        self.redelivery.clear()
        self._replay.clear()
        self._replay_set.clear()
        self.delayed.clear()
        self._due.clear()
        self.pending.clear()
        for consumer in self.consumers:
            consumer.pending.clear()

    def restore(self, mark_delete: int, acked: Iterable[int], partial: dict[int, int]) -> None:
        """Set the cursor from the log."""
        self.mark_delete = mark_delete
        self.acked = {e for e in acked if e > mark_delete}
        self.partial = {e: m for e, m in partial.items() if e > mark_delete}
        self.read_pos = mark_delete + 1
        self._advance()

    @property
    def backlog(self) -> int:
        """Entries not yet acknowledged (approximate: batches count once)."""
        return max(0, self.topic.last_id - self.mark_delete - len(self.acked))
