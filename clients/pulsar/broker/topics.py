"""Topic names and topics: the entries a topic holds (``entries.EntryTable``), in publish order."""

from __future__ import annotations

from dataclasses import dataclass, field

from .access_modes import ProducerAccess
from .dedup import DedupState
from .entries import Entry, EntryTable, PayloadSource
from .subscriptions import Subscription

PARTITION_SUFFIX = "-partition-"
DEFAULT_PREFIX = "persistent://public/default/"
_DOMAINS = ("persistent", "non-persistent")

# Acknowledged entries are kept (for seeks back and new Earliest subscribers) until a topic
# holds more than this many payload bytes; then the oldest acknowledged ones are dropped.
DEFAULT_RETENTION_BYTES = 64 * 1024 * 1024

# Entry ids are uint64 on the wire; -1 ("no entry") is written as its two's complement.
NO_ENTRY = -1
UINT64_MASK = (1 << 64) - 1


class InvalidTopicName(ValueError):
    """A topic name that is neither short ("t", "tenant/ns/t") nor fully qualified."""


def normalize_topic(name: str) -> str:
    """The fully qualified form of a topic name.

    ``my-topic`` becomes ``persistent://public/default/my-topic`` and ``tenant/ns/topic`` becomes
    ``persistent://tenant/ns/topic``; ``domain://tenant/ns/topic`` (and the legacy
    ``domain://tenant/cluster/ns/topic``) is kept as it is.
    """
    if "://" in name:
        domain, rest = name.split("://", 1)
        parts = rest.split("/")
        if domain not in _DOMAINS or len(parts) not in (3, 4) or not all(parts):
            raise InvalidTopicName(f"invalid topic name {name!r}")
        return name
    parts = name.split("/")
    if not all(parts):
        raise InvalidTopicName(f"invalid topic name {name!r}")
    if len(parts) == 1:
        return DEFAULT_PREFIX + name
    if len(parts) == 3:
        return "persistent://" + name
    raise InvalidTopicName(f"invalid topic name {name!r}")


def partition_index(name: str) -> int:
    """The partition number of ``t-partition-<n>``; -1 for a name that is not a partition."""
    base, sep, index = name.rpartition(PARTITION_SUFFIX)
    if sep and base and index.isdigit():
        return int(index)
    return -1


def base_topic(name: str) -> str:
    """The partitioned topic a partition belongs to (the name itself if not a partition)."""
    if partition_index(name) < 0:
        return name
    return name.rpartition(PARTITION_SUFFIX)[0]


def partition_name(topic: str, index: int) -> str:
    return f"{topic}{PARTITION_SUFFIX}{index}"


def namespace_of(name: str) -> str:
    """``tenant/namespace`` of a fully qualified topic name."""
    parts = name.split("://", 1)[1].split("/")
    return "/".join(parts[:-1])


@dataclass(eq=False)
class Topic:
    """One (non-partitioned) topic or one partition of a partitioned topic (an ``EntryLog``)."""

    name: str
    ledger_id: int
    # Holes (None) stand for entries lost to damage in the log (repaired): ids stay positions.
    entries: EntryTable = field(default_factory=EntryTable)
    next_entry_id: int = 0
    durable_id: int = NO_ENTRY  # highest entry id that is persisted, so dispatchable
    subscriptions: dict[str, Subscription] = field(default_factory=dict)
    producer_names: set[str] = field(default_factory=set)
    access: ProducerAccess = field(default_factory=ProducerAccess)  # producer access modes
    dedup: DedupState = field(default_factory=DedupState)
    partition: int = -1
    retention_bytes: int = DEFAULT_RETENTION_BYTES
    size: int = 0  # payload bytes of the entries held
    # Entries whose write failed: a resend of their message is stored, not answered as a
    # duplicate of something that is not on disk.
    failed_ids: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.partition = partition_index(self.name)

    @property
    def first_id(self) -> int:
        """Entry id of ``entries[0]``; older entries were trimmed."""
        return self.entries.first_id

    @first_id.setter
    def first_id(self, value: int) -> None:
        self.entries.first_id = value

    def append(self, payload: bytes, num_messages: int, is_batch: bool, publish_time: int,
               key: bytes, entry_id: int | None = None) -> Entry:
        """Add an entry with the next id (or with ``entry_id``, when replaying the log)."""
        entry = Entry(self.next_entry_id if entry_id is None else entry_id, payload,
                      num_messages, is_batch, publish_time, key)
        self.add(entry)
        return entry

    def _place(self, entry_id: int, holes: bool) -> None:
        """Check that ``entry_id`` may come next and leave the holes before it."""
        if entry_id < self.next_entry_id or (
                len(self.entries) and entry_id != self.next_entry_id and not holes):
            raise ValueError(f"{self.name}: entry {entry_id} out of order, "
                             f"expected {self.next_entry_id}")
        if not len(self.entries):
            self.first_id = entry_id
        else:
            self.entries.extend_holes(entry_id - self.next_entry_id)

    def add(self, entry: Entry, *, holes: bool = False) -> None:
        """Add a built entry; with ``holes`` (a repaired log) missing ids before it are kept
        as gaps that nothing is delivered from."""
        self._place(entry.entry_id, holes)
        self.entries.append(entry)
        self.size += entry.size
        self.next_entry_id = entry.entry_id + 1

    def add_stored(self, entry_id: int, source: PayloadSource, offset: int, size: int,
                   num_messages: int, is_batch: bool, publish_time: int, key: bytes) -> None:
        """Add an entry read back from the log (recovery), missing ids before it as holes."""
        self._place(entry_id, True)
        self.entries.append_stored(source, offset, size, num_messages, is_batch, publish_time,
                                   key)
        self.size += size
        self.next_entry_id = entry_id + 1

    def stored(self, entry_id: int, source: PayloadSource, offset: int) -> None:
        """An entry's payload was written at ``offset``: it is read back from there now."""
        self.entries.stored(entry_id, source, offset)

    def forget(self, entry_id: int) -> None:
        """An entry that could not be written: its id stays used, and nothing is served."""
        self.failed_ids.add(entry_id)
        index = entry_id - self.first_id
        if 0 <= index < len(self.entries) and not self.entries.is_hole(index):
            self.size -= self.entries.size_at(index)
            self.entries[index] = None

    def reserve_to(self, entry_id: int) -> None:
        """Number new entries after ``entry_id`` (ids up to it were lost to log damage)."""
        if entry_id < self.next_entry_id:
            return
        if not len(self.entries):
            self.skip_to(entry_id + 1)
            return
        self.entries.extend_holes(entry_id + 1 - self.next_entry_id)
        self.next_entry_id = entry_id + 1

    def entry(self, entry_id: int) -> Entry | None:
        return self.entries.get(entry_id)

    @property
    def last_id(self) -> int:
        """Id of the newest entry, persisted or not (NO_ENTRY when there is none)."""
        return self.next_entry_id - 1

    @property
    def first_available_id(self) -> int:
        return self.first_id if len(self.entries) else self.next_entry_id

    def skip_to(self, next_entry_id: int) -> None:
        """Continue numbering at ``next_entry_id`` (a topic whose entries were all trimmed)."""
        if next_entry_id > self.next_entry_id and not len(self.entries):
            self.next_entry_id = self.first_id = next_entry_id
            self.durable_id = next_entry_id - 1

    def find_by_publish_time(self, timestamp: int) -> int:
        """Id of the first entry published at or after ``timestamp`` (ms)."""
        index = self.entries.first_published_at(timestamp)
        return self.next_entry_id if index < 0 else self.first_id + index

    def trim(self, *, force: bool = False) -> int:
        """Drop the oldest entries every subscription has acknowledged while the topic holds
        more than ``retention_bytes``; return how many were dropped.

        A topic without subscriptions keeps everything, so that a later subscriber starting at
        Earliest sees what was published before it came. Trimming shifts the columns, so unless
        ``force`` it waits until there is a worthwhile number of entries to drop.
        """
        entries = self.entries
        if self.size <= self.retention_bytes or not self.subscriptions or not len(entries):
            return 0
        upto = min(sub.mark_delete for sub in self.subscriptions.values())
        excess = self.size - self.retention_bytes
        count = dropped = 0
        for index in range(len(entries)):
            if self.first_id + index > upto or dropped >= excess:
                break
            dropped += entries.size_at(index)
            count += 1
        if count == 0 or (not force and count < 256 and count < len(entries)):
            return 0
        del entries[:count]
        self.first_id += count
        self.size -= dropped
        return count
