"""Received messages and message ids, with the official client's accessor names.

A ``Message`` is small: its data, its index in its batch, and a reference to an ``EntryInfo``
that every message of the same entry (one MESSAGE frame) shares: ledger and entry ids, the
entry's ``MessageMetadata``, redelivery count, topic, and the acknowledgement state of the
batch. Per-message metadata (``SingleMessageMetadata``) is kept only when it holds more than
the payload size and sequence id, so most messages carry None there. ``message_id()`` builds
a ``MessageId`` on demand; acknowledging a ``Message`` never needs one.
"""

from __future__ import annotations

from functools import total_ordering
from typing import Any, ClassVar, Generic, Protocol, cast

from protoframe.clients.pulsar.acks import AckGroupingTracker
from protoframe.clients.pulsar.schema.base import Schema, ValueT
from protoframe.generated.pulsar import pulsar_api as pb

__all__ = ["EntryInfo", "EntryOwner", "Message", "MessageId"]

_MASK64 = 0xFFFF_FFFF_FFFF_FFFF
_SIGN64 = 1 << 63


def _to_unsigned(value: int) -> int:
    return value & _MASK64


def _to_signed(value: int) -> int:
    return value - (1 << 64) if value >= _SIGN64 else value


@total_ordering
class MessageId:
    """Where a message is stored: ledger, entry, partition and position in its batch.

    The constructor takes the official client's argument order
    (``MessageId(partition, ledger_id, entry_id, batch_index)``). ``MessageId.earliest`` and
    ``MessageId.latest`` are the two ends of a topic, for ``seek`` and start positions.
    """

    __slots__ = ("_ledger_id", "_entry_id", "_partition", "_batch_index", "_batch_size",
                 "_topic")

    earliest: ClassVar[MessageId]
    latest: ClassVar[MessageId]

    def __init__(self, partition: int = -1, ledger_id: int = -1, entry_id: int = -1,
                 batch_index: int = -1, batch_size: int = 0) -> None:
        self._partition = partition
        self._ledger_id = ledger_id
        self._entry_id = entry_id
        self._batch_index = batch_index
        self._batch_size = batch_size
        # The (partition) topic a received message came from, for consumers of several
        # topics, whose partitions share numbers; not part of equality, as in Pulsar.
        self._topic = ""

    def ledger_id(self) -> int:
        return self._ledger_id

    def entry_id(self) -> int:
        return self._entry_id

    def partition(self) -> int:
        return self._partition

    def batch_index(self) -> int:
        return self._batch_index

    def batch_size(self) -> int:
        return self._batch_size

    def to_proto(self) -> pb.MessageIdData:
        """This id as the protocol's ``MessageIdData``."""
        data = pb.MessageIdData(ledgerId=_to_unsigned(self._ledger_id),
                                entryId=_to_unsigned(self._entry_id))
        if self._partition >= 0:
            data.partition = self._partition
        if self._batch_index >= 0:
            data.batch_index = self._batch_index
            if self._batch_size > 0:
                data.batch_size = self._batch_size
        return data

    @classmethod
    def from_proto(cls, data: pb.MessageIdData, partition: int | None = None) -> MessageId:
        return cls(data.partition if partition is None else partition,
                   _to_signed(data.ledgerId), _to_signed(data.entryId),
                   data.batch_index, data.batch_size)

    def serialize(self) -> bytes:
        """Bytes that ``MessageId.deserialize`` turns back into this id."""
        return self.to_proto().encode()

    @staticmethod
    def deserialize(data: bytes) -> MessageId:
        return MessageId.from_proto(pb.MessageIdData.decode(data))

    def _key(self) -> tuple[int, int, int, int]:
        return (self._ledger_id, self._entry_id, self._batch_index, self._partition)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return self._key() == other._key()

    def __lt__(self, other: MessageId) -> bool:
        return self._key() < other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        return f"({self._ledger_id},{self._entry_id},{self._partition},{self._batch_index})"

    def __repr__(self) -> str:
        return (f"MessageId(partition={self._partition}, ledger_id={self._ledger_id}, "
                f"entry_id={self._entry_id}, batch_index={self._batch_index})")


MessageId.earliest = MessageId(-1, -1, -1, -1)
MessageId.latest = MessageId(-1, (1 << 63) - 1, (1 << 63) - 1, -1)


class EntryOwner(Protocol):
    """What a received entry needs of the topic consumer it came from: its flow control and
    its acknowledgements (a ``consumer.TopicConsumer``)."""

    permits: int
    refill: int
    index_acks: bool
    tracker: AckGroupingTracker
    schema: Schema[Any] | None

    def taken(self, count: int = 1) -> None: ...

    def ack_cumulative(self, ledger: int, entry: int, index: int, size: int,
                       info: EntryInfo | None) -> None: ...

    def negative_ack(self, ledger: int, entry: int, delay: float | None = None) -> None: ...


class EntryInfo:
    """What the messages of one received entry share (see the module docstring)."""

    __slots__ = ("ledger_id", "entry_id", "partition", "batch_size", "metadata",
                 "redelivery_count", "consumer", "acked", "unacked", "topic")

    def __init__(self, ledger_id: int, entry_id: int, partition: int, batch_size: int,
                 metadata: pb.MessageMetadata, redelivery_count: int,
                 consumer: EntryOwner | None, topic: str) -> None:
        self.ledger_id = ledger_id
        self.entry_id = entry_id
        self.partition = partition
        self.batch_size = batch_size  # 0: not a batch
        self.metadata = metadata
        self.redelivery_count = redelivery_count
        self.consumer = consumer
        # Per-index acknowledgement flags of a batch, made on the first individual ack.
        self.acked: bytearray | None = None
        self.unacked = batch_size
        self.topic = topic


class ReceivedEntry:
    """One entry as the broker sent it (payload decompressed), not yet split into messages.

    What ``Consumer.receive_entries`` delivers; ``consumer.entry_messages`` splits it.
    """

    __slots__ = ("info", "data")

    def __init__(self, info: EntryInfo, data: bytes) -> None:
        self.info = info
        self.data = data

    def __repr__(self) -> str:
        return (f"ReceivedEntry({self.info.ledger_id}:{self.info.entry_id}, "
                f"{self.info.batch_size or 1} messages, {len(self.data)} bytes)")


class Message(Generic[ValueT]):
    """One received message; ``value()`` is of type ``ValueT`` (bytes without a schema)."""

    __slots__ = ("_data", "_index", "_entry", "_smeta")

    def __init__(self, data: bytes, index: int, entry: EntryInfo,
                 smeta: pb.SingleMessageMetadata | None) -> None:
        self._data = data
        self._index = index
        self._entry = entry
        self._smeta = smeta

    def data(self) -> bytes:
        """The payload (decompressed)."""
        return self._data

    def value(self) -> ValueT:
        """The payload decoded by the consumer's schema; without one, the same as ``data()``."""
        owner = self._entry.consumer
        schema = owner.schema if owner is not None else None
        if schema is None:
            return cast(ValueT, self._data)
        return cast(ValueT, schema.decode_versioned(self._data,
                                                    self._entry.metadata.schema_version))

    def properties(self) -> dict[str, str]:
        smeta = self._smeta
        if self._entry.batch_size:
            if smeta is None:
                return {}
            return {kv.key: kv.value for kv in smeta.properties}
        return {kv.key: kv.value for kv in self._entry.metadata.properties}

    def partition_key(self) -> str:
        if self._entry.batch_size:
            return self._smeta.partition_key if self._smeta is not None else ""
        return self._entry.metadata.partition_key

    def has_partition_key(self) -> bool:
        if self._entry.batch_size:
            return self._smeta is not None and self._smeta.has_partition_key()
        return self._entry.metadata.has_partition_key()

    def ordering_key(self) -> bytes:
        if self._entry.batch_size:
            return self._smeta.ordering_key if self._smeta is not None else b""
        return self._entry.metadata.ordering_key

    def publish_timestamp(self) -> int:
        """Publish time in milliseconds since the epoch."""
        return self._entry.metadata.publish_time

    def event_timestamp(self) -> int:
        """Event time in milliseconds since the epoch; 0 when the producer set none."""
        if self._entry.batch_size:
            return self._smeta.event_time if self._smeta is not None else 0
        return self._entry.metadata.event_time

    def sequence_id(self) -> int:
        """The producer's sequence id for this message."""
        smeta = self._smeta
        if smeta is not None and smeta.has_sequence_id():
            return smeta.sequence_id
        meta = self._entry.metadata
        return meta.sequence_id + (self._index if self._index > 0 else 0)

    def producer_name(self) -> str:
        return self._entry.metadata.producer_name

    def entry(self) -> EntryInfo:
        """What this message shares with the others of its entry (one object per entry)."""
        return self._entry

    def batch_index(self) -> int:
        """Its index in its entry's batch; -1 when the entry is not a batch."""
        return self._index

    def single_metadata(self) -> pb.SingleMessageMetadata | None:
        """Its own metadata inside a batch; None when the entry is not a batch."""
        return self._smeta

    def message_id(self) -> MessageId:
        e = self._entry
        mid = MessageId(e.partition, e.ledger_id, e.entry_id, self._index, e.batch_size)
        mid._topic = e.topic
        return mid

    def topic_name(self) -> str:
        return self._entry.topic

    def redelivery_count(self) -> int:
        return self._entry.redelivery_count

    def schema_version(self) -> bytes:
        return self._entry.metadata.schema_version

    def __repr__(self) -> str:
        return f"Message(id={self.message_id()}, {len(self._data)} bytes)"

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, Message):
            return NotImplemented
        return self.message_id() == other.message_id() and self._data == other._data

    def __hash__(self) -> int:
        return hash(self.message_id())
