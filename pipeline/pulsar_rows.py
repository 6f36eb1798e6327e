"""Received Pulsar messages as Arrow record batches, with the data source's row schema.

Columns are built per entry where they can be: the messages of one entry (a producer's
batch) share their ledger and entry id, publish time, producer name, topic and redelivery
count, so those are computed once per entry and repeated, and the ``message_id_bytes``
encoding is assembled from a per-entry prefix and the message's batch index. That keeps
the per-message work to what really differs: payload, key, properties and event time.
The ``decoded`` column is built from the ``value`` column by
``runtime.spark.columnar.decode_column``: straight into Arrow buffers where the message type
allows it, each value through the generated class otherwise; null where a value does not
decode, either way.
"""

from __future__ import annotations

from itertools import groupby
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from protoframe.clients.pulsar.consumer import entry_messages, uniform_layout
from protoframe.clients.pulsar.message import EntryInfo, Message, MessageId, ReceivedEntry
from protoframe.runtime.codec.protowire import SMALL_VARINTS, varint_bytes
from protoframe.runtime.spark.columnar import decode_column
from protoframe.runtime.spark.rows import RowCodec

MESSAGE_FIELDS = [
    StructField("key", BinaryType(), True),
    StructField("value", BinaryType(), True),
    StructField("topic", StringType(), False),
    StructField("partition", IntegerType(), False),
    StructField("message_id", StringType(), False),
    StructField("message_id_bytes", BinaryType(), False),
    StructField("publish_time", TimestampType(), True),
    StructField("event_time", TimestampType(), True),
    StructField("properties", MapType(StringType(), StringType(), False), True),
    StructField("producer_name", StringType(), True),
    StructField("redelivery_count", IntegerType(), False),
]
MESSAGE_SCHEMA = StructType(MESSAGE_FIELDS)

_TIMESTAMP = pa.timestamp("us", tz="UTC")
_PROPERTIES = pa.map_(pa.string(), pa.field("value", pa.string(), nullable=False))
ARROW_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string(), nullable=False),
    pa.field("partition", pa.int32(), nullable=False),
    pa.field("message_id", pa.string(), nullable=False),
    pa.field("message_id_bytes", pa.binary(), nullable=False),
    pa.field("publish_time", _TIMESTAMP),
    pa.field("event_time", _TIMESTAMP),
    pa.field("properties", _PROPERTIES),
    pa.field("producer_name", pa.string()),
    pa.field("redelivery_count", pa.int32(), nullable=False),
]


def arrow_schema(codec: RowCodec[Any] | None) -> pa.Schema:
    """The Arrow schema of the rows read, with a ``decoded`` column when there is a codec."""
    return pa.schema(ARROW_FIELDS + (
        [pa.field("decoded", codec.arrow_type)] if codec is not None else []))


def _micros(ms: int) -> int | None:
    return ms * 1000 if ms > 0 else None


# A run of at least this many messages of one entry is built with Arrow kernels (constants
# repeated, ids joined from tables) rather than Python lists; below it, per-run kernel calls
# would cost more than they save.
_VECTOR_RUN = 32
_INDEX_LIMIT = 1 << 16
_INDEX_TEXT: pa.Array | None = None
_INDEX_BYTES: pa.Array | None = None
_EMPTY_MAPS: pa.Array | None = None


def _index_tables() -> tuple[pa.Array, pa.Array]:
    """"<i>)" and the protobuf batch_index field (tag 4, varint i) for i below 65536."""
    global _INDEX_TEXT, _INDEX_BYTES
    if _INDEX_TEXT is None or _INDEX_BYTES is None:
        _INDEX_TEXT = pa.array([f"{i})" for i in range(_INDEX_LIMIT)], pa.string())
        _INDEX_BYTES = pa.array([b"\x20" + varint_bytes(i) for i in range(_INDEX_LIMIT)],
                                pa.binary())
    return _INDEX_TEXT, _INDEX_BYTES


def _empty_maps(count: int) -> pa.Array:
    global _EMPTY_MAPS
    if _EMPTY_MAPS is None or len(_EMPTY_MAPS) < count:
        _EMPTY_MAPS = pa.array([[]] * max(count, 1024), _PROPERTIES)
    return _EMPTY_MAPS.slice(0, count)


class _EntryColumns:
    """What every message of one entry shares, worked out once."""

    __slots__ = ("id_text", "id_head", "id_tail", "publish", "producer", "topic",
                 "redelivery", "batched", "meta")

    def __init__(self, entry: EntryInfo, partition: int) -> None:
        # The ids of the rows carry the read partition's index (the entry knows it too).
        whole = MessageId(partition, entry.ledger_id, entry.entry_id)
        self.id_text = f"({entry.ledger_id},{entry.entry_id},{partition},"
        self.id_head = whole.serialize()  # fields 1-3; batch index and size follow
        self.id_tail = b"\x30" + varint_bytes(entry.batch_size) if entry.batch_size else b""
        meta = entry.metadata
        self.meta = meta
        self.publish = _micros(meta.publish_time)
        self.producer = meta.producer_name
        self.topic = entry.topic
        self.redelivery = entry.redelivery_count
        self.batched = entry.batch_size > 0


# Column order of the builder's per-column pieces (the row schema's, less ``partition``).
(_KEY, _VALUE, _TOPIC, _ID, _ID_BYTES, _PUBLISH, _EVENT, _PROPS, _PRODUCER,
 _REDELIVERY) = range(10)
_TYPES = [pa.binary(), pa.binary(), pa.string(), pa.string(), pa.binary(), _TIMESTAMP,
          _TIMESTAMP, _PROPERTIES, pa.string(), pa.int32()]


class _Pieces:
    """Per column: Arrow chunks in row order, plus the Python values not yet converted."""

    def __init__(self) -> None:
        self.chunks: list[list[pa.Array]] = [[] for _ in _TYPES]
        self.values: list[list[Any]] = [[] for _ in _TYPES]

    def flush(self) -> None:
        for column, values in enumerate(self.values):
            if values:
                self.chunks[column].append(pa.array(values, _TYPES[column]))
                self.values[column] = []

    def add_arrays(self, arrays: list[pa.Array]) -> None:
        self.flush()
        for column, array in enumerate(arrays):
            self.chunks[column].append(array)

    def columns(self) -> list[pa.Array]:
        self.flush()
        return [chunks[0] if len(chunks) == 1 else
                pa.concat_arrays(chunks) if chunks else pa.array([], _TYPES[column])
                for column, chunks in enumerate(self.chunks)]


class RowBatchBuilder:
    """Collects received messages, or whole entries, and turns them into Arrow batches of the
    row schema, in the order they were added."""

    def __init__(self, codec: RowCodec[Any] | None, partition: int) -> None:
        self.codec = codec
        self.partition = partition
        self.schema = arrow_schema(codec)
        self.items: list[Message | ReceivedEntry] = []
        self.count = 0

    def add(self, msg: Message) -> None:
        self.items.append(msg)
        self.count += 1

    def extend(self, msgs: list[Message]) -> None:
        self.items.extend(msgs)
        self.count += len(msgs)

    def add_entry(self, entry: ReceivedEntry) -> None:
        """All the messages of an entry (``Consumer.receive_entries``), not yet split."""
        self.items.append(entry)
        self.count += entry.info.batch_size or 1

    def __len__(self) -> int:
        return self.count

    def take(self) -> pa.RecordBatch:
        """The Arrow batch of what was added so far; the builder starts empty again."""
        items, self.items, count, self.count = self.items, [], self.count, 0
        pieces = _Pieces()
        part = self.partition
        for is_entry, group in groupby(items, _is_entry):
            if is_entry:
                for entry in group:
                    assert isinstance(entry, ReceivedEntry)
                    self._entry(entry, part, pieces)
            else:
                self._messages(cast(list[Message], list(group)), part, pieces)
        (key, value, topic, ids, id_bytes, publish, event, props, producer,
         redelivery) = pieces.columns()
        columns = [key, value, topic, pa.repeat(pa.scalar(part, pa.int32()), count), ids,
                   id_bytes, publish, event, props, producer, redelivery]
        if self.codec is not None:  # columnar where it can, null where a value does not decode
            columns.append(decode_column(self.codec, value))
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)

    def _messages(self, msgs: list[Message], part: int, pieces: _Pieces) -> None:
        for entry, group in groupby(msgs, Message.entry):
            run = list(group)
            cols = _EntryColumns(entry, part)
            if not (cols.batched and len(run) >= _VECTOR_RUN and self._vector_run(run, cols,
                                                                                  pieces)):
                self._list_run(run, cols, pieces)

    def _entry(self, entry: ReceivedEntry, part: int, pieces: _Pieces) -> None:
        """A whole entry: a long batch of fixed-size records straight from its buffer."""
        info = entry.info
        count = info.batch_size
        layout = uniform_layout(entry.data, count) if count >= _VECTOR_RUN else None
        if layout is None or count > _INDEX_LIMIT:
            self._messages(entry_messages(entry), part, pieces)
            return
        header, size, stride = layout
        records = pa.FixedSizeBinaryArray.from_buffers(
            pa.binary(stride), count, [None, pa.py_buffer(entry.data)])
        values = pc.binary_slice(records, header, header + size).cast(pa.binary())
        self._add_uniform(_EntryColumns(info, part), 0, count, values, pieces)

    @staticmethod
    def _add_uniform(cols: _EntryColumns, first: int, k: int, values: pa.Array,
                     pieces: _Pieces) -> None:
        """Rows ``first`` to ``first + k - 1`` of a batch without per-message metadata."""
        text, index_bytes = _index_tables()
        pieces.add_arrays([
            pa.nulls(k, pa.binary()),
            values,
            pa.repeat(pa.scalar(cols.topic, pa.string()), k),
            pc.binary_join_element_wise(pa.scalar(cols.id_text), text.slice(first, k), ""),
            pc.binary_join_element_wise(pa.scalar(cols.id_head), index_bytes.slice(first, k),
                                        pa.scalar(cols.id_tail), b""),
            pa.repeat(pa.scalar(cols.publish, _TIMESTAMP), k),
            pa.nulls(k, _TIMESTAMP),
            _empty_maps(k),
            pa.repeat(pa.scalar(cols.producer, pa.string()), k),
            pa.repeat(pa.scalar(cols.redelivery, pa.int32()), k),
        ])

    @classmethod
    def _vector_run(cls, run: list[Message], cols: _EntryColumns, pieces: _Pieces) -> bool:
        """Add a long run of one batch with Arrow kernels; False when it does not qualify
        (per-message metadata, or batch indexes that are not consecutive)."""
        k = len(run)
        first = run[0].batch_index()
        if run[-1].batch_index() - first != k - 1 or first + k > _INDEX_LIMIT:
            return False  # indexes only grow within an entry: consecutive iff the ends fit
        if any(map(Message.single_metadata, run)):  # metadata objects are always true
            return False
        cls._add_uniform(cols, first, k, pa.array([m.data() for m in run], pa.binary()),
                         pieces)
        return True

    @staticmethod
    def _list_run(run: list[Message], cols: _EntryColumns, pieces: _Pieces) -> None:
        k = len(run)
        (keys, values, topics, ids, id_bytes, publish, events, props, producers,
         redeliveries) = pieces.values
        values += [m.data() for m in run]
        publish += [cols.publish] * k
        producers += [cols.producer] * k
        topics += [cols.topic] * k
        redeliveries += [cols.redelivery] * k
        if not cols.batched:
            meta = cols.meta
            ids += [f"{cols.id_text}-1)"] * k
            id_bytes += [cols.id_head] * k
            keys += [meta.partition_key.encode() if meta.has_partition_key() else None] * k
            events += [_micros(meta.event_time)] * k
            props += [[(kv.key, kv.value) for kv in meta.properties]] * k
            return
        text, head, tail = cols.id_text, cols.id_head, cols.id_tail
        for m in run:
            index = m.batch_index()
            ids.append(f"{text}{index})")
            id_bytes.append(head + b"\x20" + (SMALL_VARINTS[index] if index < 128
                                              else varint_bytes(index)) + tail)
            smeta = m.single_metadata()
            if smeta is None:
                keys.append(None)
                events.append(None)
                props.append([])
            else:
                keys.append(smeta.partition_key.encode() if smeta.has_partition_key()
                            else None)
                events.append(smeta.event_time * 1000 if smeta.event_time > 0 else None)
                props.append([(kv.key, kv.value) for kv in smeta.properties])


def _is_entry(item: Message | ReceivedEntry) -> bool:
    return type(item) is ReceivedEntry
