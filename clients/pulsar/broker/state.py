"""The broker's shared state: topics, partitioned-topic metadata, publishing and recovery.

Sessions (one per connection) call into this; it owns the storage and decides when stored
entries become visible to subscriptions (once persisted).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
import time
from collections.abc import Callable

from protoframe.generated.pulsar.pulsar_api import CommandSend, CommandSubscribe, MessageMetadata

from . import records as rec
from .dedup import DedupState
from .entries import Entry, EntryLog
from .limits import Limits
from .records import ENCODING_ERRORS
from .schemas import SchemaRegistry
from .storage import Storage, StorageError
from .subscriptions import Subscription, SubType
from .topics import (
    DEFAULT_RETENTION_BYTES,
    Topic,
    namespace_of,
    normalize_topic,
    partition_index,
    partition_name,
)

log = logging.getLogger(__name__)

InitialPosition = CommandSubscribe.InitialPosition
PublishCallback = Callable[[int, Exception | None], None]

_INT64_MAX = (1 << 63) - 1


def signed64(value: int) -> int:
    """A uint64 from the wire read as the int64 the clients mean (-1 for 2**64 - 1)."""
    return value - (1 << 64) if value >= 1 << 63 else value


class BrokerState:
    """Everything one broker holds, shared by its connections."""

    def __init__(self, storage: Storage | None = None, *, name_prefix: str = "protoframe",
                 retention_bytes: int = DEFAULT_RETENTION_BYTES, limits: Limits | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 schemas: SchemaRegistry | None = None) -> None:
        self.storage = storage if storage is not None else Storage()
        self.schemas = schemas if schemas is not None else SchemaRegistry()
        self.retention_bytes = retention_bytes
        self.limits = limits if limits is not None else Limits()
        self.clock = clock  # for deduplication state expiry; tests pass their own
        self.topics: dict[str, Topic] = {}
        self._by_ledger: dict[int, Topic] = {}
        self.partitioned: dict[str, int] = {}
        # Called with each topic's name as it is created (topic-list watchers).
        self.topic_listeners: list[Callable[[str], None]] = []
        self._next_ledger = 1
        # Generated producer names must not repeat across restarts: dedup state is per name.
        self._name_prefix = f"{name_prefix}-{secrets.token_hex(4)}"
        self._name_counter = itertools.count()
        self._to_dispatch: dict[Topic, None] = {}
        self._pump_scheduled = False
        self.messages_in = 0
        self.entries_in = 0

    # --- topics ----------------------------------------------------------------------------

    def topic(self, name: str) -> Topic:
        """The topic called ``name`` (fully qualified), created if it does not exist."""
        topic = self.topics.get(name)
        if topic is None:
            topic = self._new_topic(name, self._next_ledger)
            try:
                self.storage.topic_created(topic)  # first: nothing is held that is not stored
            except ENCODING_ERRORS as exc:
                raise StorageError(f"cannot store topic {name[:100]!r}: {exc}") from exc
            self._register(topic)
        return topic

    def _new_topic(self, name: str, ledger_id: int) -> Topic:
        topic = Topic(name=name, ledger_id=ledger_id, retention_bytes=self.retention_bytes,
                      dedup=DedupState(self.limits.dedup_inactivity_seconds, self.clock))
        storage = self.storage
        topic.dedup.on_expire = lambda producer_name: storage.dedup_expired(topic, producer_name)
        return topic

    def _add_topic(self, name: str, ledger_id: int) -> Topic:
        return self._register(self._new_topic(name, ledger_id))

    def _register(self, topic: Topic) -> Topic:
        name, ledger_id = topic.name, topic.ledger_id
        self.topics[name] = topic
        self._by_ledger[ledger_id] = topic
        self._next_ledger = max(self._next_ledger, ledger_id + 1)
        for listener in list(self.topic_listeners):
            listener(name)
        return topic

    def create_partitioned_topic(self, name: str, partitions: int) -> str:
        """Declare a partitioned topic (admin operation); returns its fully qualified name."""
        if partitions < 1:
            raise ValueError("a partitioned topic needs at least one partition")
        name = normalize_topic(name)
        if partition_index(name) >= 0:
            raise ValueError(f"{name} is a partition name")
        if self.partitioned.get(name) != partitions:
            try:
                self.storage.partitioned_topic_created(name, partitions)
            except ENCODING_ERRORS as exc:
                raise StorageError(f"cannot store partitioned topic {name[:100]!r}: "
                                   f"{exc}") from exc
            self.partitioned[name] = partitions
        for index in range(partitions):
            self.topic(partition_name(name, index))
        return name

    def update_partitioned_topic(self, name: str, partitions: int) -> str:
        """Grow a partitioned topic to ``partitions`` (admin operation, as Pulsar's
        ``updatePartitionedTopic``: the count can only increase)."""
        name = normalize_topic(name)
        current = self.partitioned.get(name)
        if current is None:
            raise ValueError(f"{name} is not a partitioned topic")
        if partitions < current:
            raise ValueError(f"{name} has {current} partitions: their number cannot shrink "
                             f"to {partitions}")
        return self.create_partitioned_topic(name, partitions)

    def partitions_of(self, name: str) -> int:
        """Partition count of a topic; 0 for a non-partitioned topic."""
        return self.partitioned.get(name, 0)

    def topics_of_namespace(self, namespace: str) -> list[str]:
        names = {t for t in self.topics if namespace_of(t) == namespace}
        for name, partitions in self.partitioned.items():
            if namespace_of(name) == namespace:
                names.update(partition_name(name, i) for i in range(partitions))
        return sorted(names)

    def new_producer_name(self) -> str:
        return f"{self._name_prefix}-{next(self._name_counter)}"

    # --- publishing ------------------------------------------------------------------------

    def publish(self, topic: Topic, producer_name: str, send: CommandSend,
                metadata: MessageMetadata, payload: bytes, done: PublishCallback) -> None:
        """Store one SEND's entry (unless it is a resend) and call ``done(entry_id, error)``
        once it is persisted; for a resend, with the original's entry id."""
        first = send.sequence_id
        # As Pulsar does, a batch counts as its first sequence id unless the producer says
        # what its highest is: batches need not hold consecutive ids (the official client's
        # key-based batching sends ids 0, 16, 32... in one batch and 1, 17, 33... in the next).
        highest = first
        if send.has_highest_sequence_id() and send.highest_sequence_id > first:
            highest = send.highest_sequence_id
        elif metadata.has_highest_sequence_id() and metadata.highest_sequence_id > first:
            highest = metadata.highest_sequence_id
        # Chunks of one message share its sequence id: only the last one counts for dedup.
        chunked = metadata.has_chunk_id() or send.is_chunk
        last_chunk = not chunked or metadata.chunk_id >= metadata.num_chunks_from_msg - 1
        if last_chunk:
            original = topic.dedup.duplicate_of(producer_name, first)
            if original is not None and original not in topic.failed_ids:
                log.debug("%s: duplicate sequence id %d from %s (entry %d)", topic.name, first,
                          producer_name, original)
                self.storage.commit(lambda error: done(original, error))
                return
        is_batch = metadata.has_num_messages_in_batch()
        key = metadata.ordering_key if metadata.has_ordering_key() else (
            metadata.partition_key.encode() if metadata.has_partition_key() else b"")
        entry = Entry(topic.next_entry_id, payload,
                      metadata.num_messages_in_batch if is_batch else 1, is_batch,
                      metadata.publish_time, key)
        # Stored first: an entry that cannot be encoded fails this SEND alone and leaves no
        # trace in memory (nothing served that a restart would not find).
        try:
            self.storage.entry_added(topic, entry, producer_name if last_chunk else "", first,
                                     highest)
        except ENCODING_ERRORS as exc:
            log.warning("%s: cannot store an entry from %.100r: %s", topic.name, producer_name,
                        exc)
            error = StorageError(f"cannot store the message: {exc}")
            self.storage.commit(lambda _: done(-1, error))
            return
        topic.add(entry)
        if last_chunk:
            topic.dedup.record(producer_name, first, highest, entry.entry_id)
        self.entries_in += 1
        self.messages_in += entry.num_messages
        entry_id = entry.entry_id

        def persisted(error: Exception | None) -> None:
            if error is None and entry_id > topic.durable_id:
                topic.durable_id = entry_id
                self.schedule_dispatch(topic)
            done(entry_id, error)

        self.storage.commit(persisted)

    # --- subscriptions ---------------------------------------------------------------------

    def subscription(self, topic: Topic, body: CommandSubscribe) -> Subscription:
        """The subscription SUBSCRIBE names, created at its initial position if new."""
        sub = topic.subscriptions.get(body.subscription)
        if sub is not None:
            return sub
        if body.start_message_id is not None:
            mark_delete = self._before(topic, body.start_message_id.ledgerId,
                                       body.start_message_id.entryId)
        elif body.initialPosition == InitialPosition.Earliest:
            mark_delete = topic.first_available_id - 1
        else:
            mark_delete = topic.last_id
        sub = Subscription(topic, body.subscription, body.subType, mark_delete,
                           durable=body.durable)
        sub.properties = {kv.key: kv.value for kv in body.subscription_properties}
        sub.delayed.limit = self.limits.max_delayed_messages
        if sub.durable:
            try:
                self.storage.check_cursor(sub)
            except ENCODING_ERRORS as exc:
                raise StorageError(f"cannot store subscription {sub.name[:100]!r}: "
                                   f"{exc}") from exc
        topic.subscriptions[sub.name] = sub
        self.storage.cursor_changed(sub)
        return sub

    def _before(self, topic: EntryLog, ledger: int, entry: int) -> int:
        """The mark-delete position that makes (ledger, entry) the next entry delivered."""
        ledger, entry = signed64(ledger), signed64(entry)
        if ledger < topic.ledger_id or entry < 0:
            return topic.first_available_id - 1
        if ledger > topic.ledger_id or entry >= _INT64_MAX:
            return topic.last_id
        return max(entry, topic.first_available_id) - 1

    def seek_position(self, topic: EntryLog, ledger: int, entry: int) -> int:
        return self._before(topic, ledger, entry) + 1

    def _topic_of(self, sub: Subscription) -> Topic:
        # A subscription reads its topic as an ``EntryLog`` (so that topics and subscriptions
        # do not import each other); the topic with its subscriptions is held here.
        return self._by_ledger[sub.topic.ledger_id]

    def delete_subscription(self, sub: Subscription) -> None:
        topic = self._topic_of(sub)
        if topic.subscriptions.get(sub.name) is sub:
            del topic.subscriptions[sub.name]
            if sub.durable:
                self.storage.subscription_deleted(topic, sub.name)

    def keep_subscription(self, sub: Subscription) -> None:
        """Register ``sub`` again if it was removed (a non-durable one whose consumers a seek
        closed); a subscription of the same name made since wins."""
        self._topic_of(sub).subscriptions.setdefault(sub.name, sub)

    def cursor_changed(self, sub: Subscription) -> None:
        self.storage.cursor_changed(sub)
        topic = self._topic_of(sub)
        if topic.trim():
            log.debug("%s: trimmed entries up to %d", topic.name, topic.first_id - 1)

    # --- dispatch --------------------------------------------------------------------------

    def schedule_dispatch(self, topic: Topic) -> None:
        """Dispatch newly persisted entries of ``topic`` once this event-loop tick is done."""
        self._to_dispatch[topic] = None
        if not self._pump_scheduled:
            self._pump_scheduled = True
            asyncio.get_running_loop().call_soon(self._pump)

    def _pump(self) -> None:
        self._pump_scheduled = False
        topics, self._to_dispatch = self._to_dispatch, {}
        for topic in topics:
            for sub in list(topic.subscriptions.values()):
                sub.dispatch()

    # --- recovery --------------------------------------------------------------------------

    def recover(self) -> None:
        """Rebuild the state from the storage's log (streamed), then compact the log.

        Raises ``storage.CorruptLogError`` when the log is damaged in the middle and the
        storage was not opened to repair it.
        """
        entries = records = 0
        orphans: dict[int, list[int]] = {}  # entries of ledgers whose topic record was lost
        named: dict[int, int] = {}  # highest entry id each ledger is known to have reached
        for record in self.storage.load():
            records += 1
            if isinstance(record, rec.EntryRecord):
                topic = self._by_ledger.get(record.ledger_id)
                if topic is None:
                    orphans.setdefault(record.ledger_id, []).append(record.entry_id)
                    continue
                if record.entry_id < topic.next_entry_id:
                    continue
                if record.payload_offset >= 0:
                    topic.add_stored(record.entry_id, self.storage, record.payload_offset,
                                     record.payload_size, record.num_messages, record.is_batch,
                                     record.publish_time, record.key)
                else:
                    topic.add(Entry(record.entry_id, record.payload, record.num_messages,
                                    record.is_batch, record.publish_time, record.key),
                              holes=True)
                topic.durable_id = record.entry_id
                if record.producer_name:
                    topic.dedup.record(record.producer_name, record.first_sequence_id,
                                       record.highest_sequence_id, record.entry_id)
                entries += 1
            elif isinstance(record, rec.TopicRecord):
                topic = self.topics.get(record.name) or self._add_topic(record.name,
                                                                        record.ledger_id)
                topic.skip_to(record.next_entry_id)
            elif isinstance(record, rec.CursorRecord):
                topic = self._by_ledger.get(record.ledger_id)
                if topic is None:
                    continue
                reached = max([record.mark_delete, *record.acked])
                named[record.ledger_id] = max(named.get(record.ledger_id, -1), reached)
                sub = topic.subscriptions.get(record.subscription)
                if sub is None:
                    sub = Subscription(topic, record.subscription, SubType(record.sub_type),
                                       record.mark_delete)
                    sub.delayed.limit = self.limits.max_delayed_messages
                    topic.subscriptions[sub.name] = sub
                sub.sub_type = SubType(record.sub_type)
                sub.restore(record.mark_delete, record.acked, record.partial)
            elif isinstance(record, rec.SubscriptionDeletedRecord):
                topic = self._by_ledger.get(record.ledger_id)
                if topic is not None:
                    topic.subscriptions.pop(record.subscription, None)
            elif isinstance(record, rec.PartitionedRecord):
                self.partitioned[record.name] = record.partitions
            elif isinstance(record, rec.DedupRecord):
                topic = self._by_ledger.get(record.ledger_id)
                if topic is not None:
                    topic.dedup.restore(record.producer_name, record.highest, record.first,
                                        record.last, record.entry_id)
            elif isinstance(record, rec.DedupExpiredRecord):
                topic = self._by_ledger.get(record.ledger_id)
                if topic is not None:
                    topic.dedup.forget(record.producer_name)
        missing = self._lost_entries(orphans, named)
        self.storage.finish_recovery({t.ledger_id: t.name for t in self.topics.values()},
                                     missing)
        if not self.storage.had_data:
            return
        for topic in self.topics.values():
            topic.trim(force=True)
        self.storage.rewrite(rec.snapshot_bodies(self.topics.values(), self.partitioned))
        log.info("recovered %d topics, %d entries, %d subscriptions from %d log records",
                 len(self.topics), entries,
                 sum(len(t.subscriptions) for t in self.topics.values()), records)

    def _lost_entries(self, orphans: dict[int, list[int]],
                      named: dict[int, int]) -> dict[str, list[int]]:
        """Entry ids the log shows existed but holds no more (after damage), per topic; a topic
        continues numbering after them, so that new messages never reuse a lost id."""
        # A damaged record's entry id may itself be damaged: one is believed only if it is
        # within as many ids of the topic's end as there are damaged records naming it.
        damaged: dict[int, list[int]] = {}
        for damage in getattr(self.storage, "damage", []):
            for ledger, entry_id in damage.entries:
                damaged.setdefault(ledger, []).append(entry_id)
        missing: dict[str, list[int]] = {}
        for topic in self.topics.values():
            last = topic.last_id
            ids = damaged.get(topic.ledger_id, [])
            plausible = [i for i in ids if last < i <= last + len(ids)]
            reached = max([named.get(topic.ledger_id, -1), *plausible])
            lost = topic.entries.hole_ids()
            if reached > last:
                topic.reserve_to(reached)
                lost += range(last + 1, reached + 1)
            if lost:
                missing[topic.name] = lost
        for ledger, ids in orphans.items():
            missing[f"ledger {ledger} (its topic record was lost)"] = ids
        return missing
